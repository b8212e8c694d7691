"""Records inside a v2 batch: varint codec, decompression, and encoding for tools and tests.

The broker's hot paths never come here. Uses: ListOffsets by timestamp (Kafka answers at
record precision), the CLI's own reading of batches, and tests that build exact batches.
Decompression is delegated to cramjam (gzip, snappy raw and xerial-framed, lz4 frame, zstd).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import cramjam

from .batches import (COMPRESSION_MASK, HEADER_SIZE, BatchHeader, build_batch, parse_header)
from .errors import ErrorCode, KafkaError
from .varints import read_zigzag, write_zigzag

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    return read_zigzag(data, position, ErrorCode.CORRUPT_MESSAGE, "record")


_write_varint = write_zigzag


def _read_bytes(data: bytes, position: int) -> tuple[bytes | None, int]:
    length, position = _read_varint(data, position)
    if length < 0:
        return None, position
    if position + length > len(data):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record field runs past the end of the batch")
    return bytes(data[position:position + length]), position + length


def _write_bytes(value: bytes | None) -> bytes:
    if value is None:
        return _write_varint(-1)
    return _write_varint(len(value)) + value


# A batch may decompress to at most this much (oncelog's own bound). Producers build
# batches of about a megabyte before compression; without a bound, a small batch crafted
# to expand a thousandfold (a "decompression bomb") would make the broker allocate
# gigabytes when ListOffsets looks up a timestamp in it.
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
_FIRST_GUESS_RATIO = 16


def decompress(codec: int, data: bytes) -> bytes:
    """The batch body, decompressed into at most MAX_DECOMPRESSED_BYTES."""
    try:
        if codec == NONE:
            return data
        if codec == GZIP:
            return _bounded(cramjam.gzip.decompress_into, data)
        if codec == SNAPPY:
            if data.startswith(_XERIAL_MAGIC):
                return _decompress_xerial(data)
            return _snappy_raw(data)
        if codec == LZ4:
            return _bounded(cramjam.lz4.decompress_into, data)
        if codec == ZSTD:
            return _bounded(cramjam.zstd.decompress_into, data)
    except cramjam.DecompressionError as error:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"cannot decompress batch: {error}") from None
    raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"compression type {codec}")


def _bounded(decompress_into: Callable[[bytes, bytearray], int], data: bytes) -> bytes:
    """Decompress into a buffer that grows fourfold while too small, never past the bound:
    memory follows what the batch really holds, up to MAX_DECOMPRESSED_BYTES."""
    size = min(MAX_DECOMPRESSED_BYTES, max(64 * 1024, _FIRST_GUESS_RATIO * len(data)))
    while True:
        buffer = bytearray(size)
        try:
            written = decompress_into(data, buffer)
        except cramjam.DecompressionError as error:
            if "whole buffer" not in str(error):
                raise
            if size >= MAX_DECOMPRESSED_BYTES:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                                 f"batch decompresses to more than {MAX_DECOMPRESSED_BYTES} "
                                 "bytes") from None
            size = min(MAX_DECOMPRESSED_BYTES, size * 4)
            continue
        return bytes(memoryview(buffer)[:written])


def _snappy_raw(data: bytes) -> bytes:
    length = cramjam.snappy.decompress_raw_len(data)  # raw snappy states its length first
    if length > MAX_DECOMPRESSED_BYTES:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"batch decompresses to {length} bytes, more than "
                         f"{MAX_DECOMPRESSED_BYTES}")
    return bytes(cramjam.snappy.decompress_raw(data))


def _decompress_xerial(data: bytes) -> bytes:
    # Java's snappy-java stream format: 16-byte header, then (int32 length, raw block)*.
    out, position, total = [], 16, 0
    while position + 4 <= len(data):
        (length,) = struct.unpack_from(">i", data, position)
        position += 4
        block = data[position:position + length]
        total += cramjam.snappy.decompress_raw_len(block)
        if total > MAX_DECOMPRESSED_BYTES:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "batch decompresses to more than "
                                                        f"{MAX_DECOMPRESSED_BYTES} bytes")
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
        position += length
    return b"".join(out)


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def decode_records(batch: bytes, header: BatchHeader | None = None) -> list[Record]:
    """Decode every record of one whole batch (decompressing when needed)."""
    if header is None:
        if len(batch) < HEADER_SIZE:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                             f"{len(batch)} bytes cannot hold a {HEADER_SIZE}-byte batch header")
        header = parse_header(batch)
    body = decompress(header.attributes & COMPRESSION_MASK, bytes(batch[HEADER_SIZE:header.size]))
    records, position = [], 0
    for _ in range(header.records_count):
        length, position = _read_varint(body, position)
        end = position + length
        if length < 0 or end > len(body):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record length {length} is impossible")
        position += 1  # record attributes, unused
        timestamp_delta, position = _read_varint(body, position)
        offset_delta, position = _read_varint(body, position)
        key, position = _read_bytes(body, position)
        value, position = _read_bytes(body, position)
        count, position = _read_varint(body, position)
        headers = []
        for _ in range(count):
            name, position = _read_bytes(body, position)
            header_value, position = _read_bytes(body, position)
            headers.append(((name or b"").decode("utf-8", "replace"), header_value))
        if position != end:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record length disagrees with its fields")
        records.append(Record(header.base_offset + offset_delta,
                              header.base_timestamp + timestamp_delta, key, value, headers))
    return records


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None, headers: Sequence[tuple[str, bytes | None]] = ()) -> bytes:
    body = bytearray(b"\x00")
    body += _write_varint(timestamp_delta)
    body += _write_varint(offset_delta)
    body += _write_bytes(key)
    body += _write_bytes(value)
    body += _write_varint(len(headers))
    for name, header_value in headers:
        body += _write_bytes(name.encode())
        body += _write_bytes(header_value)
    return _write_varint(len(body)) + bytes(body)


def make_batch(values: list[bytes | None], *, keys: list[bytes | None] | None = None,
               timestamp_ms: int = 0, timestamps: list[int] | None = None, codec: int = NONE,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               attributes: int = 0) -> bytes:
    """Build a batch the way a client would (used by tools and tests)."""
    timestamps = timestamps or [timestamp_ms] * len(values)
    keys = keys or [None] * len(values)
    base_timestamp = min(timestamps)
    encoded = [encode_record(i, ts - base_timestamp, k, v)
               for i, (k, v, ts) in enumerate(zip(keys, values, timestamps))]
    return build_batch(attributes=attributes | codec, base_timestamp=base_timestamp,
                       max_timestamp=max(timestamps), producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=base_sequence,
                       body=compress(codec, b"".join(encoded)), records_count=len(values))
