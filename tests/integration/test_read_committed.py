"""The partition side of transactions through a real broker process: transactional batches
are accepted, ``read_committed`` fetches stop at the last stable offset (the first offset
of the earliest open transaction) while ``read_uncommitted`` reads past it, ListOffsets
``latest`` answers the LSO or the HW by isolation level, and an aborted transaction's
records reach a ``read_committed`` client with the aborted list that lets it drop them.

Transactional batches are sent as a client sends them, at the Kafka-protocol level:
FindCoordinator and InitProducerId with a transactional id, AddPartitionsToTxn, then Produce;
EndTxn makes the coordinator write the markers.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from oncelog.protocol import messages
from oncelog.protocol.batches import iter_headers
from oncelog.protocol.errors import ErrorCode
from oncelog.protocol.messages import (FetchRequest, FindCoordinatorRequest,
                                       InitProducerIdRequest, ListOffsetsRequest,
                                       MetadataRequest, ProduceRequest)
from oncelog.protocol.records import decode_records, make_batch
from tests.integration.raw import RawConnection

TOPIC = "txn"
TXN = 0x10
FT = FetchRequest.FetchTopic
LT = ListOffsetsRequest.ListOffsetsTopic
PT = ProduceRequest.TopicProduceData
RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
             ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS}


def until_done(request, timeout: float = 20.0):
    """Call ``request()`` until its error code is not a retriable coordinator one."""
    deadline = time.monotonic() + timeout
    while True:
        response = request()
        if ErrorCode(response.error_code) not in RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def init_producer_id(conn: RawConnection, transactional_id: str | None) -> tuple[int, int]:
    if transactional_id is not None:
        until_done(lambda: conn.request(FindCoordinatorRequest(key=transactional_id,
                                                               key_type=1), 3))
    response = until_done(lambda: conn.request(InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout_ms=60000, producer_id=-1,
        producer_epoch=-1), 4))
    assert response.error_code == 0
    return response.producer_id, response.producer_epoch


class RawProducer:
    """One producer id's batches with the right sequences, sent as a client would: with a
    transactional id, AddPartitionsToTxn before the first batch of a transaction."""

    def __init__(self, conn: RawConnection, transactional_id: str | None = None) -> None:
        self.conn = conn
        self.transactional_id = transactional_id
        self.producer_id, self.epoch = init_producer_id(conn, self.transactional_id)
        self.sequence = 0
        self.in_transaction = False

    def send(self, *values: bytes, transactional: bool = True) -> int:
        """Produce one batch; returns its base offset."""
        result = self.try_send(*values, transactional=transactional)
        assert result.error_code == ErrorCode.NONE, result.error_message
        return result.base_offset

    def try_send(self, *values: bytes, transactional: bool = True):
        if transactional and self.transactional_id and not self.in_transaction:
            self._add_partition()
        batch = make_batch(list(values), producer_id=self.producer_id, producer_epoch=self.epoch,
                           base_sequence=self.sequence, attributes=TXN if transactional else 0)
        request = ProduceRequest(transactional_id=self.transactional_id, acks=-1,
                                 timeout_ms=5000, topic_data=[PT(name=TOPIC, partition_data=[
                                     PT.PartitionProduceData(index=0, records=batch)])])
        result = self.conn.request(request, 9).responses[0].partition_responses[0]
        if result.error_code == ErrorCode.NONE:
            self.sequence += len(values)
        return result

    def _add_partition(self) -> None:
        A = messages.AddPartitionsToTxnRequest
        response = until_done(lambda: _first_result(self.conn.request(A(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]), 3)))
        assert response.error_code == ErrorCode.NONE
        self.in_transaction = True

    def end(self, commit: bool) -> None:
        """EndTxn at the coordinator, which writes the markers."""
        response = until_done(lambda: self.conn.request(messages.EndTxnRequest(
            transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.epoch, committed=commit), 3))
        assert response.error_code == ErrorCode.NONE
        self.in_transaction = False


class _Code:
    def __init__(self, error_code: int) -> None:
        self.error_code = error_code


def _first_result(response) -> _Code:
    return _Code(response.results_by_topic_v3_and_below[0].results_by_partition[0]
                 .partition_error_code)


def fetch(conn: RawConnection, isolation_level: int, offset: int = 0, version: int = 12,
          max_wait_ms: int = 0, min_bytes: int = 0):
    request = FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                           max_bytes=1 << 20, isolation_level=isolation_level, session_id=0,
                           session_epoch=-1, topics=[FT(topic=TOPIC, partitions=[
                               FT.FetchPartition(partition=0, fetch_offset=offset,
                                                 partition_max_bytes=1 << 20,
                                                 current_leader_epoch=-1, log_start_offset=-1)])],
                           forgotten_topics_data=[], rack_id="")
    return conn.request(request, version).responses[0].partitions[0]


def values(records) -> list[bytes]:
    data = bytes(records or b"")
    return [record.value for position, header in iter_headers(data) if not header.is_control
            for record in decode_records(data[position:position + header.size], header)]


def latest(conn: RawConnection, isolation_level: int, version: int = 8) -> int:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
        LT(name=TOPIC, partitions=[LT.ListOffsetsPartition(partition_index=0, timestamp=-1,
                                                           current_leader_epoch=-1)])])
    result = conn.request(request, version).topics[0].partitions[0]
    assert result.error_code == ErrorCode.NONE
    return result.offset


@pytest.fixture
def conn(broker):
    with RawConnection(broker.bootstrap) as connection:
        connection.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name=TOPIC)], allow_auto_topic_creation=True), 9)
        yield connection


def test_read_committed_stops_at_the_first_open_transaction(conn):
    plain, tx = RawProducer(conn), RawProducer(conn, "stops")
    plain.send(b"before", transactional=False)  # 0
    first = tx.send(b"t1", b"t2")  # 1-2, opens the transaction
    plain.send(b"after", transactional=False)  # 3
    tx.send(b"t3")  # 4, same transaction
    assert first == 1

    committed = fetch(conn, isolation_level=1)
    assert (committed.error_code, committed.high_watermark, committed.last_stable_offset) == (
        ErrorCode.NONE, 5, first)
    assert values(committed.records) == [b"before"]
    assert committed.aborted_transactions == []  # read_committed: a list, empty here
    uncommitted = fetch(conn, isolation_level=0)
    assert values(uncommitted.records) == [b"before", b"t1", b"t2", b"after", b"t3"]
    assert uncommitted.aborted_transactions is None and uncommitted.last_stable_offset == first
    # from the LSO on, read_committed has nothing yet; an older fetch version agrees
    assert values(fetch(conn, isolation_level=1, offset=first).records) == []
    assert values(fetch(conn, isolation_level=1, version=4).records) == [b"before"]
    # and a waiting read_committed fetch is not answered by data above the LSO
    started = time.monotonic()
    waited = fetch(conn, isolation_level=1, offset=first, max_wait_ms=300, min_bytes=1)
    assert values(waited.records) == [] and time.monotonic() - started >= 0.25


def test_list_offsets_latest_depends_on_the_isolation_level(conn):
    plain, tx = RawProducer(conn), RawProducer(conn, "latest")
    plain.send(b"a", b"b", transactional=False)
    first = tx.send(b"t")
    plain.send(b"c", transactional=False)
    assert latest(conn, isolation_level=0) == 4  # the HW
    assert latest(conn, isolation_level=1) == first == 2  # the LSO
    assert latest(conn, isolation_level=1, version=2) == first
    assert latest(conn, isolation_level=1, version=1) == 4  # v1 has no isolation level


@pytest.mark.parametrize("hard", [False, True], ids=["clean-restart", "kill-9"])
def test_an_open_transaction_holds_the_lso_across_restarts(broker, conn, hard):
    tx = RawProducer(conn, f"restart-{hard}")
    RawProducer(conn).send(b"x", transactional=False)
    first = tx.send(b"t")
    conn.close()
    broker.restart(hard=hard)
    with RawConnection(broker.bootstrap) as again:
        assert latest(again, isolation_level=1) == first
        assert fetch(again, isolation_level=1).last_stable_offset == first
        tx.conn = again
        tx.send(b"t-more")  # the producer's sequence and transaction carry on
        assert latest(again, isolation_level=1) == first


def test_a_plain_batch_from_a_producer_with_an_open_transaction_is_refused(conn):
    tx = RawProducer(conn, "plain")
    tx.send(b"t")
    assert tx.try_send(b"plain", transactional=False).error_code == ErrorCode.INVALID_TXN_STATE
    assert tx.send(b"t2") == 1  # nothing was written, the sequence carries on


def test_a_read_committed_client_drops_what_an_abort_marker_ended(broker, conn):
    kept, dropped = RawProducer(conn, "kept"), RawProducer(conn, "dropped")
    open_ = RawProducer(conn, "open")
    dropped.send(b"aborted-1")  # 0
    kept.send(b"committed-1")  # 1
    dropped.send(b"aborted-2")  # 2
    RawProducer(conn).send(b"plain", transactional=False)  # 3
    kept.send(b"committed-2")  # 4
    dropped.end(commit=False)  # 5
    kept.end(commit=True)  # 6
    conn.close()
    with RawConnection(broker.bootstrap) as again:
        deadline = time.monotonic() + 10  # the coordinator may write markers after EndTxn
        while latest(again, isolation_level=1) < 7 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert latest(again, isolation_level=1) == 7
        open_.conn = again
        open_first = open_.send(b"still-open")  # 7
        assert latest(again, isolation_level=1) == open_first
        committed = fetch(again, isolation_level=1)
        assert committed.last_stable_offset == open_first
        assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [
            (dropped.producer_id, 0)]
        assert values(committed.records) == [b"aborted-1", b"committed-1", b"aborted-2",
                                             b"plain", b"committed-2"]  # the client filters
        after_marker = fetch(again, isolation_level=1, offset=6)
        assert after_marker.aborted_transactions == []

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rc",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    seen, deadline = [], time.monotonic() + 15
    try:
        while time.monotonic() < deadline and len(seen) < 3:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
        end = time.monotonic() + 1.0  # nothing else may come: the rest is aborted or open
        while time.monotonic() < end:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(message.value())
    finally:
        consumer.close()
    assert seen == [b"committed-1", b"plain", b"committed-2"]
