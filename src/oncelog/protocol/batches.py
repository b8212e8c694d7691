"""The RecordBatch v2 header: the only part of a record batch the broker reads or writes.

A batch on the wire and on disk is::

    base_offset int64 | batch_length int32 | partition_leader_epoch int32 | magic int8 (=2)
    crc uint32 (CRC-32C of everything from attributes to the end)
    attributes int16 | last_offset_delta int32 | base_timestamp int64 | max_timestamp int64
    producer_id int64 | producer_epoch int16 | base_sequence int32 | records_count int32
    records ...

``batch_length`` counts the bytes after itself, so a batch occupies ``batch_length + 12`` bytes.
Bodies stay opaque ``bytes``: the broker validates the header and the CRC (and that an
uncompressed body can hold the records its header counts), patches
``base_offset`` and ``partition_leader_epoch`` (neither is covered by the CRC) and never
decompresses on the append path. Per-record work happens only in ``protocol.records``, for
the rare requests that need it (timestamp lookups).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c as _crc32c

from .errors import ErrorCode, KafkaError

# What the read-only functions below take: a Produce request's records are a bytearray, a
# follower's a view of its response buffer.
ReadableBuffer = bytes | bytearray | memoryview

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: bytes not counted by batch_length
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
CRC_START = 21  # attributes: the first byte covered by the CRC
MAGIC = 2
# length, attributes, timestamp delta, offset delta, key length, value length, header count:
# seven varints of at least one byte each.
MIN_RECORD_SIZE = 7

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_MAX_TIMESTAMP = struct.Struct(">q")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


def crc32c(data: ReadableBuffer) -> int:
    return _crc32c.crc32c(data)


class BatchHeader(NamedTuple):
    """The decoded header; a NamedTuple because it is built once per batch on hot paths."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


_make_header = BatchHeader._make


def parse_header(buffer: ReadableBuffer, position: int = 0) -> BatchHeader:
    """Decode the 61-byte header at ``position``; the caller checks there are 61 bytes."""
    return _make_header(HEADER.unpack_from(buffer, position))


def peek_offset_and_size(buffer: ReadableBuffer, position: int) -> tuple[int, int]:
    """Return (base_offset, total batch size) from the first 12 bytes at ``position``."""
    base_offset, batch_length = _OFFSET_AND_LENGTH.unpack_from(buffer, position)
    return base_offset, batch_length + LOG_OVERHEAD


def validate_batch(buffer: ReadableBuffer, position: int, end: int) -> BatchHeader:
    """Check one client-sent batch that starts at ``position`` and must end by ``end``.

    Raises ``KafkaError`` with CORRUPT_MESSAGE (lengths or CRC wrong: the bytes were damaged)
    or INVALID_RECORD / UNSUPPORTED_FOR_MESSAGE_FORMAT (well-formed but not acceptable), as
    Kafka's LogValidator does.
    """
    if end - position < HEADER_SIZE:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"{end - position} bytes cannot hold a {HEADER_SIZE}-byte batch header")
    header = parse_header(buffer, position)
    if header.magic != MAGIC:
        raise KafkaError(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                         f"record batch magic {header.magic}; only magic 2 is supported")
    if header.batch_length < MIN_BATCH_LENGTH or position + header.size > end:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"batch length {header.batch_length} disagrees with the "
                         f"{end - position} bytes sent")
    view = memoryview(buffer)[position + CRC_START:position + header.size]
    actual = crc32c(view)
    if actual != header.crc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"batch CRC {header.crc:#010x} but content hashes to {actual:#010x}")
    if header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"batch claims {header.records_count} records with last offset delta "
                         f"{header.last_offset_delta}")
    if (header.compression == 0
            and header.records_count > (header.size - HEADER_SIZE) // MIN_RECORD_SIZE):
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"batch claims {header.records_count} records in "
                         f"{header.size - HEADER_SIZE} uncompressed bytes (a record takes at "
                         f"least {MIN_RECORD_SIZE})")
    if header.compression > 4:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                         f"compression type {header.compression} is unknown")
    return header


def iter_headers(buffer: ReadableBuffer, start: int = 0,
                 end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each whole batch between ``start`` and ``end``.

    Stops silently at a partial trailing batch (a fetch response may end with one).
    """
    end = len(buffer) if end is None else end
    position = start
    while end - position >= HEADER_SIZE:
        header = parse_header(buffer, position)
        if header.batch_length < MIN_BATCH_LENGTH or position + header.size > end:
            return
        yield position, header
        position += header.size


def set_base_offset(buffer: bytearray | memoryview, position: int, base_offset: int) -> None:
    _BASE_OFFSET.pack_into(buffer, position, base_offset)


def set_partition_leader_epoch(buffer: bytearray | memoryview, position: int,
                               leader_epoch: int) -> None:
    _LEADER_EPOCH.pack_into(buffer, position + 12, leader_epoch)


def set_log_append_time(buffer: bytearray, position: int, size: int, timestamp_ms: int) -> None:
    """Stamp LogAppendTime: set the timestamp-type flag and max_timestamp, then re-sign.

    The only header rewrite that touches CRC-covered bytes (Kafka does the same).
    """
    attributes = struct.unpack_from(">h", buffer, position + 21)[0] | TIMESTAMP_TYPE_FLAG
    struct.pack_into(">h", buffer, position + 21, attributes)
    _MAX_TIMESTAMP.pack_into(buffer, position + 35, timestamp_ms)
    _CRC.pack_into(buffer, position + 17,
                   crc32c(memoryview(buffer)[position + CRC_START:position + size]))


def build_batch(*, base_offset: int = 0, attributes: int = 0, base_timestamp: int = 0,
                max_timestamp: int | None = None, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = -1, base_sequence: int = NO_SEQUENCE,
                body: bytes, records_count: int, partition_leader_epoch: int = -1) -> bytes:
    """Assemble a batch around an already-encoded (and maybe compressed) records body."""
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    count = records_count
    header = bytearray(HEADER.pack(
        base_offset, batch_length, partition_leader_epoch, MAGIC, 0, attributes, count - 1,
        base_timestamp, base_timestamp if max_timestamp is None else max_timestamp,
        producer_id, producer_epoch, base_sequence, count))
    crc = crc32c(bytes(header[CRC_START:]) + body)
    _CRC.pack_into(header, 17, crc)
    return bytes(header) + body
