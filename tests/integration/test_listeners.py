"""Several listeners on one broker, as Kafka names them: each client is told the endpoints of
the listener it connected to (Metadata, FindCoordinator, DescribeCluster), and a bad listener
setting stops the broker with one line naming the cause."""

from __future__ import annotations

import subprocess
import sys
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.broker.process import free_port


def _external_broker(broker_factory):
    """INTERNAL on 127.0.0.1, advertised where nothing listens; EXTERNAL on 127.0.0.2: a
    client of EXTERNAL that is ever given INTERNAL's address fails to connect to it."""
    internal, external, nowhere = free_port(), free_port("127.0.0.2"), free_port()
    broker = broker_factory(port=internal, settings={
        "listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.2:{external}",
        "advertised.listeners": f"INTERNAL://127.0.0.1:{nowhere}",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL"})
    return broker, f"127.0.0.2:{external}", nowhere


def test_metadata_names_the_endpoints_of_the_listener_the_client_connected_to(broker_factory):
    broker, external, nowhere = _external_broker(broker_factory)
    seen_external = AdminClient({"bootstrap.servers": external}).list_topics(timeout=10)
    assert [str(b) for b in seen_external.brokers.values()] == [f"{external}/1"]
    seen_internal = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert [str(b) for b in seen_internal.brokers.values()] == [f"127.0.0.1:{nowhere}/1"]
    admin = AdminClient({"bootstrap.servers": external})
    cluster = admin.describe_cluster(request_timeout=10).result()
    assert [(n.host, n.port) for n in cluster.nodes] == [
        ("127.0.0.2", int(external.rsplit(":", 1)[1]))]


def test_a_group_and_a_transaction_run_through_the_second_listener(broker_factory):
    """FindCoordinator answers with the EXTERNAL listener's address, or these never finish."""
    _broker, external, _ = _external_broker(broker_factory)
    topic = "orders"
    admin = AdminClient({"bootstrap.servers": external})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=10)
    producer = Producer({"bootstrap.servers": external, "transactional.id": "tx-listeners"})
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(20):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    producer.commit_transaction(15)
    consumer = Consumer({"bootstrap.servers": external, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    values = []
    for _ in range(60):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value().decode())
        if len(values) == 20:
            break
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(values) == sorted(f"v{i}" for i in range(20))


def test_a_listener_name_without_a_security_protocol_stops_the_broker_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "oncelog", "broker", "--data-dir", str(tmp_path / "data"),
         "--set", f"listeners=CLIENT://127.0.0.1:{free_port()}"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "oncelog: listeners: no security protocol defined for listener CLIENT; name it in "
        "listener.security.protocol.map (CLIENT:SASL_SSL...) or use one of PLAINTEXT, SSL, "
        "SASL_PLAINTEXT, SASL_SSL"], result.stderr
