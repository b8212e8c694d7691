"""Helpers for cluster tests: real ZooKeeper, real broker processes, real clients.

Timings are short on purpose (2 s ZooKeeper sessions and replica lag), so a failover takes
seconds; every wait is bounded and says what it waited for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.cluster.local import LocalCluster
from oncelog.protocol import messages
from oncelog.protocol.batches import iter_headers
from oncelog.protocol.records import decode_records, make_batch
from oncelog.storage import Log, LogConfig
from tests.zookeeper_server import wait_for

SESSION_MS = 2000
FAST = {
    "zookeeper.session.timeout.ms": str(SESSION_MS),
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


def wait_until(predicate: Callable[[], object], timeout_s: float = 30.0, what: str = "it"):
    # 0.1 s between polls: a predicate here usually asks a broker for metadata
    return wait_for(predicate, timeout_s, what, interval_s=0.1)


def admin(cluster: LocalCluster, node_ids: list[int] | None = None) -> AdminClient:
    """An AdminClient bootstrapped from the running brokers (or the ones named)."""
    nodes = node_ids or [n for n in cluster.brokers if cluster.is_running(n)]
    bootstrap = ",".join(cluster.broker(n).bootstrap for n in nodes)
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(cluster: LocalCluster, name: str, partitions: int = 1, replication: int = 3,
                 config: dict[str, str] | None = None,
                 assignment: list[list[int]] | None = None) -> None:
    if assignment:
        topic = NewTopic(name, len(assignment), replica_assignment=assignment,
                         config=config or {})
    else:
        topic = NewTopic(name, partitions, replication, config=config or {})
    client = admin(cluster)  # keep it alive until the future is done
    client.create_topics([topic])[name].result(15)
    wait_until(lambda: all(p.leader >= 0 and len(p.isrs) == len(p.replicas)
                           for p in partitions_of(cluster, name).values()),
               what=f"topic {name} with every replica in sync")
    # Each leader must know it leads: the metadata above may come from another broker, and
    # a leader that has not applied the new partition yet answers UNKNOWN_TOPIC_OR_PARTITION
    # (seen on a loaded machine).
    # Asked over a socket of its own: librdkafka's metadata may come from any broker it knows.
    leaders = {p.id: p.leader for p in partitions_of(cluster, name).values()}
    wait_until(lambda: all(own_leader(cluster, name, index, leader) == leader
                           for index, leader in leaders.items()),
               what=f"the leaders of {name} leading by their own metadata")


def own_leader(cluster: LocalCluster, topic: str, partition: int, node_id: int) -> int:
    """The leader of ``topic``-``partition`` in broker ``node_id``'s own Metadata answer."""
    from tests.integration.raw import RawConnection
    try:
        with RawConnection(cluster.broker(node_id).bootstrap, timeout=5) as raw:
            response = raw.request(messages.MetadataRequest(topics=None), 1)
    except OSError:
        return -1
    for found in response.topics:
        if found.name == topic and found.error_code == 0:
            for state in found.partitions:
                if state.partition_index == partition and state.error_code == 0:
                    return state.leader_id
    return -1


def partitions_of(cluster: LocalCluster, topic: str, node_ids: list[int] | None = None) -> dict:
    try:
        # every topic: naming one makes librdkafka's admin handle ask Metadata to create it
        metadata = admin(cluster, node_ids).list_topics(timeout=5)
    except Exception:
        return {}
    found = metadata.topics.get(topic)
    return dict(found.partitions) if found is not None and found.error is None else {}


def leader_of(cluster: LocalCluster, topic: str, partition: int = 0,
              node_ids: list[int] | None = None) -> int:
    found = partitions_of(cluster, topic, node_ids).get(partition)
    return found.leader if found is not None else -1


def wait_for_leader(cluster: LocalCluster, topic: str, partition: int = 0,
                    node_ids: list[int] | None = None) -> int:
    """The partition's leader, once a broker answers with one (node ids start at 1)."""
    return wait_until(lambda: max(leader_of(cluster, topic, partition, node_ids), 0),
                      what=f"a leader for {topic}-{partition}")


def isr_of(cluster: LocalCluster, topic: str, partition: int = 0,
           node_ids: list[int] | None = None) -> list[int]:
    found = partitions_of(cluster, topic, node_ids).get(partition)
    return sorted(found.isrs) if found is not None else []


def producer(cluster: LocalCluster, **config) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5,
                     "topic.metadata.refresh.interval.ms": 1000, **config})


def consume_all(cluster: LocalCluster, topic: str, expected: int, timeout_s: float = 30.0,
                partitions: int = 1) -> list[bytes]:
    """Every value from the start of ``topic`` (assign, no group), until ``expected`` or
    the timeout."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "topic.metadata.refresh.interval.ms": 1000})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and len(values) < expected:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
        # and a little longer, to see duplicates or extras arrive
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                values.append(message.value())
    finally:
        consumer.close()
    return values


def replica_values(cluster: LocalCluster, node_id: int, topic: str,
                   partition: int = 0) -> list[bytes]:
    """The values in one broker's copy of a partition, read from its files (stop it first)."""
    directory = cluster.broker(node_id).data_dir / f"{topic}-{partition}"
    config = LogConfig(segment_bytes=1 << 30, segment_ms=1 << 40, retention_ms=-1,
                       retention_bytes=-1, index_interval_bytes=4096)
    log = Log.open(Path(directory), config, lambda: int(time.time() * 1000))
    try:
        data = bytes(log.read(log.log_start_offset, 1 << 30))
    finally:
        log.close()
    values = []
    for position, header in iter_headers(data):
        if not header.is_control:
            batch = data[position:position + header.size]
            values.extend(r.value for r in decode_records(batch, header))
    return values


def raw_produce(bootstrap: str, topic: str, value: bytes, acks: int = 1,
                timeout_ms: int = 5000, partition: int = 0) -> int:
    """One produce request straight to one broker; returns its error code."""
    from tests.integration.raw import RawConnection
    P = messages.ProduceRequest
    request = P(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[
            P.TopicProduceData.PartitionProduceData(index=partition, records=make_batch(
                [value], timestamp_ms=int(time.time() * 1000)))])])
    with RawConnection(bootstrap, timeout=timeout_ms / 1000 + 10) as raw:
        response = raw.request(request, 9)
    return response.responses[0].partition_responses[0].error_code
