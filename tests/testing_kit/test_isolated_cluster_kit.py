"""The test kit's ``cluster(isolated=True)`` (issue 31): a user's test partitions the network
under their application. The leader of their topic is isolated from everything while an
``acks=all`` producer keeps writing through ``c.bootstrap`` (the proxies); a new leader takes
over, the network is healed, and their consumer reads every acknowledged record once. Real
processes, real namespaces; afterwards no process and no namespace of the cluster is left,
even when the test fails (``cluster()``'s ``finally``)."""

from __future__ import annotations

import subprocess
import time

import pytest

from oncelog.cluster.isolation import missing_prerequisites
from oncelog.testing import assert_delivered, cluster

from .conftest import pid_alive

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.skipif(
    bool(missing_prerequisites()), reason="network namespaces need root, ip and nft: "
    + ", ".join(missing_prerequisites()))]

# A request to a cut-off broker is never answered: the client moves on after its request
# timeout and finds the new leader by refreshing its metadata (docs/testing.md).
PARTITION_TOLERANT = {"socket.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 1000}


def _produce(bootstrap: str, topic: str, ids: list[str]) -> list[str]:
    from confluent_kafka import Producer
    acknowledged: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "request.timeout.ms": 5000,
                         **PARTITION_TOLERANT})
    for id in ids:
        producer.produce(topic, id.encode(), on_delivery=lambda error, message: (
            error is None and acknowledged.append(message.value().decode())))
    assert producer.flush(90) == 0
    return acknowledged


def _consume(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", **PARTITION_TOLERANT})
    consumer.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
    finally:
        consumer.close()
    return values


def test_a_users_consumer_reads_every_record_across_an_isolated_leader():
    with cluster(brokers=3, isolated=True) as c:
        prefix = c.local.network.prefix
        pids = c.pids()
        topic = c.topic("orders")
        acknowledged = _produce(c.bootstrap, topic, [f"before-{n}" for n in range(20)])
        leader = c.leader_of(topic)
        fault = c.isolate(leader)
        assert str(fault) == f"isolate broker-{leader}"
        assert [str(f) for f in c.network_faults()] == [f"isolate broker-{leader}"]
        started = time.monotonic()
        acknowledged += _produce(c.bootstrap, topic, [f"during-{n}" for n in range(20)])
        during_s = time.monotonic() - started
        assert c.leader_of(topic) != leader
        c.heal()
        assert c.network_faults() == []
        values = _consume(c.bootstrap, topic, c.group(), len(acknowledged))
        assert len(acknowledged) == 40
        assert_delivered(acknowledged, values, semantics="exactly-once")
        print(f"20 acks=all records produced across the isolation in {during_s:.1f} s")
    assert [pid for pid in pids if pid_alive(pid)] == []
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"{prefix}-" not in namespaces


def test_faults_need_isolated_true(tmp_path):
    from oncelog.cluster.isolation import IsolationError
    from oncelog.testing.cluster import Cluster
    with pytest.raises(IsolationError, match="isolated cluster"):
        Cluster(tmp_path, 1).isolate(1)  # checked before anything runs


def test_the_network_partition_example_in_docs_passes(run_user_tests):
    """docs/testing.md's "Network partitions" example, run as a user's test file (as the
    recipes are), so it cannot rot; it consumes while the leader is still isolated."""
    import re
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    section = doc.split("\n## Network partitions\n", 1)[1].split("\n## ", 1)[0]
    [example] = [block for block in re.findall(r"```python\n(.*?)```", section, flags=re.S)
                 if not re.search(r"^\s*\.\.\.", block, flags=re.M)]  # not a sketch
    result = run_user_tests(example, timeout=240)
    result.assert_outcomes(passed=1)


MARKED_CLUSTER_TEST = '''
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


@pytest.mark.oncelog_cluster(brokers=3, zookeepers=3, isolated=True,
                             settings={"zookeeper.session.timeout.ms": "4000"})
def test_my_producer_rides_out_an_isolated_broker(oncelog_cluster):
    c = oncelog_cluster
    assert len(c.local.brokers) == 3 and len(c.local.ensemble.nodes) == 3
    assert c.local.network is not None
    print("namespaces-prefix", c.local.network.prefix)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("orders", 1, 3)])["orders"].result(30)
    c.isolate(1)
    acked = []
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all",
                         "socket.timeout.ms": 5000, "request.timeout.ms": 5000,
                         "topic.metadata.refresh.interval.ms": 1000})
    for n in range(20):
        producer.produce("orders", b"%d" % n, on_delivery=lambda e, m: e or acked.append(m))
    assert producer.flush(60) == 0
    c.heal()
    assert len(acked) == 20


@pytest.mark.oncelog_cluster(brokers=3, colour="blue")
def test_a_wrong_marker(oncelog_cluster):
    pass
'''


def test_the_cluster_marker_shapes_the_fixture_and_the_network_goes_with_it(run_user_tests):
    """``@pytest.mark.oncelog_cluster(...)`` gives the plugin's fixture cluster()'s shape:
    three ZooKeeper nodes and namespaces, a broker isolated and healed under a user's
    producer; every namespace of the cluster is gone afterwards. A wrong argument fails the
    test with one line naming it."""
    result = run_user_tests(MARKED_CLUSTER_TEST, "-s", timeout=280)
    result.assert_outcomes(passed=1, errors=1)
    output = result.stdout.str()
    assert "@pytest.mark.oncelog_cluster:" in output and "colour" in output
    [prefix] = [line.split()[1] for line in output.splitlines()
                if line.startswith("namespaces-prefix")]
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert prefix not in left
