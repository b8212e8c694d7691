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

from dataclasses import dataclass, field

from ...protocol.errors import ErrorCode, KafkaError
from ..record_codec import INT16 as _INT16
from ..record_codec import INT32 as _INT32
from ..record_codec import INT64 as _INT64
from ..record_codec import RecordReader, write_bytes, write_string
from ..record_codec import partition_for as partition_for  # part of this module's contract

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3



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


# -- writing -------------------------------------------------------------------------------

def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    return (_INT16.pack(OFFSET_COMMIT_KEY_VERSION) + write_string(group_id) + write_string(topic)
            + _INT32.pack(partition))


def offset_commit_value(offset: OffsetAndMetadata) -> bytes:
    return (_INT16.pack(OFFSET_COMMIT_VALUE_VERSION) + _INT64.pack(offset.offset)
            + _INT32.pack(offset.leader_epoch) + write_string(offset.metadata)
            + _INT64.pack(offset.commit_timestamp_ms))


def group_metadata_key(group_id: str) -> bytes:
    return _INT16.pack(GROUP_METADATA_KEY_VERSION) + write_string(group_id)


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    out = [_INT16.pack(GROUP_METADATA_VALUE_VERSION), write_string(value.protocol_type),
           _INT32.pack(value.generation_id), write_string(value.protocol_name),
           write_string(value.leader_id), _INT64.pack(value.current_state_timestamp_ms),
           _INT32.pack(len(value.members))]
    for member in value.members:
        out += [write_string(member.member_id), write_string(member.group_instance_id),
                write_string(member.client_id), write_string(member.client_host),
                _INT32.pack(member.rebalance_timeout_ms), _INT32.pack(member.session_timeout_ms),
                write_bytes(member.subscription), write_bytes(member.assignment)]
    return b"".join(out)


# -- reading -------------------------------------------------------------------------------

def decode_key(key: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key's meaning, or None for record types this coordinator does not keep."""
    reader = RecordReader(key)
    version = reader.int16()
    if version in (0, 1):
        return OffsetCommitKey(reader.string(), reader.string(), reader.int32())
    if version == 2:
        return GroupMetadataKey(reader.string())
    return None


def decode_offset_commit_value(value: bytes) -> OffsetAndMetadata:
    reader = RecordReader(value)
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
    reader = RecordReader(value)
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
        reader = RecordReader(subscription)
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
        reader = RecordReader(assignment)
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
