"""A broker never forgets a topic it has just created (issue 30).

What happened: the membership sync read a whole snapshot of ZooKeeper in a thread while the
event loop served CreateTopics; ``PartitionManager.sync()`` then applied the older snapshot,
dropped the new topic and deleted its local replicas' files; the next sync added it back,
empty. On a cluster holding 150 topics, with topics created one by one, each broker logged
"deleted topic" 22-56 times per run for topics nobody deleted, CreatePartitions right after
a successful CreateTopics got UNKNOWN_TOPIC_OR_PARTITION (librdkafka's 0081, 5 runs in 12),
and records the leader had acknowledged were deleted with the files.

What holds now: every read from the store carries versions and is applied only forward (a
listing older than a topic's creation cannot drop it), and a broker asked about a topic it
has not heard of yet asks the store. The test creates topics one by one through a rotating
broker, grows each through another broker at once, and produces to every partition with
acks=all: no CreateTopics or CreatePartitions error, no "deleted topic" line, every
acknowledged record read back.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from .helpers import wait_until

pytestmark = pytest.mark.slow

BACKGROUND_TOPICS = 150
ROUNDS = 24


def test_topics_created_one_by_one_on_a_busy_cluster_are_never_forgotten(cluster_factory):
    cluster = cluster_factory(3)
    admins = {n: AdminClient({"bootstrap.servers": cluster.broker(n).bootstrap})
              for n in (1, 2, 3)}
    background = [NewTopic(f"background-{i}", 1, 1) for i in range(BACKGROUND_TOPICS)]
    for future in admins[1].create_topics(background, request_timeout=60).values():
        future.result(60)
    log_starts = {n: cluster.broker(n).log_path.stat().st_size for n in (1, 2, 3)}
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 0, "topic.metadata.refresh.interval.ms": 1000,
                         "message.timeout.ms": 30000})
    delivered: dict[str, list[bytes]] = {}
    failures: list[str] = []

    def on_delivery(error, message) -> None:
        if error is not None:
            failures.append(f"{message.topic()}-{message.partition()}: {error}")
        else:
            delivered.setdefault(message.topic(), []).append(message.value())

    errors = []
    names = [f"round-{i}" for i in range(ROUNDS)]
    for i, name in enumerate(names):
        creator, grower = admins[1 + i % 3], admins[1 + (i + 1) % 3]
        created = creator.create_topics([NewTopic(name, 2, 3)], request_timeout=15)[name]
        if (error := created.exception(20)) is not None:
            errors.append(f"CreateTopics {name}: {error}")
            continue
        # at once, through another broker, which may not have heard of it yet
        grown = grower.create_partitions([NewPartitions(name, 3)], request_timeout=15)[name]
        if (error := grown.exception(20)) is not None:
            errors.append(f"CreatePartitions {name}: {error}")
        # as an application would: the producer learns of the new partition from metadata
        wait_until(lambda: len(producer.list_topics(name, timeout=5).topics[name].partitions)
                   == 3, timeout_s=15, what=f"the producer seeing 3 partitions of {name}")
        for partition in range(3):
            producer.produce(name, f"{name}/{partition}".encode(), partition=partition,
                             on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0, "records still undelivered after 60 s"
    assert errors == []
    assert failures == []
    for n in (1, 2, 3):
        with open(cluster.broker(n).log_path, "rb") as log:
            log.seek(log_starts[n])
            forgotten = [line for line in log.read().decode(errors="replace").splitlines()
                         if "deleted topic" in line]
        assert forgotten == [], f"broker {n} forgot topics nobody deleted: {forgotten[:5]}"
    expected = sorted(f"{name}/{p}".encode() for name in names for p in range(3))
    assert sorted(v for values in delivered.values() for v in values) == expected
    assert read_all(cluster, names, len(expected)) == expected


def read_all(cluster, names: list[str], count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(name, p, 0) for name in names for p in range(3)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
    finally:
        consumer.close()
    return sorted(values)
