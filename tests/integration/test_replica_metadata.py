"""A single broker speaks the replication parts of the protocol truthfully: Metadata reports
the leader epoch, replicas and ISR it keeps; OffsetForLeaderEpoch answers from the epoch
checkpoint; a fetch from a broker that is no replica is refused; manual assignments to
brokers that do not exist are refused. (Clusters are tested in tests/cluster/.)"""

from __future__ import annotations

import asyncio
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.protocol import messages
from oncelog.protocol.errors import ErrorCode
from oncelog.net.client import BrokerClient

from .raw import RawConnection


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, b"v%d" % i)
    assert producer.flush(15) == 0


def test_metadata_and_offset_for_leader_epoch_describe_the_one_replica(broker):
    produce(broker.bootstrap, "epochs", 5)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    metadata = admin.list_topics("epochs", timeout=10)
    partition = metadata.topics["epochs"].partitions[0]
    assert (partition.leader, partition.replicas, partition.isrs) == (1, [1], [1])
    R = messages.OffsetForLeaderEpochRequest
    with RawConnection(broker.bootstrap) as raw:
        response = raw.request(R(replica_id=-1, topics=[R.OffsetForLeaderTopic(
            topic="epochs", partitions=[
                R.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=0, leader_epoch=0),
                R.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=3, leader_epoch=0)])]), 4)
    answers = [(p.error_code, p.leader_epoch, p.end_offset) for p in response.topics[0].partitions]
    assert answers == [(ErrorCode.NONE, 0, 5), (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1)]


def test_a_fetch_from_a_broker_that_is_no_replica_is_refused(broker):
    produce(broker.bootstrap, "followers", 1)
    F = messages.FetchRequest
    request = F(replica_id=7, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic="followers", partitions=[
                    F.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1,
                                                fetch_offset=0, log_start_offset=-1,
                                                partition_max_bytes=1 << 20)])],
                forgotten_topics_data=[], rack_id="")
    with RawConnection(broker.bootstrap) as raw:
        response = raw.request(request, 11)
    assert response.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_manual_assignment_to_a_broker_that_does_not_exist_is_refused(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic("placed", 2, replica_assignment=[[1], [2]]),
                                   NewTopic("here", 2, replica_assignment=[[1], [1]])])
    error = futures["placed"].exception(10)
    assert error is not None and error.args[0].code() == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert futures["here"].result(10) is None
    assert len(admin.list_topics("here", timeout=10).topics["here"].partitions) == 2


def test_one_broker_client_shared_by_concurrent_tasks_gives_each_its_own_answer(broker):
    """The transaction coordinator writes markers for concurrent transactions through one
    ``BrokerClient`` per broker. Two requests in flight on it at once used to take each
    other's answers: one failed on the correlation id, the other waited out its whole
    timeout (35 s), and the EndTxn behind it went unanswered (found by ``oncelog verify
    --brokers 3``). Twenty tasks at once, each asking for a different topic, must each get
    their own topic back, at once."""
    topics = [f"shared-{i}" for i in range(20)]
    for topic in topics:
        produce(broker.bootstrap, topic, 1)
    host, port = broker.bootstrap.rsplit(":", 1)

    async def ask_all() -> list[list[str]]:
        client = BrokerClient(host, int(port), timeout_s=10)
        try:
            answers = await asyncio.gather(*[
                client.request(messages.MetadataRequest(
                    topics=[messages.MetadataRequest.MetadataRequestTopic(name=topic)]), 1)
                for topic in topics])
        finally:
            client.close()
        return [[t.name for t in answer.topics] for answer in answers]

    started = time.monotonic()
    assert asyncio.run(ask_all()) == [[topic] for topic in topics]
    assert time.monotonic() - started < 5
