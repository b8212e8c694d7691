"""The wire proxy's own rules, seen on a raw Kafka connection through it: a made-up response
waits behind the responses of requests sent before it (Kafka clients match responses to
requests by order), acks=0 gets no answer, and a topic filter spares other topics."""

from __future__ import annotations

import struct
import time

import pytest

from oncelog.protocol import messages
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.errors import ErrorCode
from oncelog.protocol.messages import FetchRequest, ProduceRequest
from oncelog.protocol.records import make_batch
from oncelog.testing import UnknownName, WireFaults
from tests.integration.raw import RawConnection

FT, FP = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition
T, P = ProduceRequest.TopicProduceData, ProduceRequest.TopicProduceData.PartitionProduceData


def fetch(topic: str, wait_ms: int) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1,
                        topics=[FT(topic=topic, partitions=[
                            FP(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                               current_leader_epoch=-1, log_start_offset=-1)])],
                        forgotten_topics_data=[], rack_id="")


def produce(topic: str, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[P(index=0, records=make_batch([b"v"]))])])


def send(conn: RawConnection, request, version: int, correlation_id: int) -> None:
    conn.send_frame(conn.header(request.API_KEY, version, correlation_id)
                    + bytes(request.encode(version=version)))


def decode(frame: bytes, api_key: int, version: int):
    flexible = messages.is_flexible(api_key, version)
    return messages.RESPONSES[api_key].decode(frame[5:] if flexible else frame[4:],
                                              version=version)


def test_a_made_up_response_waits_for_earlier_responses(oncelog_broker, oncelog_topic):
    topic = oncelog_topic()
    fault = oncelog_broker.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER")
    with RawConnection(oncelog_broker.bootstrap) as conn:
        started = time.monotonic()
        send(conn, fetch(topic, wait_ms=500), 11, correlation_id=1)   # waits 500 ms upstream
        send(conn, produce(topic), 9, correlation_id=2)               # answered by the proxy
        first, second = conn.read_frame(), conn.read_frame()
    assert struct.unpack_from(">i", first)[0] == 1
    assert time.monotonic() - started >= 0.45
    assert struct.unpack_from(">i", second)[0] == 2
    result = decode(second, ApiKey.PRODUCE, 9).responses[0].partition_responses[0]
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and fault.applied == 1
    assert oncelog_broker.read_all(topic) == []  # never forwarded


def test_acks_0_gets_no_made_up_response(oncelog_broker, oncelog_topic):
    topic = oncelog_topic()
    oncelog_broker.fail_next("Produce", "INVALID_RECORD", count=None)
    with RawConnection(oncelog_broker.bootstrap) as conn:
        send(conn, produce(topic, acks=0), 9, correlation_id=1)
        send(conn, fetch(topic, wait_ms=0), 11, correlation_id=2)
        assert struct.unpack_from(">i", conn.read_frame())[0] == 2


def test_the_topic_filter_spares_other_topics(oncelog_broker, oncelog_topic):
    hit, spared = oncelog_topic("hit"), oncelog_topic("spared")
    fault = oncelog_broker.fail_next("Produce", "INVALID_RECORD", topic=hit, partition=0)
    with RawConnection(oncelog_broker.bootstrap) as conn:
        send(conn, produce(spared), 9, correlation_id=1)
        assert decode(conn.read_frame(), ApiKey.PRODUCE, 9).responses[0] \
            .partition_responses[0].error_code == 0
        send(conn, produce(hit), 9, correlation_id=2)
        assert decode(conn.read_frame(), ApiKey.PRODUCE, 9).responses[0] \
            .partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    assert fault.applied == 1 and fault.exhausted


def test_bad_arguments_are_one_clear_error():
    faults = WireFaults()
    with pytest.raises(UnknownName, match="cannot make up a ElectLeaders response; "
                                          "fail_next knows: Produce, Fetch, "):
        faults.fail_next("ElectLeaders", "UNKNOWN_SERVER_ERROR")
    with pytest.raises(ValueError, match="count must be at least 1"):
        faults.drop_response("Produce", count=0)
    assert faults.fail_next("init_producer_id", "coordinator_not_available").api_key \
        == ApiKey.INIT_PRODUCER_ID  # Kafka's names, case and underscores forgiven
