"""The records of ``__transaction_state``, in Kafka's formats, so Kafka's tools read our topic
and we could read theirs.

- key: int16 version 0, then ``TransactionLogKey``: the transactional id (string).
- value: int16 version, then ``TransactionLogValue``: producer id (int64), producer epoch
  (int16), transaction timeout ms (int32), state id (int8), the partitions (nullable array
  of topic (string) and partition ids ([]int32)), last update and start timestamps (int64).
  We write v0; v1 (flexible: compact lengths and tagged fields, carrying the previous and
  next producer ids of KIP-890 and the client's transaction version) is read as well.
- a null value (a tombstone) is a transactional id that expired.

A record is written before the coordinator acts on the state it holds, and replayed from the
log when the coordinator (re)starts or takes over the partition; the last record per id wins.
"""

from __future__ import annotations

from ...protocol.errors import ErrorCode, KafkaError
from ..record_codec import INT8, INT16, INT32, INT64, RecordReader, write_string
from .metadata import TransactionMetadata
from .state import TransactionState

KEY_VERSION = 0
VALUE_VERSION = 0
TRANSACTION_STATE_TOPIC = "__transaction_state"

# tagged fields of the v1 value
_PREVIOUS_PRODUCER_ID, _NEXT_PRODUCER_ID, _CLIENT_TRANSACTION_VERSION = 0, 1, 2


def encode_key(transactional_id: str) -> bytes:
    return INT16.pack(KEY_VERSION) + write_string(transactional_id)


def decode_key(key: bytes) -> str:
    reader = RecordReader(key)
    version = reader.int16()
    if version != KEY_VERSION:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"TransactionLogKey version {version}")
    return reader.string()


def encode_value(metadata: TransactionMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = [INT16.pack(VALUE_VERSION), INT64.pack(metadata.producer_id),
           INT16.pack(metadata.producer_epoch), INT32.pack(metadata.timeout_ms),
           INT8.pack(metadata.state.id), INT32.pack(len(by_topic))]
    for topic, partitions in by_topic.items():
        out += [write_string(topic), INT32.pack(len(partitions))]
        out += [INT32.pack(partition) for partition in partitions]
    out += [INT64.pack(metadata.last_update_ms), INT64.pack(metadata.start_ms)]
    return b"".join(out)


def decode_value(transactional_id: str, value: bytes) -> TransactionMetadata:
    reader = RecordReader(value)
    version = reader.int16()
    if version not in (0, 1):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"TransactionLogValue version {version}")
    reader.flexible = version >= 1
    producer_id = reader.int64()
    producer_epoch = reader.int16()
    timeout_ms = reader.int32()
    state = TransactionState.from_id(reader.int8())
    partitions: set[tuple[str, int]] = set()
    for _ in range(reader.array_length()):
        topic = reader.string()
        partitions.update((topic, reader.int32()) for _ in range(reader.array_length()))
        reader.skip_tagged_fields()
    last_update_ms = reader.int64()
    start_ms = reader.int64()
    previous_producer_id = next_producer_id = -1
    if reader.flexible:
        for tag, field in reader.tagged_fields():
            if tag == _PREVIOUS_PRODUCER_ID:
                previous_producer_id = INT64.unpack(field)[0]
            elif tag == _NEXT_PRODUCER_ID:
                next_producer_id = INT64.unpack(field)[0]
    return TransactionMetadata(
        transactional_id=transactional_id, producer_id=producer_id,
        producer_epoch=producer_epoch, timeout_ms=timeout_ms, state=state,
        partitions=frozenset(partitions), last_update_ms=last_update_ms, start_ms=start_ms,
        previous_producer_id=previous_producer_id, next_producer_id=next_producer_id)
