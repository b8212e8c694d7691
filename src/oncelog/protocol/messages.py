"""Request and response codecs: kafka-python's JSON-schema classes, pinned and wrapped.

The rest of the broker imports message classes and the three functions below from here only,
so the codec library can be replaced without touching handlers. Fields are snake_case as in
the schemas. Request headers are parsed here by hand (they are tiny) so that a frame whose
body we cannot decode can still be answered or rejected with its correlation id.

Encoding omits tagged fields that hold their default value (kafka-python does, like Kafka);
librdkafka before 2.1.2 misparses responses that carry them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka.protocol.admin import (CreatePartitionsRequest, CreatePartitionsResponse,
                                  CreateTopicsRequest, CreateTopicsResponse,
                                  DeleteGroupsRequest, DeleteGroupsResponse,
                                  DeleteTopicsRequest, DeleteTopicsResponse,
                                  DescribeClusterRequest, DescribeClusterResponse,
                                  DescribeConfigsRequest, DescribeConfigsResponse,
                                  DescribeGroupsRequest, DescribeGroupsResponse,
                                  DescribeProducersRequest, DescribeProducersResponse,
                                  ListGroupsRequest, ListGroupsResponse)
from kafka.protocol.consumer import (FetchRequest, FetchResponse, HeartbeatRequest,
                                     HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
                                     LeaveGroupRequest, LeaveGroupResponse, ListOffsetsRequest,
                                     ListOffsetsResponse, OffsetCommitRequest,
                                     OffsetCommitResponse, OffsetDeleteRequest,
                                     OffsetDeleteResponse, OffsetFetchRequest,
                                     OffsetFetchResponse, OffsetForLeaderEpochRequest,
                                     OffsetForLeaderEpochResponse, SyncGroupRequest,
                                     SyncGroupResponse)
from kafka.protocol.metadata import (ApiVersionsRequest, ApiVersionsResponse,
                                     FindCoordinatorRequest, FindCoordinatorResponse,
                                     MetadataRequest, MetadataResponse)
from kafka.protocol.producer import (InitProducerIdRequest, InitProducerIdResponse,
                                     ProduceRequest, ProduceResponse)

from .api_keys import ApiKey
from .errors import ErrorCode, KafkaError
from .varints import read_uvarint

__all__ = [
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribeClusterRequest",
    "DescribeClusterResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResponse",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribeProducersRequest",
    "DescribeProducersResponse",
    "FetchRequest",
    "FetchResponse",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "MetadataRequest",
    "MetadataResponse",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetDeleteRequest",
    "OffsetDeleteResponse",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "OffsetForLeaderEpochRequest",
    "OffsetForLeaderEpochResponse",
    "ProduceRequest",
    "ProduceResponse",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "RequestHeader", "decode_request_header", "decode_request", "encode_response",
]

# Every codec pair the broker may serve. A pair listed here is decodable; what is served
# (and advertised) is decided by the handler table in ``broker.dispatch``.
_PAIRS = (
    (ProduceRequest, ProduceResponse),
    (FetchRequest, FetchResponse),
    (ListOffsetsRequest, ListOffsetsResponse),
    (MetadataRequest, MetadataResponse),
    (ApiVersionsRequest, ApiVersionsResponse),
    (CreateTopicsRequest, CreateTopicsResponse),
    (DeleteTopicsRequest, DeleteTopicsResponse),
    (CreatePartitionsRequest, CreatePartitionsResponse),
    (DescribeConfigsRequest, DescribeConfigsResponse),
    (DescribeClusterRequest, DescribeClusterResponse),
    (FindCoordinatorRequest, FindCoordinatorResponse),
    (JoinGroupRequest, JoinGroupResponse),
    (SyncGroupRequest, SyncGroupResponse),
    (HeartbeatRequest, HeartbeatResponse),
    (LeaveGroupRequest, LeaveGroupResponse),
    (OffsetCommitRequest, OffsetCommitResponse),
    (OffsetFetchRequest, OffsetFetchResponse),
    (ListGroupsRequest, ListGroupsResponse),
    (DescribeGroupsRequest, DescribeGroupsResponse),
    (DeleteGroupsRequest, DeleteGroupsResponse),
    (OffsetDeleteRequest, OffsetDeleteResponse),
    (InitProducerIdRequest, InitProducerIdResponse),
    (DescribeProducersRequest, DescribeProducersResponse),
    (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
)
REQUESTS = {request.API_KEY: request for request, _ in _PAIRS}
RESPONSES = {response.API_KEY: response for _, response in _PAIRS}

_HEADER_FIXED = struct.Struct(">hhih")
_CORRELATION = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int

    @property
    def known_api(self) -> bool:
        return self.api_key in REQUESTS


def _read_uvarint(frame: bytes | memoryview, position: int) -> tuple[int, int]:
    return read_uvarint(frame, position, 35, ErrorCode.INVALID_REQUEST, "request header")


def is_flexible(api_key: int, api_version: int) -> bool:
    cls = REQUESTS.get(api_key)
    return cls is not None and cls.flexible_version_q(api_version)


def decode_request_header(frame: bytes | memoryview) -> RequestHeader:
    """Parse a request header (v1, or v2 with tagged fields for flexible versions)."""
    if len(frame) < _HEADER_FIXED.size:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"{len(frame)}-byte frame is shorter than a header")
    api_key, api_version, correlation_id, client_id_length = _HEADER_FIXED.unpack_from(frame, 0)
    position = _HEADER_FIXED.size
    client_id = None
    if client_id_length >= 0:
        if position + client_id_length > len(frame):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "client id runs past the end of the frame")
        client_id = bytes(frame[position:position + client_id_length]).decode("utf-8", "replace")
        position += client_id_length
    if is_flexible(api_key, api_version):
        count, position = _read_uvarint(frame, position)
        for _ in range(count):
            _tag, position = _read_uvarint(frame, position)
            size, position = _read_uvarint(frame, position)
            position += size
        if position > len(frame):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "header tagged fields run past the frame")
    return RequestHeader(api_key, api_version, correlation_id, client_id, position)


def decode_request(header: RequestHeader, frame: bytes | memoryview):
    """Decode the body; raise KafkaError(INVALID_REQUEST) for anything that does not parse."""
    cls = REQUESTS[header.api_key]
    if not 0 <= header.api_version <= cls.max_version:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                         f"{cls.name} v{header.api_version} is beyond the schema's v{cls.max_version}")
    body = memoryview(frame)[header.body_offset:]
    try:
        # cls.decode, keeping the end position it drops: a string or bytes field cut short by
        # the end of the frame decodes as a shorter value, and only the position tells.
        flexible = cls.flexible_version_q(header.api_version)
        decode = cls._struct.compiled_decode_from(header.api_version, compact=flexible,
                                                  tagged=flexible, data_class=cls[None])
        request, end = decode(body, 0)
    except KafkaError:
        raise
    except Exception as error:  # the codec raises assorted errors on garbage
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"cannot decode {cls.name} v{header.api_version}: "
                         f"{type(error).__name__}: {error}") from None
    if end > len(body):
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"{cls.name} v{header.api_version} runs {end - len(body)} bytes past "
                         "the end of its frame")
    _check_nulls(request, _null_checks(cls, header.api_version), cls.name)
    return request


def _null_checks(message_class, version: int) -> tuple:
    """(field name, nullable, nested checks, is array) for each field present at ``version``.

    The codec decodes a null where the schema forbids one (a compact array of length 0, a
    string of length -1) instead of failing; Kafka rejects those at parse time, so do we.
    """
    key = (message_class.API_KEY, version)
    checks = _NULL_CHECKS.get(key)
    if checks is None:
        checks = _NULL_CHECKS[key] = _field_checks(message_class.fields, version)
    return checks


def _field_checks(fields: dict, version: int) -> tuple:
    checks = []
    for name, field in fields.items():
        if not field.for_version_q(version) or field.tagged_field_q(version):
            continue
        if field.type_str == "uuid":  # the codec decodes the all-zero UUID as None
            continue
        nested = field.fields if isinstance(getattr(field, "fields", None), dict) else None
        checks.append((name, field.nullable_for_version_q(version),
                       _field_checks(nested, version) if nested else (),
                       field.is_array()))
    return tuple(checks)


_NULL_CHECKS: dict[tuple[int, int], tuple] = {}


def _check_nulls(value, checks: tuple, path: str) -> None:
    for name, nullable, nested, is_array in checks:
        item = getattr(value, name, None)
        if item is None:
            if not nullable:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"{path}.{name} is null")
            continue
        if nested:
            for element in (item if is_array else (item,)):
                _check_nulls(element, nested, f"{path}.{name}")


def can_encode(api_key: int, api_version: int) -> bool:
    cls = RESPONSES.get(api_key)
    return cls is not None and 0 <= api_version <= cls.max_version


def encode_response(api_key: int, api_version: int, correlation_id: int,
                    response) -> tuple[bytes, bytes]:
    """Frame a response as (size + header, body), for one ``writelines`` without a copy."""
    cls = RESPONSES[api_key]
    body = response.encode(version=api_version)
    # ApiVersions responses always use header v0 so a client can parse them before it knows
    # which versions we speak (KIP-511).
    flexible_header = cls.flexible_version_q(api_version) and api_key != ApiKey.API_VERSIONS
    header = _CORRELATION.pack(correlation_id) + (b"\x00" if flexible_header else b"")
    return struct.pack(">i", len(header) + len(body)) + header, body
