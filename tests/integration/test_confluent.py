"""confluent-kafka (librdkafka) against a real broker process."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, Producer,
                             TopicPartition)
from confluent_kafka.admin import (AdminClient, ConfigResource, ConfigSource, NewPartitions,
                                   NewTopic)


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(broker, name: str, partitions: int = 1, config: dict | None = None) -> None:
    client = admin(broker)  # keep a reference: a collected client fails its futures
    client.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)


def consume_all(broker, topic: str, expected: int, partitions: int = 1, timeout: float = 20,
                **config) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "test",
                         "enable.auto.commit": False, **config})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    messages, deadline = [], time.monotonic() + timeout
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                messages.append(message)
    finally:
        consumer.close()
    return messages


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_consume_every_codec_and_acks(broker, compression, acks):
    topic = f"t-{compression}-{acks}"
    create(broker, topic, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks,
                         "compression.type": compression, "linger.ms": 5})
    delivered = []
    for i in range(300):
        producer.produce(topic, key=f"k{i % 7}".encode(), value=f"value-{i}".encode() * 3,
                         headers=[("n", str(i).encode()), ("empty", None)],
                         on_delivery=lambda err, msg: delivered.append((err, msg)))
    assert producer.flush(20) == 0
    assert all(err is None for err, _ in delivered) and len(delivered) == 300
    messages = consume_all(broker, topic, 300, partitions=2)
    assert sorted(m.value() for m in messages) == \
        sorted(f"value-{i}".encode() * 3 for i in range(300))
    by_value = {m.value(): m for m in messages}
    sample = by_value[b"value-42" * 3]
    assert sample.key() == b"k0"
    assert sample.headers() == [("n", b"42"), ("empty", None)]
    for partition in (0, 1):
        offsets = [m.offset() for m in messages if m.partition() == partition]
        assert offsets == list(range(len(offsets))), "offsets are dense and in order"
    if acks != "0":  # acks=0 reports offset -1: the broker never answered
        assert {msg.offset() for _, msg in delivered if msg.partition() == 0} == set(
            m.offset() for m in messages if m.partition() == 0)


def test_admin_create_describe_delete(broker):
    client = admin(broker)
    futures = client.create_topics([NewTopic("orders", 3, 1, config={"retention.ms": "60000"})])
    futures["orders"].result(15)
    with pytest.raises(Exception) as raised:
        client.create_topics([NewTopic("orders", 3, 1)])["orders"].result(15)
    assert raised.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    metadata = client.list_topics(timeout=10)
    assert len(metadata.topics["orders"].partitions) == 3
    assert list(metadata.brokers) == [1]

    resource = ConfigResource("topic", "orders")
    configs = client.describe_configs([resource])[resource].result(15)
    assert configs["retention.ms"].value == "60000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].value == str(1 << 30)
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    broker_resource = ConfigResource("broker", "1")
    broker_configs = client.describe_configs([broker_resource])[broker_resource].result(15)
    assert broker_configs["num.partitions"].value == "1"

    client.create_partitions([NewPartitions("orders", 5)])["orders"].result(15)
    assert len(client.list_topics(timeout=10).topics["orders"].partitions) == 5

    client.delete_topics(["orders"])["orders"].result(15)
    assert "orders" not in client.list_topics(timeout=10).topics


def test_bad_admin_requests_get_kafka_errors(broker):
    client = admin(broker)
    cases = {
        "bad name!": (NewTopic("bad name!", 1, 1), KafkaError.TOPIC_EXCEPTION),
        "rf3": (NewTopic("rf3", 1, 3), KafkaError.INVALID_REPLICATION_FACTOR),
        "badcfg": (NewTopic("badcfg", 1, 1, config={"no.such.config": "1"}),
                   KafkaError.INVALID_CONFIG),
        "badval": (NewTopic("badval", 1, 1, config={"retention.ms": "soon"}),
                   KafkaError.INVALID_CONFIG),
    }
    futures = client.create_topics([case for case, _ in cases.values()])
    for name, (_, code) in cases.items():
        with pytest.raises(Exception) as raised:
            futures[name].result(15)
        assert raised.value.args[0].code() == code, name
    with pytest.raises(Exception) as raised:
        client.delete_topics(["missing"])["missing"].result(15)
    assert raised.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_auto_create_on_produce(broker_factory):
    broker = broker_factory(settings={"num.partitions": "4"})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("auto-made", value=b"x")
    assert producer.flush(20) == 0
    client = admin(broker)
    assert len(client.list_topics(timeout=10).topics["auto-made"].partitions) == 4


def test_auto_create_disabled(broker_factory):
    broker = broker_factory(settings={"auto.create.topics.enable": "false"})
    client = admin(broker)
    metadata = client.list_topics("nope", timeout=10)
    assert metadata.topics["nope"].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_offsets_earliest_latest_and_timestamp(broker):
    create(broker, "times")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(10):
        producer.produce("times", value=f"v{i}".encode(), timestamp=base + i * 1000)
        producer.flush(10)  # one batch per record: timestamps cross batch boundaries
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x",
                         "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("times", 0), timeout=10)
        assert (low, high) == (0, 10)  # latest is the log end offset: last offset + 1
        found = consumer.offsets_for_times([TopicPartition("times", 0, base + 4500)], timeout=10)
        assert found[0].offset == 5
        found = consumer.offsets_for_times([TopicPartition("times", 0, base + 99_000)], timeout=10)
        assert found[0].offset == -1
        consumer.assign([TopicPartition("times", 0, OFFSET_END)])
        assert consumer.poll(1.0) is None
    finally:
        consumer.close()


def test_offset_out_of_range_triggers_auto_offset_reset(broker):
    create(broker, "reset")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        producer.produce("reset", value=f"r{i}".encode())
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "y",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("reset", 0, 1000)])  # beyond the log end
        values, deadline = [], time.monotonic() + 15
        while len(values) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values == [f"r{i}".encode() for i in range(5)]
    finally:
        consumer.close()


def test_waiting_fetch_is_answered_when_data_arrives(broker):
    """A consumer waiting with fetch.wait.max.ms=5000 sees a new record in well under 5 s."""
    create(broker, "latency")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "z",
                         "fetch.wait.max.ms": 5000, "fetch.min.bytes": 1,
                         "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    try:
        consumer.assign([TopicPartition("latency", 0, OFFSET_BEGINNING)])
        consumer.poll(1.0)  # the consumer is now parked in a long-poll fetch
        time.sleep(0.5)
        sent = time.monotonic()
        producer.produce("latency", value=b"ping")
        producer.flush(10)
        message = None
        while message is None and time.monotonic() - sent < 10:
            message = consumer.poll(0.1)
        assert message is not None and message.value() == b"ping"
        assert time.monotonic() - sent < 1.5
    finally:
        consumer.close()


def test_large_batch_beyond_partition_max_bytes_is_still_delivered(broker):
    """KIP-74: the first batch is returned even if it exceeds max.partition.fetch.bytes."""
    create(broker, "big")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50,
                         "batch.size": 900_000})
    for i in range(60):
        producer.produce("big", value=bytes([i]) * 10_000)
    producer.flush(10)
    messages = consume_all(broker, "big", 60, **{"max.partition.fetch.bytes": 1024,
                                                  "fetch.max.bytes": 1024,
                                                  "message.max.bytes": 1000})
    assert [m.value()[0] for m in messages] == list(range(60))
