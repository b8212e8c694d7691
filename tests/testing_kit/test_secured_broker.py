"""The kit's secured brokers as a user meets them: ``@pytest.mark.oncelog_broker(security=...)``
in a generated test file (run by pytester in a subprocess, the plugin loaded as a user's
pytest loads it) with confluent-kafka and kafka-python, and ``oncelog.testing.broker(
security=...)`` in a ``with`` block; every broker gone by pid afterwards."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from oncelog.testing import broker

from .conftest import pid_alive

USER_TESTS = '''
import os
import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

def record_pid(broker):
    with open(os.environ["PID_FILE"], "a") as file:
        file.write(f"{broker.pid}\\n")

@pytest.mark.oncelog_broker(security="SASL_SSL")
def test_confluent_kafka_and_kafka_python_on_sasl_ssl(oncelog_broker, oncelog_topic):
    record_pid(oncelog_broker)
    assert oncelog_broker.ca_file.exists() and oncelog_broker.username
    assert oncelog_broker.client_config()["security.protocol"] == "SASL_SSL"
    topic = oncelog_topic()
    producer = Producer(oncelog_broker.client_config({"acks": "all"}))
    producer.produce(topic, b"from confluent-kafka")
    assert producer.flush(20) == 0
    sender = KafkaProducer(**oncelog_broker.kafka_python_config(acks="all"))
    sender.send(topic, b"from kafka-python").get(timeout=20)
    sender.close()
    reader = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=8000,
                           **oncelog_broker.kafka_python_config())
    assert sorted(m.value for m in reader) == [b"from confluent-kafka", b"from kafka-python"]
    reader.close()
    consumer = Consumer(oncelog_broker.client_config(
        {"group.id": "g", "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    seen = []
    while len(seen) < 2:
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        seen.append(message.value())
    consumer.close()
    assert sorted(seen) == sorted(r.value for r in oncelog_broker.read_all(topic))

@pytest.mark.oncelog_broker(security="SASL_SSL")
def test_the_secured_broker_is_shared_by_the_session(oncelog_broker, oncelog_topic):
    record_pid(oncelog_broker)
    assert oncelog_broker.read_all(oncelog_topic()) == []

def test_an_unmarked_test_gets_the_plaintext_broker(oncelog_broker):
    record_pid(oncelog_broker)
    assert oncelog_broker.client_config() == {"bootstrap.servers": oncelog_broker.bootstrap}

@pytest.mark.oncelog_broker(security="TLS")
def test_an_unknown_protocol(oncelog_broker):
    pass
'''


@pytest.mark.slow
def test_the_marker_gives_a_secured_broker_to_real_clients(run_user_tests, tmp_path,
                                                           monkeypatch):
    pid_file = tmp_path / "pids"
    monkeypatch.setenv("PID_FILE", str(pid_file))
    result = run_user_tests(USER_TESTS)
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.oncelog_broker: security must be one of "
                                 "PLAINTEXT, SSL, SASL_SSL, SASL_PLAINTEXT, not 'TLS'*"])
    secured, shared, plaintext = (int(line) for line in pid_file.read_text().split())
    assert secured == shared != plaintext
    assert not any(pid_alive(pid) for pid in (secured, plaintext)), "a broker outlived its run"


def test_an_ssl_broker_in_a_with_block_refuses_a_plaintext_client_and_admits_its_own():
    """``broker(security="SSL")``: no SASL user, the CA in ``client_config()``; a client
    without it gets no metadata."""
    with broker(security="SSL") as started:
        assert started.username is None and started.password is None
        assert started.bootstrap == started.direct_bootstrap  # no wire proxy over TLS
        topic = started.topic("ssl")
        producer = Producer(started.client_config())
        producer.produce(topic, b"over TLS")
        assert producer.flush(20) == 0
        assert [r.value for r in started.read_all(topic)] == [b"over TLS"]
        plain = AdminClient({"bootstrap.servers": started.bootstrap, "log_level": 0})
        with pytest.raises(Exception, match="Broker transport failure|timed out"):
            plain.list_topics(timeout=3)
        with pytest.raises(RuntimeError, match="this broker's SSL listener encrypts them"):
            started.fail_next("Produce")
        started.kill()
        started.restart()
        assert [r.value for r in started.read_all(topic)] == [b"over TLS"]
        pid = started.pid
    assert not pid_alive(pid)
