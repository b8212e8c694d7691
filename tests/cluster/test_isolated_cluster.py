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
