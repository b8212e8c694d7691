"""A segment's two sparse indexes, kept in memory as arrays and stored in Kafka's file formats.

- ``OffsetIndex`` (``.index``): entries ``relative_offset int32 | position int32``, big-endian.
  An entry ``(L, P)`` says the batch starting at file position ``P`` has last offset
  ``base_offset + L`` (Kafka's ``LogSegment.append`` indexes a batch by its last offset).
  Relative offsets and positions both strictly increase.
- ``TimeIndex`` (``.timeindex``): entries ``timestamp int64 | relative_offset int32``.
  An entry ``(T, L)`` promises that no record at an offset <= ``base_offset + L`` has a
  timestamp above ``T`` (Kafka's ``TimeIndex`` contract). Timestamps strictly increase, so a
  lookup is a bisection; a segment's last entry carries its largest timestamp once sealed.

Entries are added every ``log.index.interval.bytes`` by the segment, plus always one for its
first batch, so a non-empty segment's offset index is never empty (recovery relies on that).
Files are written whole, by ``to_bytes``; nothing here touches the disk.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
NO_TIMESTAMP = -1


@dataclass(frozen=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int


def _big_endian_bytes(column: array[int]) -> bytes:
    if sys.byteorder == "little":
        column = array(column.typecode, column)
        column.byteswap()
    return column.tobytes()


def _column_from_big_endian(typecode: str, data: bytes) -> array[int]:
    column = array(typecode)
    column.frombytes(data)
    if sys.byteorder == "little":
        column.byteswap()
    return column


def _interleave(columns: list[bytes], widths: list[int]) -> bytes:
    """Build fixed-size rows from column bytes, one byte lane at a time (no per-entry Python)."""
    stride = sum(widths)
    out = bytearray(len(columns[0]) // widths[0] * stride)
    start = 0
    for column, width in zip(columns, widths):
        for lane in range(width):
            out[start + lane::stride] = column[lane::width]
        start += width
    return bytes(out)


def _split(data: bytes, widths: list[int]) -> list[bytes]:
    stride = sum(widths)
    rows = len(data) // stride
    columns, start = [], 0
    for width in widths:
        column = bytearray(rows * width)
        for lane in range(width):
            column[lane::width] = data[start + lane::stride]
        columns.append(bytes(column))
        start += width
    return columns


class OffsetIndex:
    __slots__ = ("base_offset", "relative_offsets", "positions")

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.relative_offsets = array("i")
        self.positions = array("i")

    def __len__(self) -> int:
        return len(self.positions)

    def append(self, last_offset: int, position: int) -> None:
        self.relative_offsets.append(last_offset - self.base_offset)
        self.positions.append(position)

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch ending at or before ``offset``; 0 if none.

        The batch holding ``offset`` starts there or later (Kafka's ``OffsetIndex.lookup``).
        """
        slot = bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        return self.positions[slot] if slot >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        """Forget entries for batches at ``position`` or later (they were cut off)."""
        keep = bisect_left(self.positions, position)
        del self.relative_offsets[keep:]
        del self.positions[keep:]

    def to_bytes(self) -> bytes:
        return _interleave([_big_endian_bytes(self.relative_offsets),
                            _big_endian_bytes(self.positions)], [4, 4])

    @classmethod
    def from_bytes(cls, base_offset: int, data: bytes) -> OffsetIndex:
        index = cls(base_offset)
        relative_offsets, positions = _split(data, [4, 4])
        index.relative_offsets = _column_from_big_endian("i", relative_offsets)
        index.positions = _column_from_big_endian("i", positions)
        return index


class TimeIndex:
    __slots__ = ("base_offset", "timestamps", "relative_offsets")

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.relative_offsets = array("i")

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else NO_TIMESTAMP

    def maybe_append(self, timestamp: int, offset: int) -> None:
        # Only a new maximum is worth an entry: lookups bisect on strictly rising timestamps.
        if timestamp > self.last_timestamp:
            self.timestamps.append(timestamp)
            self.relative_offsets.append(offset - self.base_offset)

    def lookup(self, timestamp: int) -> int | None:
        """The largest offset known to hold only records older than ``timestamp``, if any."""
        slot = bisect_left(self.timestamps, timestamp) - 1
        return self.base_offset + self.relative_offsets[slot] if slot >= 0 else None

    def truncate_to_offset(self, offset: int) -> None:
        """Forget entries at ``offset`` or later (their batches were cut off)."""
        keep = bisect_left(self.relative_offsets, offset - self.base_offset)
        del self.timestamps[keep:]
        del self.relative_offsets[keep:]

    def to_bytes(self) -> bytes:
        return _interleave([_big_endian_bytes(self.timestamps),
                            _big_endian_bytes(self.relative_offsets)], [8, 4])

    @classmethod
    def from_bytes(cls, base_offset: int, data: bytes) -> TimeIndex:
        index = cls(base_offset)
        timestamps, relative_offsets = _split(data, [8, 4])
        index.timestamps = _column_from_big_endian("q", timestamps)
        index.relative_offsets = _column_from_big_endian("i", relative_offsets)
        return index
