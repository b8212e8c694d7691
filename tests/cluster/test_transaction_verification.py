"""KIP-890's transaction verification on a cluster: a partition leader that does not
coordinate a transaction asks its coordinator (AddPartitionsToTxn v5, ``verify_only``) before
a producer's first transactional batch opens a transaction in the partition.

The bug it prevents (found by the cluster simulation as seeds 2625 and 3144): a
transactional write arriving after its transaction ended - a producer's retry, or a batch
that waited out the coordinator's timeout - opened a transaction in the partition that no
coordinator would ever end. The partition's last stable offset stopped there for good, and
every ``read_committed`` consumer with it. Only a leader that also coordinated the id
checked before."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from oncelog.protocol.errors import ErrorCode
from oncelog.protocol.messages import (AddPartitionsToTxnRequest, EndTxnRequest,
                                       FindCoordinatorRequest, InitProducerIdRequest,
                                       ProduceRequest)
from oncelog.protocol.records import make_batch
from tests.integration.raw import RawConnection

from .helpers import create_topic, wait_for_leader, wait_until

pytestmark = pytest.mark.slow

STATE_PARTITIONS = 3
TRANSACTIONAL = 0x10  # a batch's attributes: part of a transaction


def _coordinator(cluster, transactional_id: str) -> int:
    def found() -> int:
        with RawConnection(cluster.bootstrap.split(",")[0]) as conn:
            answer = conn.request(FindCoordinatorRequest(key=transactional_id, key_type=1), 3)
        return answer.node_id if answer.error_code == ErrorCode.NONE else 0
    return wait_until(found, what=f"a coordinator for {transactional_id!r}")


def _produce(bootstrap: str, transactional_id: str, topic: str, partition: int,
             producer_id: int, epoch: int, sequence: int, value: bytes) -> ErrorCode:
    """One transactional batch straight to a broker, retried while it answers
    NOT_ENOUGH_REPLICAS (the coordinator cannot say yet: its markers are on their way)."""
    P = ProduceRequest
    batch = make_batch([value], timestamp_ms=int(time.time() * 1000), producer_id=producer_id,
                       producer_epoch=epoch, base_sequence=sequence, attributes=TRANSACTIONAL)
    deadline = time.monotonic() + 20
    while True:
        request = P(transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
            P.TopicProduceData(name=topic, partition_data=[
                P.TopicProduceData.PartitionProduceData(index=partition,
                                                        records=bytearray(batch))])])
        with RawConnection(bootstrap, timeout=30) as conn:
            code = ErrorCode(conn.request(request, 9).responses[0]
                             .partition_responses[0].error_code)
        if code is not ErrorCode.NOT_ENOUGH_REPLICAS or time.monotonic() > deadline:
            return code
        time.sleep(0.2)


def _stable_offsets(cluster, topic: str, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark) as consumers see them."""
    return (_end_offset(cluster, topic, partition, "read_committed"),
            _end_offset(cluster, topic, partition, "read_uncommitted"))


def _end_offset(cluster, topic: str, partition: int, isolation: str) -> int:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": isolation,
                         "isolation.level": isolation})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10,
                                              cached=False)[1]
    finally:
        consumer.close()


def test_a_write_after_its_transaction_ended_is_refused_by_a_leader_that_does_not_coordinate_it(
        cluster_factory):
    cluster = cluster_factory(3, **{"transaction.state.log.num.partitions":
                                    str(STATE_PARTITIONS)})
    create_topic(cluster, "late", partitions=3, replication=3,
                 config={"min.insync.replicas": "2"})
    transactional_id = "late-writer"
    coordinator = _coordinator(cluster, transactional_id)
    leaders = {p: wait_for_leader(cluster, "late", p) for p in range(3)}
    elsewhere = sorted(p for p, leader in leaders.items() if leader != coordinator)
    if len(elsewhere) < 2:  # leaders are spread over three brokers: at most one is it
        pytest.fail(f"partition leaders {leaders}, coordinator {coordinator}")
    partition, never_added = elsewhere[:2]
    leader = cluster.broker(leaders[partition]).bootstrap
    other = cluster.broker(leaders[never_added]).bootstrap

    with RawConnection(cluster.broker(coordinator).bootstrap, timeout=30) as conn:
        init = conn.request(InitProducerIdRequest(
            transactional_id=transactional_id, transaction_timeout_ms=60000,
            producer_id=-1, producer_epoch=-1), 4)
        assert init.error_code == ErrorCode.NONE
        pid, epoch = init.producer_id, init.producer_epoch
        A = AddPartitionsToTxnRequest
        added = conn.request(A(v3_and_below_transactional_id=transactional_id,
                               v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                               v3_and_below_topics=[A.AddPartitionsToTxnTopic(
                                   name="late", partitions=[partition])]), 3)
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == ErrorCode.NONE

        # in the transaction: the leader asks the coordinator, who says yes
        assert _produce(leader, transactional_id, "late", partition, pid, epoch, 0,
                        b"in the transaction") is ErrorCode.NONE
        # a partition the producer never added, while its transaction is open
        assert _produce(other, transactional_id, "late", never_added, pid, epoch, 0,
                        b"never added") is ErrorCode.INVALID_TXN_STATE

        ended = conn.request(EndTxnRequest(transactional_id=transactional_id, producer_id=pid,
                                           producer_epoch=epoch, committed=False), 3)
        assert ended.error_code == ErrorCode.NONE

    def ended_everywhere() -> bool:  # the abort marker is in: nothing open
        stable, high = _stable_offsets(cluster, "late", partition)
        return stable == high == 2
    wait_until(ended_everywhere, what="the abort marker in the partition")

    # the late write: the next batch of the ended transaction, same producer and epoch
    assert _produce(leader, transactional_id, "late", partition, pid, epoch, 1,
                    b"too late") is ErrorCode.INVALID_TXN_STATE
    # and nothing was left open: read_committed consumers still read up to the high watermark
    assert _stable_offsets(cluster, "late", partition) == (2, 2)
    stable, high = _stable_offsets(cluster, "late", never_added)
    assert stable == high == 0
