"""Request and response codecs: kafka-python's JSON-schema classes, pinned and wrapped.

The rest of the broker imports message classes and the three functions below from here only,
so the codec library can be replaced without touching handlers. Fields are snake_case as in
the schemas. Request headers are parsed here by hand (they are tiny) so that a frame whose
body we cannot decode can still be answered or rejected with its correlation id.

Encoding omits tagged fields that hold their default value (kafka-python does, like Kafka);
librdkafka before 2.1.2 misparses responses that carry them.

Decoding is bounded (issue 14). Request bodies are decoded by functions generated with
kafka-python's own code generator, through ``_BoundedDecoderContext``, which adds to the
generated code, before anything is allocated:

- every array count, string and bytes length is checked against the bytes left in the
  frame (a count of 2,000,000,000 in a 30-byte frame is refused at once, not looped over);
- varints are at most 10 bytes (an endless run of continuation bytes would otherwise build
  an ever larger integer, quadratic in the frame's size);
- one request may hold at most ``MAX_ELEMENTS`` array entries in total (oncelog's own
  bound: a 100 MB frame of one-byte entries would otherwise become ~50 million Python
  objects, gigabytes; the largest real requests - Metadata or Fetch over 100,000
  partitions - stay well under it);
- tagged fields are read from a view of the frame, not from a copy of the rest of it
  (kafka-python copies the remainder for each struct that carries tags: quadratic).

So decoding one request takes time and memory in proportion to its frame, with a constant
factor that no input can raise.
"""

from __future__ import annotations

import keyword
import re
import struct
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from .api_keys import ApiKey
from .errors import ErrorCode, KafkaError
from .fetch_body import Part, encode_fetch_body
from .varints import read_uvarint

_Message = TypeVar("_Message")

# kafka-python 3.0.12 reads each of its ~110 JSON schemas with importlib.resources.read_text,
# which Python 3.11 deprecates: two DeprecationWarnings per schema, 218 in all, raised while
# its modules load. Python hides them, but pytest shows them, so every user's test run with
# oncelog's plugin ended in "218 warnings" that were neither theirs nor actionable. Exactly
# those two messages are silenced, for this import only: a user's own filters (and
# ``-W error``) still govern everything else, kafka-python's other warnings included.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", r"(read_text|open_text) is deprecated",
                            DeprecationWarning)
    from kafka.protocol.admin import (CreatePartitionsRequest, CreatePartitionsResponse,
                                      CreateTopicsRequest, CreateTopicsResponse,
                                      DeleteGroupsRequest, DeleteGroupsResponse,
                                      DeleteTopicsRequest, DeleteTopicsResponse,
                                      DescribeClusterRequest, DescribeClusterResponse,
                                      DescribeConfigsRequest, DescribeConfigsResponse,
                                      DescribeGroupsRequest, DescribeGroupsResponse,
                                      DescribeProducersRequest, DescribeProducersResponse,
                                      DescribeTransactionsRequest, DescribeTransactionsResponse,
                                      ListGroupsRequest, ListGroupsResponse,
                                      ListTransactionsRequest, ListTransactionsResponse)
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
    from kafka.protocol.producer import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
                                         AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
                                         EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
                                         InitProducerIdResponse, ProduceRequest, ProduceResponse,
                                         TxnOffsetCommitRequest, TxnOffsetCommitResponse,
                                         WriteTxnMarkersRequest, WriteTxnMarkersResponse)
    from kafka.protocol.admin.acl import (CreateAclsRequest, CreateAclsResponse,
                                          DeleteAclsRequest, DeleteAclsResponse,
                                          DescribeAclsRequest, DescribeAclsResponse)
    from kafka.protocol.admin.users import (AlterUserScramCredentialsRequest,
                                            AlterUserScramCredentialsResponse,
                                            DescribeUserScramCredentialsRequest,
                                            DescribeUserScramCredentialsResponse)
    from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse,
                                     SaslHandshakeRequest, SaslHandshakeResponse)
    from kafka.protocol.api_data import ApiData
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.schemas.fields.codegen import CodegenContext

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
    "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "DescribeTransactionsRequest",
    "DescribeTransactionsResponse",
    "EndTxnRequest",
    "EndTxnResponse",
    "ListTransactionsRequest",
    "ListTransactionsResponse",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitResponse",
    "WriteTxnMarkersRequest",
    "WriteTxnMarkersResponse",
    "CreateAclsRequest",
    "CreateAclsResponse",
    "DeleteAclsRequest",
    "DeleteAclsResponse",
    "DescribeAclsRequest",
    "DescribeAclsResponse",
    "AlterUserScramCredentialsRequest",
    "AlterUserScramCredentialsResponse",
    "DescribeUserScramCredentialsRequest",
    "DescribeUserScramCredentialsResponse",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "ApiMessage", "RequestHeader", "decode_request_header", "decode_request", "encode_response",
    "as_bytes", "build", "builder",
]

# Every codec pair the broker may serve. A pair listed here is decodable; what is served
# (and advertised) is decided by the handler table in ``broker.dispatch``.
_PAIRS = (
    (ProduceRequest, ProduceResponse),
    (SaslHandshakeRequest, SaslHandshakeResponse),
    (SaslAuthenticateRequest, SaslAuthenticateResponse),
    (DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse),
    (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse),
    (DescribeAclsRequest, DescribeAclsResponse),
    (CreateAclsRequest, CreateAclsResponse),
    (DeleteAclsRequest, DeleteAclsResponse),
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
    (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    (EndTxnRequest, EndTxnResponse),
    (WriteTxnMarkersRequest, WriteTxnMarkersResponse),
    (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    (DescribeTransactionsRequest, DescribeTransactionsResponse),
    (ListTransactionsRequest, ListTransactionsResponse),
)
REQUESTS: dict[int, type[ApiMessage]] = {request.API_KEY: request for request, _ in _PAIRS}
RESPONSES: dict[int, type[ApiMessage]] = {response.API_KEY: response for _, response in _PAIRS}

_BUILDERS: dict[type, Callable[..., Any]] = {}
_UNSET = object()


def build(cls: Any, **fields: Any) -> Any:
    """``cls(**fields)`` - a message or one of its structs, without a version - as
    kafka-python's constructor makes it (the same attributes: the fields given, ``tags``
    naming the tagged ones among them, no version) in a fraction of its time: the
    constructor walks every field of every version, and one Fetch round trip builds about
    ten of these. Anything else (an unknown name, a class bound to a version) goes to the
    constructor itself."""
    try:
        return builder(cls)(**fields)
    except TypeError:  # a name the class does not have: kafka-python's own error
        return cls(**fields)


def builder(cls: type[_Message]) -> Callable[..., _Message]:
    """``build`` for one class, as a function taking its fields as keywords (made once per
    class; hot paths keep it: an unknown name is a TypeError)."""
    made = _BUILDERS.get(cls)
    if made is None:
        made = _BUILDERS[cls] = _make_builder(cls)
    return cast("Callable[..., _Message]", made)


def _make_builder(cls: Any) -> Callable[..., Any]:
    names = [field.name for field in cls._struct._fields]
    tagged = {field.name for field in cls._struct._fields if field._tag is not None}
    is_message = issubclass(cls, ApiMessage)
    if (is_message and cls._class_version is not None) or not all(
            name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")
            for name in names):
        return lambda **fields: cls(**fields)
    lines = [f"def make(*, {', '.join(f'{name}=_UNSET' for name in names)}):",
             "    m = _new(cls)", "    m._version = m.unknown_tags = None"]
    if is_message:
        lines.append("    m._header = m._min_version = m._max_version = None")
    lines.append("    tags = set()" if tagged else "    tags = None")
    for name in names:
        lines.append(f"    if {name} is not _UNSET:")
        lines.append(f"        m.{name} = {name}")
        if name in tagged:
            lines.append(f"        tags.add({name!r})")
    lines += ["    m.tags = tags or None", "    return m"]
    namespace = {"_new": object.__new__, "cls": cls, "_UNSET": _UNSET}
    exec("\n".join(lines), namespace)  # noqa: S102 - names checked above, values never in it
    return cast(Callable[..., Any], namespace["make"])


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
    key = (api_key, api_version)
    flexible = _FLEXIBLE.get(key)
    if flexible is None:
        cls = REQUESTS.get(api_key)
        flexible = cls is not None and bool(cls.flexible_version_q(api_version))
        if len(_FLEXIBLE) < 4096:  # bounded: a client may send any (key, version) pair
            _FLEXIBLE[key] = flexible
    return flexible


_FLEXIBLE: dict[tuple[int, int], bool] = {}


def decode_request_header(frame: bytes | memoryview) -> RequestHeader:
    """Parse a request header (v1, or v2 with tagged fields for flexible versions)."""
    if len(frame) < _HEADER_FIXED.size:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"{len(frame)}-byte frame is shorter than a header")
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


MAX_ELEMENTS = 1_000_000  # array entries in one request, all arrays together


class _ViewReader:
    """The file-like reader kafka-python's tagged-field decoder wants, over a view of the
    frame: it replaces ``BytesIO(bytes(data[pos:]))``, a copy of the rest of the frame."""

    __slots__ = ("data", "start", "position")

    def __init__(self, data: memoryview, position: int) -> None:
        self.data, self.start, self.position = data, position, position

    def read(self, size: int = -1) -> bytes:
        end = len(self.data) if size < 0 else min(len(self.data), self.position + size)
        chunk = bytes(self.data[self.position:end])
        self.position = max(self.position, end)
        return chunk

    def tell(self) -> int:
        return self.position - self.start


def _refuse(what: str, value: int, left: int) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST,
                      f"{what} {value} with {left} bytes left in the frame")


class _BoundedDecoderContext(CodegenContext):
    """kafka-python's code generator with the checks of this module's docstring added.

    It recognises the lines the generator emits for a count, a length and a varint byte
    (kafka-python is pinned exactly; ``test_bounded_decoders`` fails if the shapes change).
    """

    _ARRAY = re.compile(r"if (_n\d+) == -1:$")
    _LENGTH = re.compile(r"if (_ln\d+) < 0:$")
    _VARINT_SHIFT = re.compile(r"(\s*)(_sh\d+) \+= 7$")
    _TAGGED_COPY = re.compile(r"(_bio\d+) = _BytesIO\(bytes\(data\[pos:\]\)\)$")
    _BYTES_COPY = re.compile(r"(\s*_val\d+) = bytes\((data\[pos:pos\+_ln\d+\])\)$")

    def __init__(self, bytes_as: str = "bytes") -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # kafka-python is unannotated
        self.globs.update(_ViewReader=_ViewReader, _refuse=_refuse)
        self.checks = 0
        # bytes fields as "bytes" (the codec's copy), "bytearray": the request owns a mutable
        # copy (Produce: the partition patches offsets and epoch into the batch and writes it
        # without copying it again), or "view": no copy, a view of the frame, valid while it is
        # (a follower's fetch response, appended before its buffer is reused)
        self.bytes_as = bytes_as

    def emit(self, indent: str, line: str) -> None:
        if match := self._ARRAY.match(line):
            count = match.group(1)
            self._emit(indent, f"if {count} > len(data) - pos or {count} < -1: "
                               f"raise _refuse('array of', {count}, len(data) - pos)")
            self._emit(indent, f"_budget[0] -= {count}")
            self._emit(indent, f"if _budget[0] < 0: raise _refuse('more than "
                               f"{MAX_ELEMENTS} array entries: another', {count}, "
                               f"len(data) - pos)")
            self.checks += 1
        elif match := self._LENGTH.match(line):
            length = match.group(1)
            self._emit(indent, f"if {length} > len(data) - pos: "
                               f"raise _refuse('length', {length}, len(data) - pos)")
            self.checks += 1
        elif match := self._VARINT_SHIFT.match(line):
            self._emit(indent, line)
            self._emit(indent, f"{match.group(1)}if {match.group(2)} > 63: "
                               f"raise _refuse('varint longer than', 10, len(data) - pos)")
            self.checks += 1
            return
        elif match := self._TAGGED_COPY.match(line):
            line = f"{match.group(1)} = _ViewReader(data, pos)"
            self.checks += 1
        elif self.bytes_as != "bytes" and (match := self._BYTES_COPY.match(line)):
            copy = "bytearray" if self.bytes_as == "bytearray" else ""
            line = f"{match.group(1)} = {copy}({match.group(2)})"
        self._emit(indent, line)

    def _emit(self, indent: str, line: str) -> None:
        super().emit(indent, line)  # type: ignore[no-untyped-call]  # kafka-python is unannotated


# f(body, position, budget) -> (message, end position); budget: [array entries left]
Decoder = Callable[[memoryview, int, list[int]], tuple[Any, int]]

_DECODERS: dict[tuple[str, int, str], Decoder] = {}


def bounded_decoder(cls: type[ApiMessage], version: int, bytes_as: str | None = None
                    ) -> Decoder:
    """``f(body, pos, budget) -> (message, end)`` for one message class and version; bytes
    fields as ``_BoundedDecoderContext`` says (default: a Produce request's as bytearrays,
    others as bytes)."""
    if bytes_as is None:
        bytes_as = "bytearray" if cls is ProduceRequest else "bytes"
    key = (cls.name, version, bytes_as)
    decoder = _DECODERS.get(key)
    if decoder is None:
        struct_field = cls._struct
        flexible = cls.flexible_version_q(version)
        ctx = _BoundedDecoderContext(bytes_as)
        ctx.lines.append("def _decode(data, pos, _budget):")
        saved = struct_field._data_class
        struct_field._data_class = cls[None]  # as compiled_decode_from(data_class=...) does
        try:
            struct_field.emit_decode_from(ctx, "obj", "    ", version=version,
                                          compact=flexible, tagged=flexible)
        finally:
            struct_field._data_class = saved
        ctx.emit("    ", "return obj, pos")
        source = ctx.source()  # type: ignore[no-untyped-call]  # kafka-python is unannotated
        exec(compile(source, f"<bounded_decode:{cls.name}_v{version}>", "exec"), ctx.globs)
        decoder = _DECODERS[key] = ctx.globs["_decode"]
    return decoder


def decode_response_views(api_key: int, version: int, body: memoryview) -> Any:
    """A response body, bounded like a request's, its bytes fields views of ``body`` (no
    copy: valid only while ``body`` is). ValueError for anything that does not parse.
    Typed Any: the response class is ``RESPONSES[api_key]``, known to the caller only."""
    cls = RESPONSES[api_key]
    try:
        response, end = bounded_decoder(cls, version, "view")(body, 0, [MAX_ELEMENTS])
    except Exception as error:  # the codec raises assorted errors on garbage
        raise ValueError(f"cannot decode {cls.name} v{version}: {type(error).__name__}: "
                         f"{error}") from None
    if end > len(body):
        raise ValueError(f"{cls.name} v{version} runs {end - len(body)} bytes past its frame")
    return response


def decode_request(header: RequestHeader, frame: bytes | memoryview) -> ApiMessage:
    """Decode the body; raise KafkaError(INVALID_REQUEST) for anything that does not parse."""
    cls = REQUESTS[header.api_key]
    if not 0 <= header.api_version <= cls.max_version:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"{cls.name} v{header.api_version} is "
                                                        f"beyond the schema's v{cls.max_version}")
    body = memoryview(frame)[header.body_offset:]
    try:
        # Keeps the end position cls.decode drops: a string or bytes field cut short by the
        # end of the frame would decode as a shorter value, and only the position tells.
        decode = bounded_decoder(cls, header.api_version)
        request: ApiMessage
        request, end = decode(body, 0, [MAX_ELEMENTS])
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


# (field name, nullable, the checks of its nested fields, is an array), per field
_NullCheck = tuple[str, bool, "tuple[_NullCheck, ...]", bool]


def as_bytes(value: bytes | bytearray | memoryview | ApiData) -> bytes:
    """A bytes field of a decoded message, as bytes. kafka-python's stubs type such fields
    ``bytes | ApiData`` (a message to encode may embed one); a decoded one never holds an
    ``ApiData``, only what ``bounded_decoder`` made of the frame."""
    if isinstance(value, ApiData):
        raise TypeError(f"a decoded bytes field holds {type(value).__name__}")
    return bytes(value)


def _null_checks(message_class: type[ApiMessage], version: int) -> tuple[_NullCheck, ...]:
    """(field name, nullable, nested checks, is array) for each field present at ``version``.

    The codec decodes a null where the schema forbids one (a compact array of length 0, a
    string of length -1) instead of failing; Kafka rejects those at parse time, so do we.
    """
    key = (message_class.API_KEY, version)
    checks = _NULL_CHECKS.get(key)
    if checks is None:
        checks = _NULL_CHECKS[key] = _field_checks(message_class.fields, version)
    return checks


def _field_checks(fields: dict[str, Any], version: int) -> tuple[_NullCheck, ...]:
    checks: list[_NullCheck] = []
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


_NULL_CHECKS: dict[tuple[int, int], tuple[_NullCheck, ...]] = {}


def _check_nulls(value: object, checks: tuple[_NullCheck, ...], path: str) -> None:
    for name, nullable, nested, is_array in checks:
        item = getattr(value, name, None)
        if item is None:
            if not nullable:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"{path}.{name} is null")
            continue
        if nested:
            for element in (item if is_array else (item,)):
                _check_nulls(element, nested, f"{path}.{name}")
        elif is_array and None in item:
            # The elements of []string and []bytes arrays are never nullable in Kafka's
            # schemas (the fuzzer found a null in FindCoordinator v4's coordinator keys and
            # ListGroups v4's states filter reaching their handlers).
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{path}.{name} holds a null")


def can_encode(api_key: int, api_version: int) -> bool:
    cls = RESPONSES.get(api_key)
    return cls is not None and 0 <= api_version <= cls.max_version


class Response(Protocol):
    """What a handler answers: a codec message, or an encoder of oncelog's own (the Produce
    response, ApiVersions' answer encoded once)."""

    def encode(self, version: int) -> bytes | bytearray: ...


def encode_response(api_key: int, api_version: int, correlation_id: int, response: Response
                    ) -> tuple[Part, ...]:
    """Frame a response as parts to write in order: one (size, header and body) for most; a
    Fetch response with large record sets comes as more parts, its records not copied
    (``fetch_body``), the first part starting with the size and header."""
    cls = RESPONSES[api_key]
    flexible = cls.flexible_version_q(api_version)
    parts: list[Part]
    if api_key == ApiKey.FETCH and isinstance(response, FetchResponse):
        parts = encode_fetch_body(response, api_version, flexible)
    else:
        parts = [response.encode(version=api_version)]
    # ApiVersions responses always use header v0 so a client can parse them before it knows
    # which versions we speak (KIP-511).
    flexible_header = flexible and api_key != ApiKey.API_VERSIONS
    header = _CORRELATION.pack(correlation_id) + (b"\x00" if flexible_header else b"")
    prefix = struct.pack(">i", len(header) + sum(map(len, parts))) + header
    body = parts[0]
    assert isinstance(body, (bytes, bytearray, memoryview)), "a body starts with its bytes"
    # One part, one write: each write to a loopback socket wakes the client once.
    return (prefix + body, *parts[1:])
