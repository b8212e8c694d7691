"""A 3-node ZooKeeper ensemble under oncelog's clusters (issue 31): real ZooKeeper processes
(``oncelog.cluster.zookeeper_ensemble``), real brokers, librdkafka.

The ensemble elects one leader and serves; brokers on it produce ``acks=all`` and read back;
losing a minority (a follower, kill -9) changes nothing for them; losing the ZooKeeper leader
costs an election, after which the brokers serve again (their sessions survive it or they
register again); ``oncelog cluster start --zookeepers 3``, ``cluster status`` and ``cluster
stop`` as a user runs them. Every process is stopped by pid at teardown, SIGKILL for what is
left, even when a test fails.
"""

from __future__ import annotations

import os
import re
import signal
import time
import uuid

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import NewTopic
from kazoo.client import KazooClient

from oncelog.cluster.local import LocalCluster
from oncelog.cluster.zookeeper_ensemble import ZooKeeperEnsemble
from oncelog.cluster.zookeeper_process import ZooKeeperStartError
from oncelog.testing import cluster
from oncelog.testing.broker import live_pids
from tests.process_tree import running
from tests.zookeeper_server import start_zookeeper_ensemble

from .cluster_command import ClusterCommand, gone_within, oncelog
from .helpers import FAST, admin, consume_all, create_topic, own_leader, wait_until


def _kill_left(pids: list[int]) -> list[int]:
    """SIGKILL whichever of ``pids`` still runs; the ones that did."""
    left = [pid for pid in pids if running(pid)]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


@pytest.fixture
def ensemble(tmp_path):
    """A started 3-node ensemble; every node stopped by pid afterwards (SIGKILL if need be)."""
    started = start_zookeeper_ensemble(tmp_path / "zookeeper")
    try:
        yield started
    finally:
        pids = started.pids
        started.stop()
        _kill_left(pids)


@pytest.fixture
def ensemble_cluster(tmp_path):
    """3 brokers on a 3-node ensemble (2 s ZooKeeper sessions), stopped by pid afterwards."""
    local = LocalCluster(tmp_path / "cluster", 3, zookeepers=3, settings={
        **FAST, "default.replication.factor": "3", "min.insync.replicas": "2"})
    try:
        yield local.start()
    finally:
        pids = [b.pid for b in local.brokers.values() if b.pid is not None]
        pids += local.ensemble.pids if local.ensemble is not None else []
        local.stop()
        _kill_left(pids)


def test_an_even_or_empty_ensemble_is_refused_before_anything_starts(tmp_path):
    for nodes in (0, 2, 4, -1):
        with pytest.raises(ValueError, match="odd number of nodes"):
            ZooKeeperEnsemble(tmp_path, nodes)
        with pytest.raises(ValueError, match="odd number of nodes"):
            LocalCluster(tmp_path, 3, zookeepers=nodes)
    assert not list(tmp_path.iterdir())


def test_three_nodes_elect_one_leader_and_serve_every_write_on_every_node(ensemble):
    """Each node has its ``myid`` and the three ``server.N`` lines; ``start`` returns once
    one leads and two follow; a write through the connect string is read on each node.
    Starting it again while it runs is refused (its pids would be lost)."""
    with pytest.raises(ZooKeeperStartError, match="runs already"):
        ensemble.start()
    modes = ensemble.modes()
    assert sorted(modes.values()) == ["follower", "follower", "leader"], modes
    assert len(ensemble.connect_string.split(",")) == 3
    for server_id, node in ensemble.nodes.items():
        assert (node.directory / "data" / "myid").read_text().strip() == str(server_id)
        config = node.config_path.read_text()
        assert len(re.findall(r"^server\.\d=127\.0\.0\.1:\d+:\d+$", config, re.M)) == 3
    client = KazooClient(hosts=ensemble.connect_string, timeout=5)
    client.start(timeout=15)
    try:
        client.create("/written", b"by the quorum")
    finally:
        client.stop()
        client.close()
    for node in ensemble.nodes.values():
        reader = KazooClient(hosts=node.connect_string, timeout=5)
        reader.start(timeout=15)
        try:
            reader.sync("/written")
            assert reader.get("/written")[0] == b"by the quorum"
        finally:
            reader.stop()
            reader.close()


def test_a_minority_lost_keeps_the_quorum_and_the_leader_lost_is_replaced(ensemble):
    """kill -9 of a follower: the leader stays. kill -9 of the leader: the two left elect
    one of themselves; both killed nodes rejoin as followers on their ports."""
    leader = ensemble.leader()
    follower = ensemble.followers()[0]
    ensemble.kill(follower)
    assert ensemble.has_quorum() and ensemble.leader() == leader
    ensemble.start_node(follower)
    assert ensemble.modes()[follower] == "follower"

    ensemble.kill(leader)
    elected_s = ensemble.wait_for_quorum(timeout_s=30)
    new_leader = ensemble.leader()
    assert new_leader not in (None, leader)
    print(f"a new ZooKeeper leader served {elected_s:.2f} s after the leader's kill -9")
    ensemble.start_node(leader)
    assert ensemble.modes()[leader] == "follower"
    assert ensemble.leader() == new_leader


def _produce(bootstrap: str, topic: str, values: list[bytes], timeout_s: float = 60) -> None:
    """``acks=all`` through librdkafka; every value acknowledged, or the test fails."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True, "message.timeout.ms": int(timeout_s * 1000),
                         "topic.metadata.refresh.interval.ms": 1000})
    errors: list[str] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda error, _message:
                         errors.append(str(error)) if error else None)
    assert producer.flush(timeout_s) == 0, "records left unacknowledged"
    assert errors == []


def _create(local: LocalCluster, name: str, timeout_s: float = 30) -> float:
    """CreateTopics (RF 3) until every replica is in sync; the seconds it took."""
    started = time.monotonic()
    client = admin(local)
    client.create_topics([NewTopic(name, 1, 3)])[name].result(timeout_s)
    wait_until(lambda: (found := client.list_topics(name, timeout=5).topics.get(name))
               is not None and found.error is None
               and all(len(p.isrs) == 3 for p in found.partitions.values()),
               timeout_s, f"{name} with 3 replicas in sync")
    return time.monotonic() - started


def _wait_for_every_lease(local: LocalCluster, killed: float) -> None:
    """Until every broker holds its leadership lease again, as its own Metadata shows
    (a broker without one names no leaders, and drops its clients' connections when it
    loses it). Looked at only once a lease confirmed before the kill has run out (0.8 of
    the kit's 2 s session, plus two of its renewal intervals): a broker whose ZooKeeper
    connection came back late under load (CI, 2026-11-29) held its old lease a little
    longer, then dropped every connection - an AdminClient's CreateTopics among them."""
    time.sleep(max(0.0, killed + 0.8 * 2.0 * 1.4 - time.monotonic()))
    wait_until(lambda: all(own_leader(local, "orders", 0, node) >= 0 for node in local.brokers),
               30, "every broker holding its lease again")


def _brokers_seen(local: LocalCluster) -> set[int]:
    try:
        return set(admin(local).list_topics(timeout=5).brokers)
    except KafkaException:
        return set()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_brokers_on_an_ensemble_serve_and_a_lost_follower_changes_nothing(ensemble_cluster):
    """A topic, 200 records acks=all, all read back; then a ZooKeeper follower is killed
    with kill -9 and the brokers go on as if nothing happened: no broker leaves, produce
    acks=all and CreateTopics still succeed, everything reads back."""
    local = ensemble_cluster
    assert local.zookeeper is None and local.ensemble is not None
    assert local.zookeeper_connect.count(",") == 2
    create_topic(local, "orders")
    before = [f"before-{i}".encode() for i in range(200)]
    _produce(local.bootstrap, "orders", before)
    assert consume_all(local, "orders", len(before)) == before

    ensemble = local.ensemble
    follower = ensemble.followers()[0]
    ensemble.kill(follower)
    assert ensemble.has_quorum()
    started = time.monotonic()
    after = [f"after-{i}".encode() for i in range(200)]
    _produce(local.bootstrap, "orders", after, timeout_s=30)
    produce_s = time.monotonic() - started
    create_s = _create(local, "created-without-a-follower")
    print(f"minority lost: 200 acks=all records in {produce_s:.2f} s, CreateTopics in "
          f"{create_s:.2f} s")
    assert _brokers_seen(local) == {1, 2, 3}
    assert consume_all(local, "orders", 400) == before + after
    for node_id in local.brokers:
        assert "session lost" not in local.broker(node_id).log_text(), node_id


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_brokers_serve_again_once_the_ensemble_replaced_its_leader(tmp_path):
    """Through the test kit (``oncelog.testing.cluster(zookeepers=3)``): the ZooKeeper leader
    is killed with kill -9; the two followers elect a new leader; the brokers' sessions (2 s)
    live through the election or the brokers register again; every broker is back, produce
    acks=all and CreateTopics succeed, nothing is lost; at the end no process of the kit's
    is left."""
    with cluster(brokers=3, data_dir=tmp_path / "kit", zookeepers=3) as kit:
        local = kit.local
        assert len(kit.pids()) == 6
        create_topic(local, "orders")
        before = [f"before-{i}".encode() for i in range(100)]
        _produce(kit.bootstrap, "orders", before)

        old_leader = kit.zookeeper_leader()
        assert old_leader is not None
        kit.kill_zookeeper(old_leader)
        killed = time.monotonic()
        elected_s = kit.ensemble.wait_for_quorum(timeout_s=30)
        assert kit.zookeeper_leader() not in (None, old_leader)
        after = [f"after-{i}".encode() for i in range(100)]
        _produce(kit.bootstrap, "orders", after, timeout_s=60)
        produce_s = time.monotonic() - killed
        wait_until(lambda: _brokers_seen(local) == {1, 2, 3}, 30, "every broker registered")
        _wait_for_every_lease(local, killed)
        create_s = _create(local, "created-after-the-election")
        lost = [n for n in local.brokers if "session lost" in local.broker(n).log_text()]
        print(f"ZooKeeper leader lost: new leader in {elected_s:.2f} s, 100 acks=all records "
              f"acknowledged {produce_s:.2f} s after the kill, CreateTopics {create_s:.2f} s; "
              f"brokers whose session expired: {lost or 'none'}")
        assert consume_all(local, "orders", 200) == before + after
        assert all(local.is_running(n) for n in local.brokers)
        kit.start_zookeeper(old_leader)
        assert kit.ensemble.modes()[old_leader] == "follower"
        pids = kit.pids()
        assert len(pids) == 6
    assert gone_within(pids, 10) == []
    assert not set(pids) & set(live_pids())


def test_cluster_start_with_three_zookeepers_status_and_stop(tmp_path):
    """From an empty folder: ``cluster start --zookeepers 3`` prints the connect string with
    three nodes and one line per node with its pid; ``cluster status`` (run in that folder,
    so it finds ``./oncelog-cluster``) lists the nodes with one leader and two followers;
    ``cluster stop`` stops the command, which stops everything it started."""
    with ClusterCommand("--brokers", "3", "--zookeepers", "3", "--port", "0",
                        cwd=tmp_path) as command:
        bootstrap = command.bootstrap()
        connect = command.wait_for_line(r"^zookeeper\.connect=").split("=", 1)[1].strip()
        assert re.fullmatch(r"(127\.0\.0\.1:\d+,){2}127\.0\.0\.1:\d+/oncelog", connect)
        nodes = [line for line in command.lines if line.startswith("zookeeper ")]
        assert len(nodes) == 3 and all("(pid " in line for line in nodes), command.output
        status = oncelog("cluster", "status", "-b", bootstrap, cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        modes = sorted(line.split("\t")[2] for line in status.stdout.splitlines()
                       if line.startswith("zookeeper "))
        assert modes == ["follower", "follower", "leader"], status.stdout
        assert all(f"broker {n}\t" in status.stdout for n in (1, 2, 3))
        children = command.children()
        assert len(children) >= 6, children  # three ZooKeepers, three brokers

        stopped = oncelog("cluster", "stop", cwd=tmp_path, timeout=150)
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout.startswith(
            f"stopped the cluster in {tmp_path / 'oncelog-cluster'} (oncelog cluster start, ")
        assert command.process.wait(30) == 0, command.output
        assert gone_within(children, 10) == []
        again = oncelog("cluster", "stop", cwd=tmp_path)
        assert again.returncode == 1
        assert again.stderr.splitlines() == [
            f"oncelog: the cluster in {tmp_path / 'oncelog-cluster'} is not running (its "
            f"oncelog cluster start has exited)"]
    assert "Traceback" not in command.output


@pytest.mark.parametrize("count", ["2", "0", "-3", "4"])
def test_an_even_or_empty_zookeeper_count_is_one_line_and_exit_2(tmp_path, count):
    result = oncelog("cluster", "start", "--zookeepers", count, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"oncelog: Invalid value for '--zookeepers': {count} is not an odd number of 1 or "
        f"more: a ZooKeeper ensemble needs a majority, so 1, 3, 5, ... nodes (see oncelog "
        f"cluster start --help)"], result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written


def test_stop_without_a_cluster_is_one_sentence(tmp_path):
    result = oncelog("cluster", "stop", "--data-dir", f"c-{uuid.uuid4().hex[:6]}",
                     cwd=tmp_path)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("oncelog: no cluster was started in ")
