"""Untrusted bytes: each bad request gets its Kafka error code, or that one connection is
closed; the broker keeps serving everyone else and loses nothing it acknowledged."""

from __future__ import annotations

import struct
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from oncelog.protocol.errors import ErrorCode
from oncelog.protocol.messages import (FetchRequest, MetadataRequest,
                                       ProduceRequest)
from oncelog.protocol.records import make_batch

from tests.integration.raw import RawConnection

T = ProduceRequest.TopicProduceData
P = T.PartitionProduceData


def produce(conn: RawConnection, topic: str, records: bytes | None, version: int = 9,
            acks: int = 1, partition: int = 0):
    request = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000,
                             topic_data=[T(name=topic, partition_data=[P(index=partition,
                                                                         records=records)])])
    response = conn.request(request, version)
    return response.responses[0].partition_responses[0]


@pytest.fixture
def topic(broker):
    with RawConnection(broker.bootstrap) as conn:
        conn.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="bad")],
                                     allow_auto_topic_creation=True), 9)
    return "bad"


def assert_broker_healthy(broker, topic: str = "bad") -> None:
    with RawConnection(broker.bootstrap) as conn:
        result = produce(conn, topic, make_batch([b"still-alive"]))
        assert result.error_code == ErrorCode.NONE


def test_corrupt_crc_is_corrupt_message(broker, topic):
    batch = bytearray(make_batch([b"hello", b"world"]))
    batch[-1] ^= 0xFF
    with RawConnection(broker.bootstrap) as conn:
        result = produce(conn, topic, bytes(batch))
        assert result.error_code == ErrorCode.CORRUPT_MESSAGE
        assert "CRC" in result.error_message
        ok = produce(conn, topic, make_batch([b"fine"]))
        assert ok.error_code == ErrorCode.NONE and ok.base_offset == 0  # nothing was written


def test_batch_length_disagreeing_with_frame(broker, topic):
    batch = bytearray(make_batch([b"x" * 100]))
    struct.pack_into(">i", batch, 8, 10_000)  # claims more bytes than were sent
    with RawConnection(broker.bootstrap) as conn:
        assert produce(conn, topic, bytes(batch)).error_code == ErrorCode.CORRUPT_MESSAGE
        assert produce(conn, topic, bytes(batch[:30])).error_code == ErrorCode.CORRUPT_MESSAGE


def test_invalid_records(broker, topic):
    two = make_batch([b"a"]) + make_batch([b"b"])
    with RawConnection(broker.bootstrap) as conn:
        assert produce(conn, topic, two).error_code == ErrorCode.INVALID_RECORD
        assert produce(conn, topic, None).error_code == ErrorCode.INVALID_RECORD
        old_magic = bytearray(make_batch([b"a"]))
        old_magic[16] = 1
        assert produce(conn, topic, bytes(old_magic)).error_code in (
            ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.CORRUPT_MESSAGE)


def test_message_too_large(broker_factory):
    broker = broker_factory(settings={"message.max.bytes": "2000"})
    with RawConnection(broker.bootstrap) as conn:
        conn.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="bad")],
                                     allow_auto_topic_creation=True), 9)
        result = produce(conn, "bad", make_batch([b"x" * 5000]))
        assert result.error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_unknown_topic_partition_and_acks(broker, topic):
    with RawConnection(broker.bootstrap) as conn:
        batch = make_batch([b"a"])
        assert produce(conn, "nope", batch).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert produce(conn, topic, batch, partition=7).error_code == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert produce(conn, topic, batch, acks=5).error_code == ErrorCode.INVALID_REQUIRED_ACKS


def test_fetch_out_of_range_and_unknown(broker, topic):
    FT = FetchRequest.FetchTopic
    FP = FT.FetchPartition
    with RawConnection(broker.bootstrap) as conn:
        produce(conn, topic, make_batch([b"a", b"b"]))
        request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                               isolation_level=0, session_id=0, session_epoch=-1,
                               topics=[FT(topic=topic, partitions=[
                                   FP(partition=0, fetch_offset=3, partition_max_bytes=1 << 20),
                                   FP(partition=9, fetch_offset=0, partition_max_bytes=1 << 20)])],
                               forgotten_topics_data=[], rack_id="")
        response = conn.request(request, 11)
        beyond, missing = response.responses[0].partitions
        # as Kafka answers a consumer (tests/differential): the error, and -1 for the offsets
        assert beyond.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and beyond.high_watermark == -1
        assert beyond.log_start_offset == -1 and beyond.aborted_transactions is None
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_unsupported_version_of_api_versions_gets_v0_answer(broker):
    with RawConnection(broker.bootstrap) as conn:
        conn.send_frame(conn.header(18, 99) + b"\x00garbage")
        frame = conn.read_frame()  # a v0 body: error code first, after the correlation id
        error_code, = struct.unpack_from(">h", frame, 4)
        assert error_code == ErrorCode.UNSUPPORTED_VERSION


def test_unsupported_version_gets_error_code(broker, topic):
    """Produce v2 (magic 0/1 era) is decodable but not served: UNSUPPORTED_VERSION."""
    with RawConnection(broker.bootstrap) as conn:
        result = produce(conn, topic, make_batch([b"a"]), version=2)
        assert result.error_code == ErrorCode.UNSUPPORTED_VERSION


@pytest.mark.parametrize("payload", [
    struct.pack(">i", -5),                         # negative frame size
    struct.pack(">i", 200 * 1024 * 1024),          # larger than socket.request.max.bytes
    struct.pack(">i", 3) + b"abc",                 # shorter than any header
    struct.pack(">i", 10) + struct.pack(">hhih", 9999, 0, 1, 0),  # unknown API key
    struct.pack(">i", 10) + struct.pack(">hhih", 3, 9, 1, 50),    # client id past the end
    struct.pack(">i", 20) + struct.pack(">hhih", 0, 9, 1, 0) + b"\xff" * 10,  # garbage body
], ids=["negative-size", "oversized", "tiny", "unknown-api", "bad-client-id", "garbage-body"])
def test_unreadable_frames_close_only_that_connection(broker, topic, payload):
    with RawConnection(broker.bootstrap) as bystander, RawConnection(broker.bootstrap) as conn:
        assert produce(bystander, topic, make_batch([b"before"])).error_code == ErrorCode.NONE
        conn.send_raw(payload)
        assert conn.is_closed_by_peer()
        assert produce(bystander, topic, make_batch([b"after"])).error_code == ErrorCode.NONE
    assert "closing connection" in broker.log_path.read_text()


def test_truncated_frame_then_disconnect(broker, topic):
    with RawConnection(broker.bootstrap) as conn:
        conn.send_raw(struct.pack(">i", 1000) + b"\x00\x03" + b"x" * 100)
    assert_broker_healthy(broker)


def test_acks0_failure_closes_connection(broker, topic):
    with RawConnection(broker.bootstrap) as conn:
        batch = bytearray(make_batch([b"x"]))
        batch[-1] ^= 1
        request = ProduceRequest(transactional_id=None, acks=0, timeout_ms=1000,
                                 topic_data=[T(name=topic, partition_data=[P(index=0,
                                                                             records=bytes(batch))])])
        conn.send_frame(conn.header(0, 9) + bytes(request.encode(version=9)))
        assert conn.is_closed_by_peer()
    assert_broker_healthy(broker)


def test_absurd_partition_counts_are_refused_quickly(broker, topic):
    """Regression: the broker fuzz test once left the broker unresponsive; a mutated
    CreateTopics can ask for hundreds of thousands of partitions, and opening that many logs
    on the event loop stalled every connection. Counts above max.partitions.per.topic are
    now INVALID_PARTITIONS, answered at once."""
    from oncelog.protocol.messages import CreatePartitionsRequest, CreateTopicsRequest
    C = CreateTopicsRequest.CreatableTopic
    with RawConnection(broker.bootstrap) as conn:
        response = conn.request(CreateTopicsRequest(topics=[C(
            name="huge", num_partitions=500_000, replication_factor=1, assignments=[],
            configs=[])], timeout_ms=1000, validate_only=False), 7)
        assert response.topics[0].error_code == ErrorCode.INVALID_PARTITIONS
        assert "max.partitions.per.topic" in response.topics[0].error_message
        grow = conn.request(CreatePartitionsRequest(topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name=topic, count=500_000,
                                                          assignments=None)],
            timeout_ms=1000, validate_only=False), 3)
        assert grow.results[0].error_code == ErrorCode.INVALID_PARTITIONS
    assert_broker_healthy(broker)


@pytest.mark.parametrize("delay_s", [0.01, 0.04, 0.1])
def test_a_topic_whose_creator_left_half_way_is_created_whole(broker, topic, delay_s):
    """A client that closed its connection while its CreateTopics ran (a request timeout,
    a crash) had the request's task cancelled with it: between the store's write and the
    partitions' opening, that left a topic the store held and the broker did not serve -
    missing from Metadata, "already exists" to CreateTopics, unknown to producers. Now
    a request that changes state runs to its end, as Kafka's do, its response dropped. The
    closes come at a few delays, so one lands inside the creation on a fast or slow machine."""
    from oncelog.protocol.messages import CreateTopicsRequest
    C = CreateTopicsRequest.CreatableTopic
    name = f"left-{int(delay_s * 1000)}"
    with RawConnection(broker.bootstrap) as conn:
        conn.send_frame(conn.header(CreateTopicsRequest.API_KEY, 7) + bytes(CreateTopicsRequest(
            topics=[C(name=name, num_partitions=200, replication_factor=1, assignments=[],
                      configs=[])], timeout_ms=30000, validate_only=False).encode(version=7)))
        time.sleep(delay_s)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    deadline = time.monotonic() + 15
    while name not in admin.list_topics(timeout=5).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    listed = admin.list_topics(timeout=5).topics  # every topic: what this broker serves
    assert name in listed and len(listed[name].partitions) == 200
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(name, b"served", partition=199)
    assert producer.flush(15) == 0
    assert_broker_healthy(broker)
