"""Base-128 varints as Kafka uses them: unsigned in flexible-version headers and tagged
fields, zigzag-signed inside records. The caller says which error code a bad one means."""

from __future__ import annotations

from .errors import ErrorCode, KafkaError


def read_uvarint(data: bytes | memoryview, position: int, max_bits: int,
                 error_code: ErrorCode, what: str) -> tuple[int, int]:
    """Decode an unsigned varint of at most ``max_bits`` bits; return (value, next position)."""
    shift = value = 0
    while True:
        if position >= len(data):
            raise KafkaError(error_code, f"{what}: varint runs past the end")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift >= max_bits:
            raise KafkaError(error_code, f"{what}: varint longer than {max_bits} bits")


def read_zigzag(data: bytes | memoryview, position: int, error_code: ErrorCode,
                what: str) -> tuple[int, int]:
    value, position = read_uvarint(data, position, 64, error_code, what)
    return (value >> 1) ^ -(value & 1), position


def write_zigzag(value: int) -> bytes:
    return write_uvarint((value << 1) ^ (value >> 63))


def write_uvarint(value: int) -> bytes:
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
