"""The real ZooKeeperMetadataStore, unchanged but for its ``client=`` argument, on a
MemoryKazooClient: registrations, topics and their versions, compare-and-set, deletion,
producer-id blocks, the controller election, watches and a session's expiry, all in one thread
on a hand-moved clock (what the cluster simulation of issue 30 builds on).

The same behaviours against a real ZooKeeper: tests/cluster/test_zookeeper_store.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from oncelog.controller.store import (BrokerRegistration, MetadataChange, MetadataEvent,
                                      NodeIdInUse, PartitionState, TopicExists, TopicRecord)
from oncelog.controller.zookeeper_store import ZooKeeperMetadataStore
from oncelog.simulation import MemoryKazooClient, MemoryZooKeeper

from tests.unit.simulation.conftest import Clock

CONNECT = "sim/oncelog"


class Cluster:
    """One MemoryZooKeeper and the stores connected to it, each with its events."""

    def __init__(self) -> None:
        self.clock = Clock(10_000.0)
        self.zookeeper = MemoryZooKeeper(self.clock)
        self.stores: list[ZooKeeperMetadataStore] = []
        self.events: dict[int, list[MetadataEvent]] = {}

    def store(self, node_id: int = -1) -> ZooKeeperMetadataStore:
        client = MemoryKazooClient(self.zookeeper, hosts=CONNECT, timeout=6.0)
        store = ZooKeeperMetadataStore(CONNECT, session_timeout_ms=6000, node_id=node_id,
                                       client=client)
        self.events[id(store)] = []
        store.watch(self.events[id(store)].append)
        self.stores.append(store.connect())
        return store

    def deliver(self) -> None:
        """Every client runs its callbacks until nothing is left to deliver."""
        while sum(store.client.deliver_events() for store in self.stores) > 0:
            pass

    def events_of(self, store: ZooKeeperMetadataStore) -> list[MetadataEvent]:
        return self.events[id(store)]

    def close(self) -> None:
        for store in self.stores:
            store.close()


@pytest.fixture
def cluster():
    cluster = Cluster()
    yield cluster
    cluster.close()


def registration(node_id: int) -> BrokerRegistration:
    return BrokerRegistration(node_id, "127.0.0.1", 9090 + node_id, rack=f"rack-{node_id}")


def topic(name: str, assignment: list[list[int]], configs: dict[str, str] | None = None,
          ) -> tuple[TopicRecord, list[PartitionState]]:
    record = TopicRecord(name, f"id-{name}", len(assignment), dict(configs or {}),
                         [list(replicas) for replicas in assignment])
    return record, [PartitionState(replicas[0], 0, tuple(replicas)) for replicas in assignment]


def test_connect_creates_the_chroot_and_kafkas_paths_without_a_thread(cluster):
    store = cluster.store()
    assert store._event_thread is None
    raw = cluster.zookeeper
    for path in ("/oncelog", "/oncelog/brokers/ids", "/oncelog/brokers/topics",
                 "/oncelog/config/topics"):
        assert path in set(raw.paths())
    assert store.session_id == store.client.session_id
    assert store.cluster_id("given") == "given" == cluster.store().cluster_id()


def test_registrations_are_ephemeral_with_their_czxid_as_broker_epoch(cluster):
    first, second = cluster.store(), cluster.store()
    one = first.register_broker(registration(1))
    two = second.register_broker(registration(2))
    assert 0 < one.broker_epoch < two.broker_epoch
    assert second.live_brokers() == {1: one, 2: two}
    with pytest.raises(NodeIdInUse, match="node.id 1 is already registered"):
        second.register_broker(registration(1))
    assert first.register_broker(registration(1)).broker_epoch == one.broker_epoch  # ours
    assert first.confirm_session()
    cluster.deliver()
    cluster.events_of(second).clear()

    first.close()
    cluster.deliver()
    assert MetadataChange.BROKERS in [event.change for event in cluster.events_of(second)]
    assert second.live_brokers() == {2: two}


def test_topics_round_trip_with_versions_and_watches(cluster):
    store, other = cluster.store(), cluster.store()
    empty = other.list_topics(watch=True)
    record, states = topic("events", [[1, 2], [2, 3], [3, 1]], {"min.insync.replicas": "2"})
    created, created_states = store.create_topic(record, states)
    assert created == dataclasses.replace(record, created_version=created.created_version)
    assert created.created_version > empty.version
    assert created_states == [dataclasses.replace(state, version=0,
                                                  created_version=created.created_version)
                              for state in states]
    assert other.load_topics() == {"events": created}
    listing = other.list_topics()
    assert listing.names == {"events"} and listing.version == created.created_version
    assert other.partition_states("events", 3) == created_states
    assert cluster.events_of(other) == []  # delivered only when the simulation says
    cluster.deliver()
    assert cluster.events_of(other) == [MetadataEvent(MetadataChange.TOPICS)]
    with pytest.raises(TopicExists):
        other.create_topic(*topic("events", [[1]]))

    assert other.read_topic("events", watch=True) == created
    grown = dataclasses.replace(created, partitions=4, assignment=record.assignment + [[1, 3]])
    added = other.add_partitions(grown, [PartitionState(1, 0, (1, 3))])
    assert added[0].created_version > created.created_version
    assert store.read_topic("events") == dataclasses.replace(grown,
                                                             created_version=created.created_version)
    cluster.deliver()
    assert MetadataEvent(MetadataChange.TOPIC, "events") in cluster.events_of(other)

    other.list_topics(watch=True)
    store.delete_topic("events")
    store.delete_topic("events")  # already gone: no error
    assert other.load_topics() == {} and other.partition_state("events", 0) is None
    after = other.list_topics()
    assert after.names == frozenset() and after.version > added[0].created_version
    with pytest.raises(KeyError):
        other.add_partitions(grown, [PartitionState(1, 0, (1, 3))])
    again, _states = store.create_topic(*topic("events", [[2]]))
    assert again.created_version > after.version


def test_compare_and_set_wins_once_per_version_read(cluster):
    first, second = cluster.store(), cluster.store()
    created, _states = first.create_topic(*topic("orders", [[1, 2, 3]]))
    read_by_first = first.partition_state("orders", 0)
    read_by_second = second.partition_state("orders", 0, watch=True)
    written = second.compare_and_set_partition_state("orders", 0, read_by_second.elect(2, (2, 3)))
    assert written == PartitionState(2, 1, (2, 3), version=1,
                                     created_version=created.created_version)
    assert first.compare_and_set_partition_state("orders", 0, read_by_first.with_isr((1,))) is None
    assert first.partition_state("orders", 0) == written
    again = first.compare_and_set_partition_state("orders", 0, written.with_isr((2,)))
    assert again is not None and again.order > written.order
    cluster.deliver()
    assert cluster.events_of(second).count(
        MetadataEvent(MetadataChange.PARTITION_STATE, "orders", 0)) == 1
    # no version: created only where none exists
    assert first.compare_and_set_partition_state("orders", 0, PartitionState(1, 5, (1,))) is None
    assert first.compare_and_set_partition_state("nope", 0, PartitionState(1, 0, (1,))) is None


def test_producer_id_blocks_never_overlap(cluster):
    first, second = cluster.store(node_id=1), cluster.store(node_id=2)
    blocks = sorted(store.allocate_producer_id_block(10)
                    for _ in range(5) for store in (first, second))
    assert blocks == list(range(0, 100, 10))


def test_the_controller_election_and_its_successor(cluster):
    first, second = cluster.store(), cluster.store()
    assert first.controller_id() == -1 and first.controller_epoch() == 0
    assert first.try_become_controller(1)
    assert not second.try_become_controller(2)
    assert second.controller_id() == 1 and second.controller_epoch() == 1
    assert first.try_become_controller(1)  # held already
    cluster.deliver()
    cluster.events_of(second).clear()

    first.close()
    cluster.deliver()
    assert MetadataChange.CONTROLLER in [event.change for event in cluster.events_of(second)]
    assert second.controller_id() == -1
    assert second.try_become_controller(2)
    assert second.controller_id() == 2 and second.controller_epoch() == 2


def test_an_expired_session_is_reported_lost_then_restored_and_registration_is_redone(cluster):
    store, other = cluster.store(), cluster.store()
    first = store.register_broker(registration(1))
    assert store.try_become_controller(1)
    other.live_brokers()
    cluster.deliver()
    cluster.events_of(store).clear()
    cluster.events_of(other).clear()

    cluster.clock.now += 7  # neither heard from for longer than their 6 s sessions
    other.client.heartbeat()
    assert cluster.zookeeper.expire_due() == [store.session_id]
    assert other.live_brokers() == {} and other.controller_id() == -1
    store.client.heartbeat()  # the simulation tells the client: it reconnects
    assert not store.confirm_session()
    cluster.deliver()
    kinds = [event.change for event in cluster.events_of(store)]
    assert kinds.index(MetadataChange.SESSION_LOST) < kinds.index(MetadataChange.SESSION_RESTORED)
    assert {MetadataChange.BROKERS, MetadataChange.CONTROLLER} <= {
        event.change for event in cluster.events_of(other)}

    again = store.register_broker(registration(1))
    assert again.broker_epoch > first.broker_epoch and store.confirm_session()
    assert other.live_brokers() == {1: again}


def test_a_request_that_meets_an_expired_session_is_sent_again_in_the_new_one(cluster):
    """The store's own retry: kazoo fails the request with SessionExpiredError, the store
    asks again (after its 50 ms pause) and the new session answers."""
    store = cluster.store()
    store.register_broker(registration(3))
    cluster.zookeeper.expire(store.session_id)
    assert store.live_brokers() == {}
    cluster.deliver()
    assert MetadataChange.SESSION_RESTORED in [event.change
                                               for event in cluster.events_of(store)]
