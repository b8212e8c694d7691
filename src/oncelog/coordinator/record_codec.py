"""Kafka's primitive types as its coordinators' records use them (``__consumer_offsets`` and
``__transaction_state``): int16-length strings, int32-length bytes, and in "flexible"
versions compact lengths and tagged fields; plus which partition of such a topic holds a
key (``partition_for``, Kafka's rule, which clients and tools rely on)."""

from __future__ import annotations

import functools
import struct

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.varints import read_uvarint

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")


# -- partitioning --------------------------------------------------------------------------

def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, in 32-bit two's complement.
    Asked for on every transactional produce and group request, so ids of up to 255
    characters are remembered (8,192 at most: a client sending long ids grows nothing)."""
    return _short_string_hash(text) if len(text) <= 255 else _string_hash(text)


def _string_hash(text: str) -> int:
    units = text.encode("utf-16-be")
    value = 0
    for (unit,) in struct.iter_unpack(">H", units):
        value = (31 * value + unit) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


_short_string_hash = functools.lru_cache(maxsize=8192)(_string_hash)


def partition_for(key: str, partition_count: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode) % partitions`` (a group id or a transactional id;
    abs of MIN_VALUE is 0 there)."""
    value = java_string_hash(key)
    return (0 if value == -(1 << 31) else abs(value)) % partition_count

# -- writing and reading -------------------------------------------------------------------

def write_string(value: str | None) -> bytes:
    if value is None:
        return INT16.pack(-1)
    raw = value.encode()
    return INT16.pack(len(raw)) + raw


def write_bytes(value: bytes | None) -> bytes:
    if value is None:
        return INT32.pack(-1)
    return INT32.pack(len(value)) + bytes(value)



class RecordReader:
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

    def int8(self) -> int:
        value: int = INT8.unpack(self._take(1))[0]
        return value

    def int16(self) -> int:
        value: int = INT16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = INT32.unpack(self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = INT64.unpack(self._take(8))[0]
        return value

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
        for _ in self.tagged_fields():
            pass

    def tagged_fields(self) -> list[tuple[int, bytes]]:
        """(tag, raw value) of each tagged field here (none in a non-flexible version)."""
        if not self.flexible:
            return []
        return [(self._uvarint(), self._take(self._uvarint()))
                for _ in range(self._uvarint())]
