"""Produce responses, built and encoded here instead of by the codec.

Every produce request is answered with one, so its cost is paid per request: with the
codec's classes, building and encoding a one-partition answer took ~18 us, about a tenth of
the broker's whole CPU for a small produce request (a Java producer at its default 16 KB
``batch.size`` sends thousands a second; a transaction adds one per commit). These plain
objects keep the codec's field names, so handlers and tests read them alike, and ``encode``
writes ProduceResponse v3-v11 as Kafka's schema says (``ProduceResponse.json``): the
fields each version has, flexible encoding from v9, and the v10 tagged fields (the current
leader of a partition answered NOT_LEADER_OR_FOLLOWER, the node endpoints, KIP-951)
written only when they differ from their defaults, as the codec does. Versions outside
3-11 (only ever an UNSUPPORTED_VERSION answer) are handed to the codec.
``tests/unit/protocol/test_produce_response.py`` holds the encoding byte for byte against
the codec's.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, TypeAlias

from .varints import write_uvarint

if TYPE_CHECKING:
    from .messages import ProduceResponse as Codec

VERSIONS = range(3, 12)
FLEXIBLE_FROM = 9

_PARTITION = struct.Struct(">ihq")  # index, error_code, base_offset
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_LEADER = struct.Struct(">ii")


class LeaderIdAndEpoch:
    __slots__ = ("leader_id", "leader_epoch")

    def __init__(self, leader_id: int = -1, leader_epoch: int = -1) -> None:
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch


class NodeEndpoint:
    __slots__ = ("node_id", "host", "port", "rack")

    def __init__(self, node_id: int, host: str, port: int, rack: str | None = None) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.rack = rack


class BatchIndexAndErrorMessage:
    __slots__ = ("batch_index", "batch_index_error_message")

    def __init__(self, batch_index: int, batch_index_error_message: str | None = None) -> None:
        self.batch_index = batch_index
        self.batch_index_error_message = batch_index_error_message


class PartitionProduceResponse:
    __slots__ = ("index", "error_code", "base_offset", "log_append_time_ms",
                 "log_start_offset", "record_errors", "error_message", "current_leader")

    # nested as in the codec's classes (PartitionProduceResponse.LeaderIdAndEpoch)
    LeaderIdAndEpoch: TypeAlias = LeaderIdAndEpoch
    BatchIndexAndErrorMessage: TypeAlias = BatchIndexAndErrorMessage

    def __init__(self, index: int, error_code: int, base_offset: int = -1,
                 log_append_time_ms: int = -1, log_start_offset: int = -1,
                 record_errors: list[BatchIndexAndErrorMessage] | None = None,
                 error_message: str | None = None,
                 current_leader: LeaderIdAndEpoch | None = None) -> None:
        self.index = index
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.record_errors = record_errors if record_errors is not None else []
        self.error_message = error_message
        self.current_leader = current_leader


class TopicProduceResponse:
    __slots__ = ("name", "partition_responses")

    PartitionProduceResponse: TypeAlias = PartitionProduceResponse

    def __init__(self, name: str, partition_responses: list[PartitionProduceResponse]) -> None:
        self.name = name
        self.partition_responses = partition_responses


class ProduceResponse:
    __slots__ = ("responses", "throttle_time_ms", "node_endpoints")

    TopicProduceResponse: TypeAlias = TopicProduceResponse
    NodeEndpoint: TypeAlias = NodeEndpoint

    def __init__(self, responses: list[TopicProduceResponse], throttle_time_ms: int = 0,
                 node_endpoints: list[NodeEndpoint] | None = None) -> None:
        self.responses = responses
        self.throttle_time_ms = throttle_time_ms
        self.node_endpoints = node_endpoints if node_endpoints is not None else []

    def encode(self, version: int) -> bytes:
        if version not in VERSIONS:
            return self._codec_encode(version)
        flexible = version >= FLEXIBLE_FROM
        out = bytearray(_count(len(self.responses), flexible))
        for topic in self.responses:
            out += _string(topic.name, flexible)
            out += _count(len(topic.partition_responses), flexible)
            for partition in topic.partition_responses:
                _partition(out, partition, version, flexible)
            if flexible:
                out.append(0)  # no tagged fields
        out += _INT32.pack(self.throttle_time_ms)
        if flexible:
            if version >= 10 and self.node_endpoints:
                endpoints = bytearray(_count(len(self.node_endpoints), True))
                for node in self.node_endpoints:
                    endpoints += _INT32.pack(node.node_id) + _string(node.host, True)
                    endpoints += _INT32.pack(node.port) + _string(node.rack, True)
                    endpoints.append(0)
                out += b"\x01\x00" + write_uvarint(len(endpoints)) + endpoints
            else:
                out.append(0)
        return bytes(out)


    def _codec_encode(self, version: int) -> bytes:
        """A version the broker does not serve, answered UNSUPPORTED_VERSION or
        INVALID_REQUEST at the version asked (``broker.dispatch``): the codec writes it."""
        from .messages import ProduceResponse as Codec
        return bytes(Codec(throttle_time_ms=self.throttle_time_ms, node_endpoints=[
            Codec.NodeEndpoint(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
            for n in self.node_endpoints], responses=[
            Codec.TopicProduceResponse(name=t.name, partition_responses=[
                _codec_partition(p) for p in t.partition_responses])
            for t in self.responses]).encode(version=version))


def _codec_partition(partition: PartitionProduceResponse
                     ) -> Codec.TopicProduceResponse.PartitionProduceResponse:
    from .messages import ProduceResponse as Codec
    codec_cls = Codec.TopicProduceResponse.PartitionProduceResponse
    p = partition
    codec = codec_cls(
        index=p.index, error_code=p.error_code, base_offset=p.base_offset,
        log_append_time_ms=p.log_append_time_ms, log_start_offset=p.log_start_offset,
        error_message=p.error_message, record_errors=[
            codec_cls.BatchIndexAndErrorMessage(
                batch_index=e.batch_index, batch_index_error_message=e.batch_index_error_message)
            for e in p.record_errors])
    if p.current_leader is not None:  # absent, not None: the codec writes its default then
        codec.current_leader = codec_cls.LeaderIdAndEpoch(
            leader_id=p.current_leader.leader_id, leader_epoch=p.current_leader.leader_epoch)
    return codec


def _partition(out: bytearray, partition: PartitionProduceResponse, version: int,
               flexible: bool) -> None:
    out += _PARTITION.pack(partition.index, partition.error_code, partition.base_offset)
    out += _INT64.pack(partition.log_append_time_ms)  # v2+
    if version >= 5:
        out += _INT64.pack(partition.log_start_offset)
    if version >= 8:
        out += _count(len(partition.record_errors), flexible)
        for error in partition.record_errors:
            out += _INT32.pack(error.batch_index)
            out += _string(error.batch_index_error_message, flexible)
            if flexible:
                out.append(0)
        out += _string(partition.error_message, flexible)
    if flexible:
        leader = partition.current_leader
        if version >= 10 and leader is not None and (leader.leader_id, leader.leader_epoch) \
                != (-1, -1):
            # one tagged field, tag 0, of 9 bytes: the struct and its own empty tag section
            out += b"\x01\x00\x09" + _LEADER.pack(leader.leader_id, leader.leader_epoch) + b"\x00"
        else:
            out.append(0)  # no tagged fields


def _count(count: int, flexible: bool) -> bytes:
    return write_uvarint(count + 1) if flexible else _INT32.pack(count)


def _string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    data = value.encode()
    return (write_uvarint(len(data) + 1) if flexible else _INT16.pack(len(data))) + data
