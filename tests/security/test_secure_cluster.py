"""A cluster secured end to end: three brokers whose only listener is SASL_SSL (SCRAM-SHA-512
users made in ZooKeeper before they start, ``oncelog.cluster.secure``), so the brokers
authenticate to each other for replication, transaction markers and verification. Observed
through confluent-kafka over SASL_SSL: RF 3 with acks=all and an ISR of 3, a leader killed
with kill -9 and another elected, a transaction across partitions led by different brokers
committed, every record read back once. And a broker with a wrong inter-broker password: one
clear line, out of the ISR, still running, no tight reconnect loop."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.broker.process import BrokerProcess
from oncelog.cluster.local import LocalCluster
from oncelog.cluster.secure import BROKER_USER, broker_properties, prepare
from oncelog.security.certificates import CertificateAuthority
from tests.cluster.helpers import FAST, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def secured(tmp_path, zookeeper_connect):
    """Start a secured cluster of ``brokers``; stopped by pid afterwards."""
    started: list[LocalCluster] = []

    def start(brokers: int = 3) -> tuple[LocalCluster, object]:
        files = prepare(tmp_path / "secure")
        cluster = LocalCluster(tmp_path / "cluster", brokers,
                               zookeeper_connect=zookeeper_connect, settings=dict(FAST),
                               security_protocol="SASL_SSL",
                               config_file=files.broker_properties,
                               client_config=files.client_config(),
                               before_brokers=files.add_users)
        started.append(cluster)
        return cluster.start(), files
    yield start
    for cluster in started:
        cluster.stop()


def _partitions(cluster: LocalCluster, files, topic: str) -> dict:
    try:
        metadata = AdminClient({"bootstrap.servers": cluster.bootstrap,
                                **files.client_config()}).list_topics(timeout=5)
    except Exception:
        return {}
    found = metadata.topics.get(topic)
    return dict(found.partitions) if found is not None and found.error is None else {}


def _create(cluster, files, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **files.client_config()})
    topics = [NewTopic(topic, len(assignment), replica_assignment=assignment)]
    admin.create_topics(topics)[topic].result(15)


def _produce(cluster, files, topic: str, ids: list[int], partitions: int, **config) -> None:
    acknowledged: list[int] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, **files.client_config(),
                         "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                         "topic.metadata.refresh.interval.ms": 1000, **config})
    transactional = "transactional.id" in config
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    for i in ids:
        producer.produce(topic, str(i).encode(), partition=i % partitions,
                         on_delivery=lambda err, msg: err is None and acknowledged.append(
                             int(msg.value())))
    if transactional:
        producer.commit_transaction(30)
    assert producer.flush(30) == 0
    assert sorted(acknowledged) == sorted(ids)


def _read_all(cluster, files, topic: str, partitions: int, expected: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, **files.client_config(),
                         "group.id": "reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[int] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and len(values) < expected:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(int(message.value()))
        end = time.monotonic() + 1.0  # and a little longer, to see duplicates arrive
        while time.monotonic() < end:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                values.append(int(message.value()))
    finally:
        consumer.close()
    return values


def test_a_sasl_ssl_only_cluster_replicates_fails_over_and_commits_transactions(secured):
    cluster, files = secured()
    # three partitions, each led by another broker, every broker a replica of each
    _create(cluster, files, "secured", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    wait_until(lambda: (p := _partitions(cluster, files, "secured")) and all(
        len(s.isrs) == 3 for s in p.values()), what="secured with an ISR of 3 everywhere")
    # acks=all with an ISR of 3 is acknowledged only once both followers fetched it
    # through their SASL_SSL logins
    _produce(cluster, files, "secured", list(range(300)), 3)
    # a transaction over partitions of three leaders: markers to two other brokers
    _produce(cluster, files, "secured", list(range(300, 600)), 3,
             **{"transactional.id": "secured-txn"})
    time.sleep(2.5)  # longer than replica.lag.time.max.ms: followers that could not fetch go
    assert all(len(s.isrs) == 3 for s in _partitions(cluster, files, "secured").values())

    leader = _partitions(cluster, files, "secured")[0].leader
    cluster.kill(leader)
    wait_until(lambda: _partitions(cluster, files, "secured").get(0) is not None and
               _partitions(cluster, files, "secured")[0].leader not in (-1, leader),
               what="a new leader of secured-0")
    _produce(cluster, files, "secured", list(range(600, 900)), 3,
             **{"transactional.id": "secured-txn"})
    values = _read_all(cluster, files, "secured", 3, 900)
    assert sorted(values) == list(range(900)), "lost or duplicated records"

    cluster.restart(leader)  # it logs in again and catches up
    wait_until(lambda: all(len(s.isrs) == 3
                           for s in _partitions(cluster, files, "secured").values()),
               timeout_s=45, what="the restarted broker back in every ISR")


def test_a_wrong_inter_broker_password_keeps_a_broker_out_of_the_isr(secured, tmp_path):
    """Broker 3 logs in to the others with a wrong password: it says so in one line, never
    joins the ISR of a partition it follows, keeps running, and does not hammer the leader
    (the connector backs off, doubling from 2 s)."""
    cluster, files = secured(brokers=2)
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(broker_properties(files, "not-the-password"))
    wrong.chmod(0o600)
    first = cluster.broker(1)
    third = BrokerProcess(tmp_path / "broker-3" / "data", host=first.host,
                          settings={**FAST, "node.id": "3",
                                    "zookeeper.connect": cluster.zookeeper_connect or ""},
                          log_path=tmp_path / "broker-3" / "broker.log",
                          extra_args=["--config", str(wrong)], security_protocol="SASL_SSL")
    cluster.brokers[3] = third  # stopped by pid with the cluster
    third.start()
    cluster.wait_for_brokers({1, 2, 3})
    _create(cluster, files, "guarded", [[1, 2, 3]])
    wait_until(lambda: (p := _partitions(cluster, files, "guarded")) and
               sorted(p[0].isrs) == [1, 2], what="guarded's ISR without broker 3")
    _produce(cluster, files, "guarded", list(range(50)), 1)
    time.sleep(5)
    assert sorted(_partitions(cluster, files, "guarded")[0].isrs) == [1, 2]
    assert cluster.is_running(3)
    log = third.log_text()
    refused = [line for line in log.splitlines()
               if f"SASL authentication as '{BROKER_USER}' with SCRAM-SHA-512 refused" in line]
    assert len(refused) == 1, log[-3000:]
    assert "invalid credentials" in refused[0] and "not-the-password" not in log
    # the leader heard few attempts: the first, then after 2, 4 (and maybe 8) seconds
    leader_log = first.log_text()
    assert "SASL SCRAM-SHA-512 authentication failed" in leader_log
    assert "Traceback" not in log


def test_an_ssl_only_cluster_with_mutual_tls_replicates(tmp_path, zookeeper_connect):
    """Two brokers whose only listener is SSL with ssl.client.auth=required: each presents
    its keystore to the other (mutual TLS) for replication, checked against the truststore
    and the host name; acks=all at RF 2 is acknowledged, and the ISR stays whole."""
    ca = CertificateAuthority(tmp_path / "tls")
    broker, admin = ca.issue("broker"), ca.issue("admin", client=True)
    client = {"security.protocol": "SSL", "ssl.ca.location": str(ca.certificate),
              "ssl.certificate.location": str(admin.certificate),
              "ssl.key.location": str(admin.key)}
    cluster = LocalCluster(tmp_path / "cluster", 2, zookeeper_connect=zookeeper_connect,
                           settings={**FAST, "ssl.client.auth": "required",
                                     "ssl.keystore.location": str(broker.keystore),
                                     "ssl.truststore.location": str(ca.certificate)},
                           security_protocol="SSL", client_config=client)
    files = SimpleNamespace(client_config=lambda: client)
    try:
        cluster.start()
        _create(cluster, files, "mutual", [[1, 2], [2, 1]])
        _produce(cluster, files, "mutual", list(range(200)), 2)
        time.sleep(2.5)  # longer than replica.lag.time.max.ms
        partitions = _partitions(cluster, files, "mutual")
        assert len(partitions) == 2 and all(sorted(p.isrs) == [1, 2]
                                            for p in partitions.values())
        assert sorted(_read_all(cluster, files, "mutual", 2, 200)) == list(range(200))
    finally:
        cluster.stop()


def test_secure_and_isolated_together_are_refused_in_one_line(tmp_path):
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "oncelog", "cluster", "start", "--secure",
                           "--isolated", "--data-dir", str(tmp_path / "c")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "oncelog: --secure and --isolated cannot be combined yet: the brokers' certificates "
        "name 127.0.0.1 and localhost, not the isolated addresses"), done.stderr
    assert not (tmp_path / "c").exists()


def test_a_cluster_broker_without_an_inter_broker_login_stops_with_one_line(tmp_path):
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "oncelog", "broker", "--data-dir",
                           str(tmp_path / "d"), "--set",
                           "listeners=SASL_PLAINTEXT://127.0.0.1:0", "--set",
                           "zookeeper.connect=127.0.0.1:1", "--set",
                           "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "oncelog: the inter-broker listener SASL_PLAINTEXT is SASL but no login is configured "
        "for SCRAM-SHA-512: set listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config "
        "(or sasl.jaas.config) to '<LoginModule> required username=\"NAME\" "
        "password=\"SECRET\";' with a user made by oncelog users add"), done.stderr
    assert "Traceback" not in done.stderr
