"""kafka-python against a real broker process."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume(broker, compression):
    topic = f"kp-{compression}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()

    # kafka-python's defaults: with acks=all it is an idempotent producer.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                             compression_type=compression, linger_ms=5)
    futures = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                             headers=[("h", b"1")], partition=i % 2) for i in range(200)]
    metadata = [f.get(timeout=20) for f in futures]
    producer.close()
    assert sorted(m.offset for m in metadata if m.partition == 0) == list(range(100))

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    consumer.seek_to_beginning()
    records = [r for _, r in zip(range(200), consumer)]
    assert sorted(r.value for r in records) == sorted(f"v{i}".encode() for i in range(200))
    first = next(r for r in records if r.value == b"v7")
    assert (first.key, first.partition, first.headers) == (b"k7", 1, [("h", b"1")])
    end = consumer.end_offsets([TopicPartition(topic, 0)])
    assert end[TopicPartition(topic, 0)] == 100
    consumer.close()


def test_describe_configs_and_cluster(broker):
    from kafka.admin import ConfigResource, ConfigResourceType
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("cfg", 1, 1, topic_configs={"cleanup.policy": "delete",
                                                             "retention.bytes": "1048576"})])
    result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg")])
    text = repr(result)
    assert "retention.bytes" in text and "1048576" in text
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 1 and cluster["brokers"][0]["port"] == broker.port
    admin.close()
