"""Produce responses encoded by oncelog (protocol.produce_response) are the codec's bytes."""

from __future__ import annotations

import pytest

from oncelog.broker.handlers import produce
from oncelog.protocol import produce_response as ours
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import ProduceResponse as Codec
from oncelog.protocol.messages import decode_response_views, encode_response

CT = Codec.TopicProduceResponse
CP = CT.PartitionProduceResponse


def _pair(version: int, shape: str):
    """The same response as (ours, the codec's)."""
    partitions = []
    if shape != "empty":
        partitions = [
            dict(index=0, error_code=0, base_offset=1234567890123, log_append_time_ms=-1,
                 log_start_offset=7, error_message=None, record_errors=[]),
            dict(index=3, error_code=87, base_offset=-1, log_append_time_ms=1700000000000,
                 log_start_offset=-1, error_message="bad batch: CRC mismatch é",
                 record_errors=[(0, None), (5, "record 5 too large")]
                 if shape == "errors" else []),
        ]
    leader = shape == "leader" and version >= 10

    def build(module_topic, module_partition, leader_cls, endpoint_cls, error_cls, top):
        topics = [module_topic(name=name, partition_responses=[
            module_partition(**{**p, "record_errors": [error_cls(batch_index=i,
                                                                 batch_index_error_message=m)
                                                       for i, m in p["record_errors"]]},
                             **({"current_leader": leader_cls(leader_id=2, leader_epoch=9)}
                                if leader and p["error_code"] else {}))
            for p in partitions]) for name in (["orders", "ünïcode-topic"] if partitions else [])]
        endpoints = [endpoint_cls(node_id=2, host="broker-2.local", port=9094, rack=rack)
                     for rack in (None, "rack-b")] if leader else []
        return top(responses=topics, throttle_time_ms=250, node_endpoints=endpoints)

    mine = build(ours.TopicProduceResponse, ours.PartitionProduceResponse,
                 ours.LeaderIdAndEpoch, ours.NodeEndpoint, ours.BatchIndexAndErrorMessage,
                 ours.ProduceResponse)
    codec = build(CT, CP, CP.LeaderIdAndEpoch, Codec.NodeEndpoint,
                  CP.BatchIndexAndErrorMessage, Codec)
    return mine, codec


@pytest.mark.parametrize("shape", ["empty", "plain", "errors", "leader"])
@pytest.mark.parametrize("version", produce.VERSIONS)
def test_encoding_is_the_codecs_byte_for_byte(version, shape):
    mine, codec = _pair(version, shape)
    assert mine.encode(version=version) == bytes(codec.encode(version=version))


@pytest.mark.parametrize("version", produce.VERSIONS)
def test_a_framed_response_decodes_back_to_what_was_answered(version):
    mine, _ = _pair(version, "errors")
    frame = b"".join(encode_response(ApiKey.PRODUCE, version, 42, mine))

    body = memoryview(frame)[8 + (1 if version >= 9 else 0):]  # size, correlation id, tags
    decoded = decode_response_views(ApiKey.PRODUCE, version, body)

    assert [t.name for t in decoded.responses] == ["orders", "ünïcode-topic"]
    first, second = decoded.responses[0].partition_responses
    assert (first.index, first.error_code, first.base_offset) == (0, 0, 1234567890123)
    assert (second.index, second.error_code) == (3, 87)
    if version >= 8:
        assert second.error_message == "bad batch: CRC mismatch é"
        assert [(e.batch_index, e.batch_index_error_message)
                for e in second.record_errors] == [(0, None), (5, "record 5 too large")]


def test_a_default_current_leader_is_not_written():
    """A leader of (-1, -1) is the field's default: no tagged field, as the codec does."""
    default = ours.ProduceResponse(responses=[ours.TopicProduceResponse("t", [
        ours.PartitionProduceResponse(0, 6, current_leader=ours.LeaderIdAndEpoch())])])
    none = ours.ProduceResponse(responses=[ours.TopicProduceResponse("t", [
        ours.PartitionProduceResponse(0, 6)])])
    assert default.encode(version=11) == none.encode(version=11)


@pytest.mark.parametrize("version", [0, 1, 2, 12, 13])
def test_versions_not_served_are_encoded_by_the_codec(version):
    """What an UNSUPPORTED_VERSION answer to Produce v0-2 or v12-13 is written with."""
    mine, codec = _pair(min(version, 11), "leader" if version > 11 else "errors")
    assert mine.encode(version=version) == bytes(codec.encode(version=version))
