"""Idempotence rules at the wire, with exact batches: what each retried, forged, stale or
out-of-order batch gets, and that producer state survives restarts and expires."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from oncelog.protocol.errors import ErrorCode
from oncelog.protocol.messages import InitProducerIdRequest, MetadataRequest, ProduceRequest
from oncelog.protocol.records import make_batch
from tests.integration.raw import RawConnection

T = ProduceRequest.TopicProduceData
P = T.PartitionProduceData
MAX_SEQUENCE = 2**31 - 1


def send(conn: RawConnection, pid: int, epoch: int, seq: int, count: int = 1,
         partition: int = 0, attributes: int = 0, topic: str = "idem"):
    batch = make_batch([b"p%d-e%d-s%d" % (pid, epoch, seq + i) for i in range(count)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       attributes=attributes)
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[P(index=partition, records=batch)])])
    result = conn.request(request, 9).responses[0].partition_responses[0]
    return ErrorCode(result.error_code), result.base_offset


def init_producer_id(conn: RawConnection, version: int = 4) -> tuple[int, int]:
    response = conn.request(InitProducerIdRequest(transactional_id=None,
                                                  transaction_timeout_ms=60000,
                                                  producer_id=-1, producer_epoch=-1), version)
    assert response.error_code == 0
    return response.producer_id, response.producer_epoch


@pytest.fixture
def conn(broker):
    with RawConnection(broker.bootstrap) as connection:
        connection.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name="idem")], allow_auto_topic_creation=True), 9)
        yield connection


def test_init_producer_id_at_every_version_gives_unique_ids(broker, conn):
    ids = [init_producer_id(conn, version) for version in range(0, 6)]
    assert len({pid for pid, _ in ids}) == 6 and all(epoch == 0 for _, epoch in ids)
    broker.restart()
    with RawConnection(broker.bootstrap) as again:
        after = init_producer_id(again)[0]
    assert after > max(pid for pid, _ in ids), "ids are never reused after a restart"


def test_retried_batch_gets_its_original_offset_and_is_not_written_again(conn):
    pid, epoch = init_producer_id(conn)
    offsets = [send(conn, pid, epoch, seq * 3, count=3) for seq in range(6)]
    assert offsets == [(ErrorCode.NONE, 3 * i) for i in range(6)]
    # Each of the last five batches, sent again, is recognised: NONE with its first offset.
    for seq in range(1, 6):
        assert send(conn, pid, epoch, seq * 3, count=3) == (ErrorCode.NONE, 3 * seq)
    # The first batch has left the five-batch window: it is out of order now.
    assert send(conn, pid, epoch, 0, count=3)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(conn, pid, epoch, 18) == (ErrorCode.NONE, 18)  # nothing was appended meanwhile


def test_same_value_sent_twice_with_new_sequences_is_kept_twice(conn):
    """Sequences, not contents, are deduplicated: A B A stays A B A."""
    pid, epoch = init_producer_id(conn)
    for seq, value in enumerate([b"A", b"B", b"A"]):
        batch = make_batch([value], producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
            T(name="idem", partition_data=[P(index=0, records=batch)])])
        assert conn.request(request, 9).responses[0].partition_responses[0].error_code == 0
    from oncelog.client.reader import read_topic
    host, port = conn.sock.getpeername()
    assert [r.value for r in read_topic(f"{host}:{port}", "idem")] == [b"A", b"B", b"A"]


def test_sequence_gap_stale_epoch_and_new_epoch(conn):
    pid, epoch = init_producer_id(conn)
    assert send(conn, pid, epoch, 0, count=2)[0] == ErrorCode.NONE
    assert send(conn, pid, epoch, 5)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(conn, pid, epoch + 1, 3)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(conn, pid, epoch + 1, 0)[0] == ErrorCode.NONE  # a bumped epoch starts at 0
    assert send(conn, pid, epoch, 2)[0] == ErrorCode.INVALID_PRODUCER_EPOCH  # fenced now
    assert send(conn, pid, epoch + 1, 1)[0] == ErrorCode.NONE


def test_unknown_producer_rules_kip_360(conn):
    # A partition that never held a record accepts only sequence 0 from a new producer.
    assert send(conn, 9001, 0, 7, partition=0)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(conn, 9001, 0, 0, partition=0)[0] == ErrorCode.NONE
    # Once the partition holds records, an unknown producer may resume at any sequence
    # (its state may have expired).
    assert send(conn, 9002, 3, 1234, partition=0)[0] == ErrorCode.NONE
    assert send(conn, 9002, 3, 1235, partition=0)[0] == ErrorCode.NONE


def test_sequence_wraps_after_int_max(conn):
    send(conn, 1, 0, 0)  # the partition is no longer empty
    assert send(conn, 77, 0, MAX_SEQUENCE - 1, count=2)[0] == ErrorCode.NONE
    assert send(conn, 77, 0, 0, count=2)[0] == ErrorCode.NONE  # ... 2^31-1, then 0
    assert send(conn, 77, 0, 2)[0] == ErrorCode.NONE
    assert send(conn, 77, 0, MAX_SEQUENCE)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_one_producer_id_used_by_two_clients_leaves_others_intact(broker, conn):
    pid, epoch = init_producer_id(conn)
    other, other_epoch = init_producer_id(conn)
    assert send(conn, pid, epoch, 0, count=4)[0] == ErrorCode.NONE
    assert send(conn, other, other_epoch, 0)[0] == ErrorCode.NONE
    with RawConnection(broker.bootstrap) as impostor:
        # The second client's first batch does not follow the first client's sequence.
        assert send(impostor, pid, epoch, 0, count=2)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send(impostor, pid, epoch, 9)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(conn, pid, epoch, 4)[0] == ErrorCode.NONE  # the owner carries on
    assert send(conn, other, other_epoch, 1)[0] == ErrorCode.NONE


def test_forged_and_malformed_batches(conn):
    assert send(conn, 5, -1, 0)[0] == ErrorCode.INVALID_RECORD  # producer id without epoch
    assert send(conn, 5, 0, -1)[0] == ErrorCode.INVALID_RECORD  # ... or without sequence
    # transactional without a producer id (the produce handler refuses a transactional batch
    # without a transactional id before the partition sees it, once it checks transactions)
    assert send(conn, -1, -1, -1, attributes=0x10)[0] in (ErrorCode.INVALID_RECORD,
                                                          ErrorCode.INVALID_TXN_STATE)
    assert send(conn, 5, 0, 0, attributes=0x20)[0] == ErrorCode.INVALID_RECORD  # control
    assert send(conn, 5, 0, 0)[0] == ErrorCode.NONE  # none of the above changed its state


@pytest.mark.parametrize("hard", [False, True], ids=["clean-restart", "kill-9"])
def test_state_survives_restart(broker, conn, hard):
    pid, epoch = init_producer_id(conn)
    for seq in range(0, 30, 3):
        send(conn, pid, epoch, seq, count=3)
    conn.close()
    broker.restart(hard=hard)
    with RawConnection(broker.bootstrap) as again:
        assert send(again, pid, epoch, 27, count=3) == (ErrorCode.NONE, 27)  # a retry
        assert send(again, pid, epoch, 31)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert send(again, pid, epoch, 30) == (ErrorCode.NONE, 30)


def test_producers_expire_and_cli_describes_them(broker_factory):
    broker = broker_factory(settings={"producer.id.expiration.ms": "1500",
                                      "log.retention.check.interval.ms": "200"})
    with RawConnection(broker.bootstrap) as conn:
        conn.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name="idem")], allow_auto_topic_creation=True), 9)
        pid, epoch = init_producer_id(conn)
        send(conn, pid, epoch, 0, count=5)
        described = subprocess.run(
            [sys.executable, "-m", "oncelog", "producers", "describe", "idem",
             "--bootstrap", broker.bootstrap], capture_output=True, text=True, timeout=60)
        assert described.returncode == 0, described.stderr
        assert f"0\t{pid}\t{epoch}\t4\t" in described.stdout
        time.sleep(2.5)
        assert "idle producer ids expired" in broker.log_path.read_text()
        # Expired: an unknown producer on a non-empty partition may resume anywhere.
        assert send(conn, pid, epoch, 100)[0] == ErrorCode.NONE
