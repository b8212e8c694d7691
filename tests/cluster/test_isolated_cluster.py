"""An isolated cluster (issue 31): every broker and ZooKeeper node in a network namespace of
its own on a bridge, clients in the root namespace; a leader isolated from everything is
replaced, and rejoins the ISR once healed. Real processes, real namespaces (root and ``ip``
are needed: CI has both)."""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.cluster.isolation import missing_prerequisites
from oncelog.cluster.local import LocalCluster

from .helpers import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    bool(missing_prerequisites()), reason="network namespaces need root, ip and nft: "
    + ", ".join(missing_prerequisites()))]


def _partition(admin: AdminClient, topic: str):
    try:
        return admin.list_topics(topic, timeout=5).topics[topic].partitions[0]
    except Exception:
        return None


def test_an_isolated_leader_is_replaced_and_rejoins_once_healed(tmp_path):
    cluster = LocalCluster(tmp_path, 3, isolated=True,
                           settings={"zookeeper.session.timeout.ms": "3000",
                                     "replica.lag.time.max.ms": "3000"})
    with cluster:
        prefix = cluster.network.prefix
        hosts = {b.host for b in cluster.brokers.values()}
        assert len(hosts) == 3 and not any(h.startswith("127.") for h in hosts)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("cut", 1, 3, config={"min.insync.replicas": "2"})])[
            "cut"].result(20)
        # a request to a cut-off broker is never answered: the client gives up on it after
        # its request timeout and asks the new leader (as in any real partition)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "request.timeout.ms": 5000,
                             "socket.timeout.ms": 5000,
                             "topic.metadata.refresh.interval.ms": 1000})
        for n in range(20):
            producer.produce("cut", b"before-%d" % n)
        assert producer.flush(20) == 0
        leader = _partition(admin, "cut").leader
        cluster.isolate(leader)
        assert [f.caption for f in cluster.faults()] == [f"isolate broker-{leader}"]
        moved = wait_until(lambda: (p := _partition(admin, "cut")) is not None
                           and p.leader not in (-1, leader) and p, what="a new leader")
        assert leader not in moved.isrs
        started = time.monotonic()
        for n in range(20):
            producer.produce("cut", b"during-%d" % n)
        assert producer.flush(60) == 0
        assert time.monotonic() - started < 60
        cluster.heal()
        assert cluster.faults() == []
        wait_until(lambda: sorted(_partition(admin, "cut").isrs) == [1, 2, 3],
                   what="the healed broker back in the ISR")
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert prefix not in names  # stopped: the namespaces are gone


def test_faults_need_an_isolated_cluster(tmp_path):
    from oncelog.cluster.isolation import IsolationError
    cluster = LocalCluster(tmp_path, 1)
    with pytest.raises(IsolationError, match="isolated cluster"):
        cluster.isolate(1)


def test_the_acks_table_shows_what_a_cut_off_leader_loses(tmp_path):
    """The acks table's network-partition rows (issue 31), one cycle each: a leader cut off
    from ZooKeeper and its followers while the producer still reaches it. acks=1 loses what
    the old leader took alone until its lease ran out; acks=all with min.insync.replicas=2
    loses nothing and is unavailable instead; with the ISR shrunk to the leader first, an
    unclean election loses what it wrote alone."""
    from oncelog.cluster.acks_table import ROWS, AcksTable
    rows = tuple(row for row in ROWS if row.cycle.endswith("partitioned"))
    assert [row.label for row in rows] == ["acks=1, leader cut off",
                                           "acks=all, min.insync=2, leader cut off",
                                           "unclean on, leader cut off"]
    lines: list[str] = []
    results = {r.row.label: r for r in AcksTable(tmp_path, cycles=1, rows=rows,
                                                 progress=lines.append).run()}
    assert "network namespace" in lines[0]
    acks_one = results["acks=1, leader cut off"]
    assert acks_one.acknowledged > 1000 and acks_one.lost > 0, lines
    safe = results["acks=all, min.insync=2, leader cut off"]
    assert safe.acknowledged > 1000 and safe.lost == 0 and safe.unavailable_s >= 3, lines
    unclean = results["unclean on, leader cut off"]
    assert unclean.acknowledged > 1000 and unclean.lost > 0, lines
    for result in results.values():
        assert result.kills == 1 and "ZooKeeper" in result.events[0]


def test_clients_of_a_leader_cut_off_from_zookeeper_move_to_the_new_one_before_the_heal(
        tmp_path):
    """A leader cut from every ZooKeeper node, still reached by its clients and followers:
    once its lease runs out it drops its clients' connections, so a librdkafka producer -
    which keeps a connection only to the brokers it needs, and asked only this one for
    metadata - learns the new leader from another broker and goes on writing while the
    partition lasts. Before, it was told "I lead" by the cut-off broker until the heal."""
    import threading

    from oncelog.client.metadata import fetch_metadata
    cluster = LocalCluster(tmp_path, 3, isolated=True, zookeepers=3,
                           settings={"zookeeper.session.timeout.ms": "4000",
                                     "replica.lag.time.max.ms": "3000"})
    with cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("zombie", 1, 3, config={"min.insync.replicas": "2"})])[
            "zombie"].result(20)
        acks: list[float] = []
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "linger.ms": 0, "request.timeout.ms": 3000,
                             "socket.timeout.ms": 3000})
        stop = threading.Event()

        def produce() -> None:
            while not stop.is_set():
                producer.produce("zombie", b"x", on_delivery=lambda error, _message:
                                 error is None and acks.append(time.monotonic()))
                producer.poll(0.01)
        writer = threading.Thread(target=produce)
        writer.start()
        try:
            wait_until(lambda: len(acks) > 100, what="the producer under way")
            leader = fetch_metadata(cluster.bootstrap, ["zombie"]).topics[0] \
                .partitions[0].leader_id
            fault = cluster.cut_from_zookeeper(leader)
            cut_at = time.monotonic()
            followers = [n for n in cluster.brokers if n != leader]

            def new_leader() -> int:
                found = fetch_metadata(cluster.broker(followers[0]).bootstrap, ["zombie"],
                                       timeout_s=2).topics[0].partitions[0].leader_id
                return found if found not in (-1, leader) else 0
            wait_until(new_leader, what="a new leader elected")
            elected_at = time.monotonic()
            time.sleep(5.0)
            written_meanwhile = [t for t in acks if elected_at <= t]
            cluster.heal(fault)
        finally:
            stop.set()
            writer.join()
            producer.flush(30)
        assert elected_at - cut_at < 15
        assert len(written_meanwhile) > 100, (
            f"{len(written_meanwhile)} acknowledgements in the 5 s after the election, "
            "before the heal")
