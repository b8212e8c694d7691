"""ZooKeeperMetadataStore against a real ZooKeeper: compare-and-set, ephemeral registrations,
the controller race, topics, producer-id blocks, sessions and an unreachable server.

Each test has a chroot of its own (``zookeeper_connect``); sessions are 1 s so expiry is quick.
"""

from __future__ import annotations

import dataclasses

import json
import logging
import os
import threading
import time

import pytest

from oncelog.cluster import zookeeper_process
from oncelog.cluster.zookeeper_process import (ZooKeeperNotInstalled, ZooKeeperProcess,
                                               ZooKeeperStartError, free_port)
from oncelog.controller.store import (BrokerRegistration, MetadataChange, MetadataEvent,
                                      NodeIdInUse, PartitionState, StoreUnavailable,
                                      TopicExists, TopicRecord, new_topic_id)
from oncelog.controller.zookeeper_store import ZooKeeperMetadataStore, split_connect
from tests.zookeeper_server import expire_session, raw_client, wait_for

SESSION_TIMEOUT_MS = 1000


@pytest.fixture
def store_factory(zookeeper_connect):
    """``store_factory()`` connects a new store (its own session) to this test's chroot."""
    stores: list[ZooKeeperMetadataStore] = []

    def connect(**kwargs) -> ZooKeeperMetadataStore:
        kwargs.setdefault("session_timeout_ms", SESSION_TIMEOUT_MS)
        store = ZooKeeperMetadataStore(zookeeper_connect, **kwargs)
        stores.append(store)
        return store.connect()

    yield connect
    for store in stores:
        store.close()


class Recorder(list):
    """The events a store delivered; ``in`` asks for a kind of change, or an exact event."""

    def __contains__(self, wanted) -> bool:
        if isinstance(wanted, MetadataChange):
            return any(event.change is wanted for event in self)
        return super().__contains__(wanted)

    def kinds(self) -> list[MetadataChange]:
        return [event.change for event in self]


def recorder(store: ZooKeeperMetadataStore) -> Recorder:
    changes = Recorder()
    store.watch(changes.append)
    return changes


def registration(node_id: int) -> BrokerRegistration:
    return BrokerRegistration(node_id, "127.0.0.1", 9090 + node_id, rack=f"rack-{node_id}")


def topic(name: str, assignment: list[list[int]], configs: dict[str, str] | None = None,
          ) -> tuple[TopicRecord, list[PartitionState]]:
    record = TopicRecord(name, new_topic_id(), len(assignment), dict(configs or {}),
                         [list(replicas) for replicas in assignment])
    states = [PartitionState(replicas[0], 0, tuple(replicas)) for replicas in assignment]
    return record, states


def race(*actions):
    """Run the actions at once on threads; their results in order."""
    barrier = threading.Barrier(len(actions))
    results: list[object] = [None] * len(actions)

    def run(index: int) -> None:
        barrier.wait()
        results[index] = actions[index]()
    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(actions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    return results


# -- compare-and-set -------------------------------------------------------------------------

def test_compare_and_set_succeeds_with_the_version_read_and_fails_after_another_write(
        store_factory):
    first, second = store_factory(), store_factory()
    record, states = topic("orders", [[1, 2, 3]])
    created, created_states = first.create_topic(record, states)
    czxid = created.created_version
    assert created_states == [PartitionState(1, 0, (1, 2, 3), version=0, created_version=czxid)]
    changes = recorder(second)

    read_by_first = first.partition_state("orders", 0)
    read_by_second = second.partition_state("orders", 0, watch=True)
    assert read_by_first == PartitionState(1, 0, (1, 2, 3), version=0, created_version=czxid)

    written = second.compare_and_set_partition_state("orders", 0, read_by_second.elect(2, (2, 3)))
    assert written == PartitionState(2, 1, (2, 3), version=1, created_version=czxid)
    assert first.compare_and_set_partition_state("orders", 0, read_by_first.with_isr((1,))) is None
    assert first.partition_state("orders", 0) == written  # the loser's write left no trace
    # the watch the read set fired once, naming the partition
    changed = MetadataEvent(MetadataChange.PARTITION_STATE, "orders", 0)
    wait_for(lambda: changed in changes, what="PARTITION_STATE watch")

    again = first.compare_and_set_partition_state("orders", 0, written.with_isr((2,)))
    assert again == PartitionState(2, 1, (2,), version=2, created_version=czxid)
    assert again.order > written.order > read_by_first.order
    time.sleep(0.3)
    assert changes.count(changed) == 1  # one-shot: not set again without a read


def test_two_stores_racing_compare_and_set_exactly_one_wins(store_factory):
    first, second = store_factory(), store_factory()
    first.create_topic(*topic("race", [[1, 2]]))
    for _round in range(10):
        seen = first.partition_state("race", 0)
        results = race(
            lambda: first.compare_and_set_partition_state("race", 0, seen.elect(1, (1,))),
            lambda: second.compare_and_set_partition_state("race", 0, seen.elect(2, (2,))))
        winners = [result for result in results if result is not None]
        assert len(winners) == 1, results
        assert second.partition_state("race", 0) == winners[0]
        assert winners[0].version == seen.version + 1


def test_a_state_without_a_version_is_created_only_where_none_exists(store_factory):
    store = store_factory()
    store.create_topic(*topic("fresh", [[1]]))
    assert store.compare_and_set_partition_state("fresh", 0, PartitionState(1, 5, (1,))) is None
    assert store.compare_and_set_partition_state("missing", 0, PartitionState(1, 0, (1,))) is None


# -- brokers ---------------------------------------------------------------------------------

def test_a_registration_is_ephemeral_and_its_end_fires_the_brokers_watch(store_factory):
    leaving, staying = store_factory(), store_factory()
    one = leaving.register_broker(registration(1))
    two = staying.register_broker(registration(2))
    assert one.broker_epoch > 0 and two.broker_epoch > one.broker_epoch  # czxids grow
    assert staying.live_brokers() == {1: one, 2: two}
    assert one.rack == "rack-1"

    changes = recorder(staying)
    leaving.close()
    wait_for(lambda: MetadataChange.BROKERS in changes, timeout_s=5, what="BROKERS watch")
    assert staying.live_brokers() == {2: two}


def test_a_second_live_broker_with_the_same_node_id_is_refused(store_factory):
    first, second = store_factory(), store_factory()
    first.register_broker(registration(1))
    with pytest.raises(NodeIdInUse, match="node.id 1 is already registered"):
        second.register_broker(registration(1))
    again = first.register_broker(registration(1))  # our own registration is ours to repeat
    assert first.live_brokers()[1].broker_epoch == again.broker_epoch

    first.close()
    assert second.register_broker(registration(1)).broker_epoch > again.broker_epoch


def test_registration_znode_is_kafkas_layout(store_factory, zookeeper_connect):
    store = store_factory()
    store.register_broker(registration(3))
    client = raw_client(zookeeper_connect)
    try:
        document = json.loads(client.get("/brokers/ids/3")[0])
        _data, stat = client.get("/brokers/ids/3")
    finally:
        client.stop()
        client.close()
    assert document["host"] == "127.0.0.1" and document["port"] == 9093
    assert document["endpoints"] == ["PLAINTEXT://127.0.0.1:9093"]
    assert document["rack"] == "rack-3" and document["version"] == 4
    assert stat.ephemeralOwner == store.session_id


# -- the controller --------------------------------------------------------------------------

def test_one_of_two_racing_brokers_becomes_controller_and_the_other_after_it_leaves(
        store_factory):
    first, second = store_factory(), store_factory()
    assert first.controller_id() == -1
    won = race(lambda: first.try_become_controller(1), lambda: second.try_become_controller(2))
    assert sorted(won) == [False, True]
    winner, loser, loser_id = (first, second, 2) if won[0] else (second, first, 1)
    assert loser.controller_id() == winner.controller_id() == (1 if won[0] else 2)
    assert winner.try_become_controller(1 if won[0] else 2)  # held already: still True
    assert loser.controller_epoch() == 1

    changes = recorder(loser)
    winner.close()
    wait_for(lambda: MetadataChange.CONTROLLER in changes, timeout_s=5, what="CONTROLLER watch")
    assert loser.controller_id() == -1
    assert loser.try_become_controller(loser_id)
    assert loser.controller_id() == loser_id and loser.controller_epoch() == 2


# -- topics ----------------------------------------------------------------------------------

def test_topics_round_trip_with_configs_and_assignment(store_factory):
    store, other = store_factory(), store_factory()
    changes = recorder(other)
    empty = other.list_topics(watch=True)
    record, states = topic("events", [[1, 2], [2, 3], [3, 1]],
                           {"min.insync.replicas": "2", "cleanup.policy": "compact"})
    created, _ = store.create_topic(record, states)
    assert created == dataclasses.replace(record, created_version=created.created_version)
    assert other.load_topics() == {"events": created}
    listing = other.list_topics()
    assert listing.names == {"events"} and listing.version >= created.created_version
    assert created.created_version > empty.version
    assert [other.partition_state("events", index) for index in range(3)] == [
        PartitionState(1, 0, (1, 2), 0, created.created_version),
        PartitionState(2, 0, (2, 3), 0, created.created_version),
        PartitionState(3, 0, (3, 1), 0, created.created_version)]
    wait_for(lambda: MetadataChange.TOPICS in changes, timeout_s=5, what="TOPICS watch")

    with pytest.raises(TopicExists):
        other.create_topic(*topic("events", [[1]]))
    assert other.load_topics() == {"events": created}  # the failed creation wrote nothing

    changes.clear()
    assert other.read_topic("events", watch=True) == created
    grown = dataclasses.replace(created, partitions=5,
                                assignment=record.assignment + [[1, 3], [2, 1]])
    added = other.add_partitions(grown, [PartitionState(1, 0, (1, 3)),
                                         PartitionState(2, 0, (2, 1))])
    assert store.load_topics() == {"events": grown}
    assert store.partition_state("events", 4) == added[1]
    assert added[1].created_version > created.created_version
    wait_for(lambda: MetadataEvent(MetadataChange.TOPIC, "events") in changes, timeout_s=5,
             what="TOPIC watch (grown)")

    changes.clear()
    other.list_topics(watch=True)
    store.delete_topic("events")
    store.delete_topic("events")  # already gone: no error
    assert other.load_topics() == {}
    assert other.partition_state("events", 0) is None
    wait_for(lambda: MetadataChange.TOPICS in changes, timeout_s=5, what="TOPICS watch (deleted)")
    after_delete = other.list_topics()
    assert after_delete.names == set() and after_delete.version > created.created_version
    with pytest.raises(KeyError):  # the incarnation named is gone
        other.add_partitions(grown, [PartitionState(1, 0, (1, 3))])

    again, _ = store.create_topic(*topic("events", [[2]]))  # the name is free again
    assert again.created_version > after_delete.version
    assert other.load_topics()["events"].assignment == [[2]]
    assert other.load_topics()["events"].configs == {}


def test_topic_creation_is_one_transaction_in_kafkas_layout(store_factory, zookeeper_connect):
    store = store_factory()
    record, states = topic("layout", [[1, 2], [2, 1]], {"retention.ms": "1000"})
    store.create_topic(record, states)
    client = raw_client(zookeeper_connect)
    try:
        topic_document = json.loads(client.get("/brokers/topics/layout")[0])
        config_document = json.loads(client.get("/config/topics/layout")[0])
        state_document = json.loads(client.get("/brokers/topics/layout/partitions/1/state")[0])
        topic_czxid = client.exists("/brokers/topics/layout").czxid
        state_czxid = client.exists("/brokers/topics/layout/partitions/1/state").czxid
    finally:
        client.stop()
        client.close()
    assert topic_document["partitions"] == {"0": [1, 2], "1": [2, 1]}
    assert topic_document["topic_id"] == record.topic_id
    assert config_document == {"version": 1, "config": {"retention.ms": "1000"}}
    assert state_document == {"controller_epoch": 0, "leader": 2, "version": 1,
                              "leader_epoch": 0, "isr": [2, 1]}
    assert topic_czxid == state_czxid  # created by the same multi-op


# -- producer ids ----------------------------------------------------------------------------

def test_producer_id_blocks_from_two_stores_never_overlap(store_factory):
    first, second = store_factory(), store_factory()
    blocks: list[tuple[int, int]] = []
    lock = threading.Lock()

    def allocate(store, count: int = 15, size: int = 10) -> None:
        for _ in range(count):
            start = store.allocate_producer_id_block(size)
            with lock:
                blocks.append((start, start + size))
    race(lambda: allocate(first), lambda: allocate(second))
    blocks.sort()
    assert len(blocks) == 30 and blocks[0][0] == 0
    for (_start, end), (next_start, _next_end) in zip(blocks, blocks[1:]):
        assert end <= next_start, blocks


# -- sessions --------------------------------------------------------------------------------

def test_confirm_session_is_true_while_registered_and_false_once_the_session_expired(
        store_factory):
    store = store_factory()
    assert not store.confirm_session()  # nothing registered yet
    first = store.register_broker(registration(1))
    assert store.confirm_session()

    changes = recorder(store)
    expire_session(store)
    wait_for(lambda: MetadataChange.SESSION_LOST in changes, timeout_s=10, what="SESSION_LOST")
    assert not store.confirm_session()
    wait_for(lambda: MetadataChange.SESSION_RESTORED in changes, timeout_s=10,
             what="SESSION_RESTORED")
    assert changes.kinds().index(MetadataChange.SESSION_LOST) < changes.kinds().index(
        MetadataChange.SESSION_RESTORED)
    assert not store.confirm_session()  # a new session, but our registration died

    again = store.register_broker(registration(1))
    assert again.broker_epoch > first.broker_epoch
    assert store.confirm_session()


def test_confirm_session_is_false_when_another_session_holds_our_node_id(store_factory):
    store, usurper = store_factory(), store_factory()
    store.register_broker(registration(1))
    expire_session(store)
    wait_for(lambda: not store.confirm_session(), timeout_s=10, what="session expiry")
    usurper.register_broker(registration(1))
    assert not store.confirm_session()
    assert usurper.confirm_session()


def test_an_unreachable_zookeeper_is_one_line_per_attempt_then_store_unavailable(
        caplog, capfd):
    port = free_port()  # nothing listens there
    store = ZooKeeperMetadataStore(f"127.0.0.1:{port}/oncelog", session_timeout_ms=1000,
                                   connection_timeout_ms=2500, connect_attempt_timeout_s=0.5,
                                   connect_retry_backoff_s=0.5)
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(StoreUnavailable) as raised:
            store.connect()
    elapsed = time.monotonic() - started

    assert elapsed < 4.0
    assert str(raised.value) == (f"cannot reach ZooKeeper at 127.0.0.1:{port} within 2.5 s "
                                 f"(zookeeper.connection.timeout.ms)")
    lines = [record for record in caplog.records if record.levelno >= logging.INFO]
    assert 2 <= len(lines) <= 3, [record.getMessage() for record in lines]
    for record in lines:
        assert record.getMessage() == (f"cannot reach ZooKeeper at 127.0.0.1:{port}; "
                                       f"retrying in 0.5 s")
        assert record.exc_info is None
    captured = capfd.readouterr()
    assert "Traceback" not in captured.out + captured.err
    store.close()


class _OwnServer:
    """A ZooKeeper of the test's own (it will be killed) and a store registered on it as
    broker 1; ``server`` may be replaced by a restart; both are stopped at the end."""

    def __init__(self, directory, chroot: str, session_timeout_ms: int) -> None:
        self.directory = directory
        self.server = ZooKeeperProcess(directory).start()
        self.store = None
        try:
            self.store = ZooKeeperMetadataStore(self.server.connect_string + chroot,
                                                session_timeout_ms=session_timeout_ms).connect()
            self.store.register_broker(registration(1))
        except BaseException:
            self.close()
            raise

    def restart(self) -> None:
        self.server = ZooKeeperProcess(self.directory, port=self.server.port).start()

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
        self.server.stop()

    def __enter__(self) -> _OwnServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def test_requests_while_zookeeper_is_down_raise_store_unavailable_instead_of_hanging(tmp_path):
    """kazoo queues requests while disconnected and its blocking calls wait for ever; a
    broker thread stuck there could never step down. Each request now waits at most a session
    timeout (2 s at least)."""
    with _OwnServer(tmp_path / "zk", "/down", session_timeout_ms=3000) as own:
        own.server.kill()
        assert not own.store.confirm_session()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="did not answer within 3 s"):
            own.store.live_brokers()
        assert time.monotonic() - started < 4.0


def test_zookeeper_restarted_on_its_data_keeps_the_session_and_its_registration(tmp_path):
    """A restarted server gives each stored session a full timeout from its start. The session
    is 10 s here: the client retries at least every second, but a restart on a loaded 2-core
    host (a Spark cluster starting beside it) once took a 3 s session past its deadline in CI."""
    with _OwnServer(tmp_path / "zk", "/restart", session_timeout_ms=10_000) as own:
        changes = recorder(own.store)
        session_id = own.store.session_id
        own.server.kill()
        assert not own.store.confirm_session()

        own.restart()
        wait_for(own.store.confirm_session, timeout_s=20, what="the session after a restart")
        assert own.store.session_id == session_id
        assert list(own.store.live_brokers()) == [1]
        # changes made while disconnected may have been missed: listeners read everything
        wait_for(lambda: MetadataChange.WATCHES_RESET in changes, what="WATCHES_RESET")
        assert MetadataChange.SESSION_LOST not in changes


def test_a_missing_chroot_is_created(zookeeper):
    from tests.zookeeper_server import fresh_chroot

    chroot = fresh_chroot() + "/nested/oncelog"
    store = ZooKeeperMetadataStore(zookeeper.connect_string + chroot,
                                   session_timeout_ms=SESSION_TIMEOUT_MS).connect()
    try:
        cluster_id = store.cluster_id("configured-id")
        assert store.cluster_id() == cluster_id == "configured-id"
    finally:
        store.close()
    client = raw_client(zookeeper.connect_string)
    try:
        assert client.exists(chroot + "/cluster/id")
        assert client.exists(chroot + "/brokers/ids")
        assert json.loads(client.get(chroot + "/cluster/id")[0])["id"] == "configured-id"
    finally:
        client.stop()
        client.close()


def test_settings_are_kafkas_names():
    store = ZooKeeperMetadataStore.from_config({
        "zookeeper.connect": "127.0.0.1:2181,127.0.0.1:2182/a/b",
        "zookeeper.session.timeout.ms": "6000", "node.id": "4"})
    assert (store.hosts, store.chroot) == ("127.0.0.1:2181,127.0.0.1:2182", "/a/b")
    assert store.session_timeout_ms == 6000 and store.connection_timeout_ms == 6000
    assert store.node_id == 4
    assert split_connect("h:1") == ("h:1", "")
    assert split_connect("h:1/") == ("h:1", "")


# -- the ZooKeeper process -------------------------------------------------------------------

def test_zookeeper_process_starts_answers_and_is_gone_after_stop(tmp_path):
    with ZooKeeperProcess(tmp_path / "zk") as server:
        pid = server.pid
        assert server.is_serving()
        assert zookeeper_process.four_letter_word(server.host, server.port, "ruok") == "imok"
        config = (tmp_path / "zk" / "zoo.cfg").read_text()
        assert "clientPortAddress=127.0.0.1" in config and "minSessionTimeout=200" in config
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not server.is_serving()
    assert (tmp_path / "zk" / "zookeeper.log").stat().st_size > 0


def test_a_zookeeper_whose_port_another_one_holds_is_not_taken_for_ready(tmp_path):
    """A restart on its old port (or a free port taken meanwhile) can find another test's
    ZooKeeper there; that one answers "srvr", but the server we started could not bind and
    exits. Before, ``start`` returned as if ours served, and its clients talked to a stranger
    (their sessions unknown there)."""
    with ZooKeeperProcess(tmp_path / "first") as first:
        with pytest.raises(ZooKeeperStartError, match="exited with status"):
            ZooKeeperProcess(tmp_path / "second", port=first.port).start()
        assert first.is_serving()


def test_missing_zookeeper_jars_are_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setattr(zookeeper_process, "JAR_DIRECTORIES", (tmp_path,))
    with pytest.raises(ZooKeeperNotInstalled, match=r"ZooKeeper is not installed .*run make setup"):
        ZooKeeperProcess(tmp_path / "zk").start()
