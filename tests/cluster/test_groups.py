"""Consumer groups on a cluster: __consumer_offsets is replicated, and the group
coordinator moves with the leadership of the group's partition."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from .helpers import create_topic, isr_of, producer, wait_until

pytestmark = pytest.mark.slow


def consume(consumer: Consumer, count: int, timeout_s: float = 30.0) -> list[bytes]:
    values, deadline = [], time.monotonic() + timeout_s
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            values.append(message.value())
            consumer.commit(message, asynchronous=False)
    return values


def test_committed_offsets_survive_the_coordinators_death_and_the_group_keeps_consuming(
        cluster_factory):
    cluster = cluster_factory(3)
    send = _events(cluster, [b"first-%d" % i for i in range(100)])
    config = _group_config(cluster, "billing")
    consumer = Consumer(config)
    consumer.subscribe(["events"])
    assert consume(consumer, 100) == [b"first-%d" % i for i in range(100)]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    coordinator = admin.describe_consumer_groups(["billing"])["billing"].result(10).coordinator.id
    wait_until(lambda: len(isr_of(cluster, "__consumer_offsets",
                                  partition=_offsets_partition(cluster, "billing"))) == 3,
               what="__consumer_offsets fully replicated")
    cluster.kill(coordinator)
    for i in range(50):
        send.produce("events", b"second-%d" % i)
    assert send.flush(30) == 0
    assert consume(consumer, 50, timeout_s=45) == [b"second-%d" % i for i in range(50)]
    consumer.close()
    survivors = AdminClient({"bootstrap.servers": ",".join(
        cluster.broker(n).bootstrap for n in (1, 2, 3) if n != coordinator)})
    new = survivors.describe_consumer_groups(["billing"])["billing"].result(15).coordinator.id
    assert new != coordinator
    committed = survivors.list_consumer_group_offsets(
        [_request("billing", TopicPartition("events", 0))])["billing"].result(15)
    assert committed.topic_partitions[0].offset == 150
    again = Consumer(config)
    again.subscribe(["events"])
    message = again.poll(8)
    assert message is None or message.error() is not None, \
        "a restarted member of the group must start after the committed offsets"
    again.close()


def _events(cluster, values: list[bytes]):
    """Topic "events" (RF 3) holding ``values``; the producer, for more."""
    create_topic(cluster, "events", replication=3)
    send = producer(cluster, acks="all")
    for value in values:
        send.produce("events", value)
    assert send.flush(15) == 0
    return send


def _group_config(cluster, group: str, **extra) -> dict:
    return {"bootstrap.servers": cluster.bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 6000, "topic.metadata.refresh.interval.ms": 1000, **extra}


def _offsets_partition(cluster, group: str) -> int:
    from oncelog.coordinator.group.records import partition_for
    return partition_for(group, 3)  # offsets.topic.num.partitions=3 in these tests


def _request(group, *partitions):
    from confluent_kafka import ConsumerGroupTopicPartitions
    return ConsumerGroupTopicPartitions(group, list(partitions))


def test_a_restarted_static_member_keeps_its_new_identity_across_a_coordinator_failover(
        cluster_factory):
    """KIP-345 on a cluster: a static member restarted (no LeaveGroup) takes a new member id
    from the coordinator; after the coordinator's broker dies, the coordinator that loads the
    group from the replicated log knows that new id and keeps taking the member's commits (a
    stale id there would be answered FENCED_INSTANCE_ID, fatal to the consumer)."""
    cluster = cluster_factory(3)
    _events(cluster, [b"v-%d" % i for i in range(60)])
    config = _group_config(cluster, "static", **{"group.instance.id": "worker-1"})
    first = Consumer(config)
    first.subscribe(["events"])
    assert consume(first, 20) == [b"v-%d" % i for i in range(20)]
    first.close()  # a static member sends no LeaveGroup: as if its process had died
    errors: list = []
    restarted = Consumer({**config, "error_cb": errors.append})
    restarted.subscribe(["events"])
    assert consume(restarted, 20) == [b"v-%d" % i for i in range(20, 40)]
    admin_client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    coordinator = admin_client.describe_consumer_groups(["static"])["static"].result(10) \
        .coordinator.id
    wait_until(lambda: len(isr_of(cluster, "__consumer_offsets",
                                  partition=_offsets_partition(cluster, "static"))) == 3,
               what="__consumer_offsets fully replicated")
    cluster.kill(coordinator)
    assert consume(restarted, 20, timeout_s=45) == [b"v-%d" % i for i in range(40, 60)]
    restarted.close()
    assert not [e for e in errors if e.fatal()], errors
