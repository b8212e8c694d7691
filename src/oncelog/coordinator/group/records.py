"""The records of ``__consumer_offsets``, in Kafka's own formats, so Kafka's tools (and
``kafka-console-consumer --formatter ...GroupMetadataMessageFormatter``) can read our topic.

Every key and value starts with an int16 version (Kafka's ``CoordinatorRecordType``):

- key v0/v1 ``OffsetCommitKey``: group (string), topic (string), partition (int32);
  value ``OffsetCommitValue`` v0-v4 — we write v3: offset (int64), leader epoch (int32),
  metadata (string), commit timestamp (int64).
- key v2 ``GroupMetadataKey``: group (string); value ``GroupMetadataValue`` v0-v4 — we write
  v3: protocol type, generation, protocol (nullable), leader (nullable), current-state
  timestamp, members (member id, group instance id, client id, client host, rebalance
  timeout, session timeout, subscription bytes, assignment bytes).
- a null value is a tombstone: the offset, or the whole group, is gone.

Keys of other types (KIP-848 consumer groups, share groups) are skipped when loading.
Strings are int16-length UTF-8 (-1 for null) and bytes int32-length; v4 values are
"flexible" (compact lengths and tagged fields), which we read but never write.

Also here, because it is part of the same contract with Kafka: which partition of
``__consumer_offsets`` holds a group (``partition_for``), and the topics a consumer-protocol
subscription names (``subscribed_topics``), which OffsetDelete needs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.varints import read_uvarint

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset (Kafka's ``OffsetAndMetadata``); metadata is never null ("")."""
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberRecord, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class OffsetCommitKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group_id: str


# -- partitioning --------------------------------------------------------------------------

def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, in 32-bit two's complement."""
    units = text.encode("utf-16-be")
    value = 0
    for (unit,) in struct.iter_unpack(">H", units):
        value = (31 * value + unit) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def partition_for(group_id: str, partition_count: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % partitions`` (abs of MIN_VALUE is 0 there)."""
    value = java_string_hash(group_id)
    return (0 if value == -(1 << 31) else abs(value)) % partition_count


# -- writing -------------------------------------------------------------------------------

def _string(value: str | None) -> bytes:
    if value is None:
        return _INT16.pack(-1)
    raw = value.encode()
    return _INT16.pack(len(raw)) + raw


def _bytes(value: bytes | None) -> bytes:
    if value is None:
        return _INT32.pack(-1)
    return _INT32.pack(len(value)) + bytes(value)


def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    return (_INT16.pack(OFFSET_COMMIT_KEY_VERSION) + _string(group_id) + _string(topic)
            + _INT32.pack(partition))


def offset_commit_value(offset: OffsetAndMetadata) -> bytes:
    return (_INT16.pack(OFFSET_COMMIT_VALUE_VERSION) + _INT64.pack(offset.offset)
            + _INT32.pack(offset.leader_epoch) + _string(offset.metadata)
            + _INT64.pack(offset.commit_timestamp_ms))


def group_metadata_key(group_id: str) -> bytes:
    return _INT16.pack(GROUP_METADATA_KEY_VERSION) + _string(group_id)


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    out = [_INT16.pack(GROUP_METADATA_VALUE_VERSION), _string(value.protocol_type),
           _INT32.pack(value.generation_id), _string(value.protocol_name),
           _string(value.leader_id), _INT64.pack(value.current_state_timestamp_ms),
           _INT32.pack(len(value.members))]
    for member in value.members:
        out += [_string(member.member_id), _string(member.group_instance_id),
                _string(member.client_id), _string(member.client_host),
                _INT32.pack(member.rebalance_timeout_ms), _INT32.pack(member.session_timeout_ms),
                _bytes(member.subscription), _bytes(member.assignment)]
    return b"".join(out)


# -- reading -------------------------------------------------------------------------------

class _Reader:
    """Reads Kafka's primitive types; ``flexible`` switches to compact lengths (v4 values)."""

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = bytes(data)
        self.position = 0
        self.flexible = flexible

    def _take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                             f"record field of {size} bytes runs past the end")
        chunk = self.data[self.position:end]
        self.position = end
        return chunk

    def int16(self) -> int:
        return _INT16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _INT32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _INT64.unpack(self._take(8))[0]

    def _uvarint(self) -> int:
        value, self.position = read_uvarint(self.data, self.position, 35,
                                            ErrorCode.CORRUPT_MESSAGE, "coordinator record")
        return value

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self._uvarint() - 1
        return self.int32() if wide else self.int16()

    def nullable_string(self) -> str | None:
        length = self._length(wide=False)
        return None if length < 0 else self._take(length).decode("utf-8", "replace")

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "null where a string is required")
        return value

    def bytes_(self) -> bytes:
        length = self._length(wide=True)
        return b"" if length < 0 else self._take(length)

    def array_length(self) -> int:
        return max(self._length(wide=True), 0)

    def skip_tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self._uvarint()):
                self._uvarint()
                self._take(self._uvarint())


def decode_key(key: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key's meaning, or None for record types this coordinator does not keep."""
    reader = _Reader(key)
    version = reader.int16()
    if version in (0, 1):
        return OffsetCommitKey(reader.string(), reader.string(), reader.int32())
    if version == 2:
        return GroupMetadataKey(reader.string())
    return None


def decode_offset_commit_value(value: bytes) -> OffsetAndMetadata:
    reader = _Reader(value)
    version = reader.int16()
    if not 0 <= version <= 4:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"OffsetCommitValue version {version}")
    reader.flexible = version >= 4
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string()
    commit_timestamp_ms = reader.int64()
    if version == 1:
        reader.int64()  # expire timestamp: offsets retention is not implemented
    reader.skip_tagged_fields()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp_ms)


def decode_group_metadata_value(value: bytes) -> GroupMetadataValue:
    reader = _Reader(value)
    version = reader.int16()
    if not 0 <= version <= 4:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"GroupMetadataValue version {version}")
    reader.flexible = version >= 4
    protocol_type = reader.string()
    generation_id = reader.int32()
    protocol_name = reader.nullable_string()
    leader_id = reader.nullable_string()
    timestamp_ms = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(reader.array_length()):
        member_id = reader.string()
        group_instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance_timeout_ms = reader.int32() if version >= 1 else -1
        session_timeout_ms = reader.int32()
        subscription = reader.bytes_()
        assignment = reader.bytes_()
        reader.skip_tagged_fields()
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # v0 had none; Kafka uses the session's
        members.append(MemberRecord(member_id, group_instance_id, client_id, client_host,
                                    rebalance_timeout_ms, session_timeout_ms, subscription,
                                    assignment))
    reader.skip_tagged_fields()
    return GroupMetadataValue(protocol_type, generation_id, protocol_name, leader_id,
                              timestamp_ms, tuple(members))


# -- the consumer protocol (what "consumer" groups put in their metadata) -----------------------

def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a ``ConsumerProtocolSubscription`` (any version: the topic list comes first
    after the version); None when the bytes are not one."""
    try:
        reader = _Reader(subscription)
        reader.int16()
        count = reader.int32()
        if count < 0 or count > len(subscription):
            return None
        return {reader.string() for _ in range(count)}
    except KafkaError:
        return None


def assigned_partitions(assignment: bytes) -> dict[str, list[int]] | None:
    """Partitions of a ``ConsumerProtocolAssignment``; None when the bytes are not one."""
    if not assignment:
        return {}
    try:
        reader = _Reader(assignment)
        reader.int16()
        topics: dict[str, list[int]] = {}
        count = reader.int32()
        if count < 0 or count > len(assignment):
            return None
        for _ in range(count):
            topic = reader.string()
            partitions = reader.int32()
            if partitions < 0 or partitions > len(assignment):
                return None
            topics[topic] = [reader.int32() for _ in range(partitions)]
        return topics
    except KafkaError:
        return None
