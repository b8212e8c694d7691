"""What a broker crash (kill -9) and its restart may and may not change."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.client.reader import read_topic


def create(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)


def read_all(bootstrap: str, topic: str) -> dict[str, tuple[int, int]]:
    return {r.value.decode(): (r.partition, r.offset) for r in read_topic(bootstrap, topic)}


@pytest.mark.slow
@pytest.mark.parametrize("acks", ["1", "all"])
def test_kill_9_during_produce_keeps_every_acknowledged_record(broker_factory, acks):
    """Producers keep sending while the broker is killed with SIGKILL and restarted: every
    record the producer saw acknowledged is in the log afterwards, at the offset the broker
    reported, and per-partition offsets stay dense and ordered."""
    broker = broker_factory()
    create(broker.bootstrap, "crash", partitions=3)
    acknowledged: dict[str, tuple[int, int]] = {}
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks,
                             "linger.ms": 2, "message.timeout.ms": 60000,
                             "enable.idempotence": False, "retries": 0})

        def on_delivery(error, message) -> None:
            if error is None:
                acknowledged[message.value().decode()] = (message.partition(), message.offset())

        number = 0
        while not stop.is_set():
            try:
                producer.produce("crash", value=f"m{number}".encode(), on_delivery=on_delivery)
                number += 1
            except BufferError:
                pass
            producer.poll(0.001)
        producer.flush(30)

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        time.sleep(2)
        before_kill = len(acknowledged)
        broker.kill()
        time.sleep(0.5)
        broker.start()
        time.sleep(2)
    finally:
        stop.set()
        thread.join(60)
    assert before_kill > 100 and len(acknowledged) > before_kill
    stored = read_all(broker.bootstrap, "crash")
    missing = [v for v in acknowledged if v not in stored]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    moved = [v for v, place in acknowledged.items() if stored[v] != place]
    assert not moved, f"acknowledged records changed offset: {moved[:5]}"
    for partition in range(3):
        offsets = sorted(o for p, o in stored.values() if p == partition)
        assert offsets == list(range(len(offsets)))


def test_torn_tail_is_truncated_on_restart(broker_factory):
    """Garbage after the last complete batch (a torn write) is cut by CRC on restart; every
    earlier record survives and new records continue at the next offset."""
    broker = broker_factory()
    create(broker.bootstrap, "torn")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce("torn", value=f"v{i}".encode())
        producer.flush(10)
    broker.kill()
    segment = next((broker.data_dir / "torn-0").glob("*.log"))
    with open(segment, "ab") as handle:  # half a batch: a believable length, then junk
        handle.write(b"\x00" * 8 + b"\x00\x00\x01\x00" + b"\xab" * 40)
    broker.start()
    assert "torn-0" in broker.log_path.read_text() and "truncating at position" in \
        broker.log_path.read_text()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce("torn", value=b"after")
    producer.flush(10)
    stored = read_all(broker.bootstrap, "torn")
    assert stored == {**{f"v{i}": (0, i) for i in range(10)}, "after": (0, 10)}


def test_segments_roll_and_retention_moves_log_start(broker_factory):
    broker = broker_factory(settings={"log.retention.check.interval.ms": "200"})
    create(broker.bootstrap, "short", config={"segment.bytes": "2048",
                                              "retention.bytes": "4096"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(60):
        producer.produce("short", value=f"{i:04d}".encode() * 50)
        producer.flush(10)
    time.sleep(1.5)
    segments = sorted((broker.data_dir / "short-0").glob("*.log"))
    assert 1 < len(segments) <= 4
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                         "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("short", 0), timeout=10)
        assert high == 60 and low > 0
        assert low == int(segments[0].stem)
        consumer.assign([TopicPartition("short", 0, OFFSET_BEGINNING)])
        first = None
        while first is None:
            message = consumer.poll(5)
            first = message if message is not None and message.error() is None else None
        assert first.offset() == low
    finally:
        consumer.close()


def test_retention_by_time(broker_factory):
    broker = broker_factory(settings={"log.retention.check.interval.ms": "200"})
    create(broker.bootstrap, "old", config={"segment.bytes": "1024", "retention.ms": "1000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    old = int(time.time() * 1000) - 3_600_000
    for _ in range(20):
        producer.produce("old", value=b"x" * 200, timestamp=old)
        producer.flush(10)
    deadline = time.monotonic() + 10
    low = 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                         "enable.auto.commit": False})
    try:
        while time.monotonic() < deadline and low == 0:
            low, high = consumer.get_watermark_offsets(TopicPartition("old", 0), timeout=10)
            time.sleep(0.3)
    finally:
        consumer.close()
    assert low > 0 and high == 20


def test_restart_keeps_topics_configs_and_offsets(broker_factory):
    broker = broker_factory()
    create(broker.bootstrap, "keep", partitions=2, config={"retention.ms": "123456"})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        producer.produce("keep", value=f"k{i}".encode(), partition=i % 2)
    producer.flush(10)
    before = read_all(broker.bootstrap, "keep")
    assert broker.stop() == 0
    assert "stopped cleanly" in broker.log_path.read_text()
    broker.start()
    assert read_all(broker.bootstrap, "keep") == before
    from confluent_kafka.admin import ConfigResource
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource("topic", "keep")
    configs = client.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "123456"


def test_sigint_stops_cleanly(broker):
    broker.process.send_signal(signal.SIGINT)
    assert broker.process.wait(15) == 0
    assert "stopped cleanly" in broker.log_path.read_text()


def test_advertised_listener_differs_from_listen_address(broker_factory):
    broker = broker_factory(settings={"advertised.listeners": "PLAINTEXT://proxy.example:19999"})
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    metadata = client.list_topics(timeout=10)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("proxy.example", 19999)]


def test_fsync_policy_ack(broker_factory):
    broker = broker_factory(settings={"log.flush.policy": "ack"})
    create(broker.bootstrap, "durable")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    results = []
    for i in range(500):
        producer.produce("durable", value=f"d{i}".encode(),
                         on_delivery=lambda e, m: results.append(e))
    producer.flush(20)
    assert len(results) == 500 and all(e is None for e in results)
    broker.kill()
    broker.start()
    assert len(read_all(broker.bootstrap, "durable")) == 500
