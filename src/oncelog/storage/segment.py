"""One log segment: a file of record batches named by its base offset, and its two indexes.

Files, Kafka's names and formats: ``<base_offset:020d>.log`` holds v2 record batches exactly as
stored (Kafka's on-disk format is the wire format), ``.index`` and ``.timeindex`` the sparse
indexes described in ``storage.index``, ``.txnindex`` the aborted transactions whose ABORT
marker is in this segment (``storage.txn_index``; no file: none).

Invariants:
- The ``.log`` file is whole batches back to back, with increasing offsets from
  ``base_offset``; ``size`` is its length and ``next_offset`` the offset after its last record.
  Offsets are contiguous except in a sealed segment that compaction rewrote
  (``storage.cleaner``): dropped batches leave gaps there, as in Kafka.
- Only the active (last) segment of a log grows. Its indexes live in memory and reach disk
  only when it is sealed (on roll) and when the log closes, so its index files may be stale or
  missing after a crash: that is why recovery always rescans the active segment, CRCs
  included. A sealed segment's index files are written (temp file, then rename) before the
  next segment's ``.log`` exists, so a segment followed by another one can be trusted after a
  cheap check (Kafka's recovery-point idea): see ``check_sealed``.
- A sealed segment loads its index files lazily, on its first lookup.
- The ``.txnindex`` is written through (an entry per abort marker, appended when the
  partition writes or replicates the marker), cut with the segment by ``truncate_to`` and
  removed with it, rewritten by compaction with the entries of the markers it keeps
  (``storage.cleaner``); a segment does not rebuild it itself: it knows batches, not which
  transaction a marker ends. Recovery's rebuild is the log's (``Log.rebuild_txn_indexes``),
  fed by whoever replays producer state.
- I/O: one ``fd`` per segment, open for the segment's life, ``O_APPEND`` so ``os.write``
  always lands at the end; reads use ``os.pread`` and never move a file offset.
- The batch header is read with ``protocol.batches`` only; records are decoded (and maybe
  decompressed) only to answer a timestamp lookup at record precision.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..protocol.batches import (CRC_START, HEADER_SIZE, LOG_OVERHEAD, MAGIC, MIN_BATCH_LENGTH,
                                TIMESTAMP_TYPE_FLAG, BatchHeader, ReadableBuffer, crc32c,
                                parse_header, peek_offset_and_size, set_base_offset,
                                set_partition_leader_epoch)
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import decode_records
from . import files
from .config import LogConfig
from .file_region import FileRegion
from .index import (NO_TIMESTAMP, OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE, OffsetAndTimestamp,
                    OffsetIndex, TimeIndex)
from .txn_index import TXN_INDEX_SUFFIX, TransactionIndex

logger = logging.getLogger(__name__)

LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX = ".log", ".index", ".timeindex"
_WALK_WINDOW = 16 * 1024  # header walks read this much at a time: several small batches
_SCAN_CHUNK = 8 * 1024 * 1024  # recovery reads whole batches (CRC) in chunks this big
_NO_LIMIT = 1 << 63
# Dropping written bytes from the page cache (``cache_retain_bytes``): once per this many
# bytes written, over the bytes that left the retained tail since, and again over this
# many earlier steps' (a page still being written back is not dropped the first time).
_CACHE_STEP = 16 * 1024 * 1024
_CACHE_RECHECK_STEPS = 4
_fadvise = getattr(os, "posix_fadvise", None)  # Linux and most Unixes; not macOS
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def segment_file(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / f"{base_offset:020d}{suffix}"


class Segment:
    def __init__(self, directory: Path, base_offset: int, config: LogConfig, fd: int,
                 size: int, mtime_ms: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.fd = fd
        self.size = size
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP  # largest batch max_timestamp; -1 when none
        self.roll_base_ms = mtime_ms  # log.roll.ms counts from here
        self.last_modified_ms = mtime_ms  # retention falls back to this without timestamps
        self._index_interval_bytes = config.index_interval_bytes
        self._cache_retain = config.cache_retain_bytes if _fadvise is not None else -1
        self._cache_dropped_to = 0  # bytes before this were advised out of the page cache
        self._offset_index: OffsetIndex | None = None  # None: sealed and not loaded yet
        self._time_index: TimeIndex | None = None
        self.txn_index = TransactionIndex(segment_file(directory, base_offset, TXN_INDEX_SUFFIX))

    def __repr__(self) -> str:
        return (f"Segment({self.log_path.name}, offsets {self.base_offset}.."
                f"{self.next_offset - 1}, {self.size} bytes)")

    @property
    def log_path(self) -> Path:
        return segment_file(self.directory, self.base_offset, LOG_SUFFIX)

    @property
    def index_paths(self) -> tuple[Path, Path]:
        return (segment_file(self.directory, self.base_offset, INDEX_SUFFIX),
                segment_file(self.directory, self.base_offset, TIME_INDEX_SUFFIX))

    @property
    def largest_timestamp_ms(self) -> int:
        """What time-based retention compares (Kafka's ``LogSegment.largestTimestamp``)."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig,
               now_ms: int) -> Segment:
        path = segment_file(directory, base_offset, LOG_SUFFIX)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        segment = cls(directory, base_offset, config, fd, 0, now_ms)
        segment.txn_index.delete()  # a leftover of a segment once at this offset is not ours
        segment._offset_index = OffsetIndex(base_offset)
        segment._time_index = TimeIndex(base_offset)
        return segment

    @classmethod
    def open(cls, directory: Path, base_offset: int, config: LogConfig) -> Segment:
        """Open an existing file; the caller then runs ``check_sealed`` or ``recover``."""
        fd = os.open(segment_file(directory, base_offset, LOG_SUFFIX), os.O_RDWR | os.O_APPEND)
        stat = os.fstat(fd)
        return cls(directory, base_offset, config, fd, stat.st_size, stat.st_mtime_ns // 10**6)

    def check_sealed(self) -> str | None:
        """Trust a non-active segment's index files after cheap checks; return what is wrong.

        Checks: whole entries; the last offset-index entry points at a batch with the right
        last offset; walking headers from there ends exactly at the end of the file; the time
        index's last entry covers every batch of that tail. The walk gives ``next_offset``.
        """
        index_path, time_index_path = self.index_paths
        try:
            index_tail = _read_last_entry(index_path, OFFSET_ENTRY_SIZE)
            time_tail = _read_last_entry(time_index_path, TIME_ENTRY_SIZE)
        except (OSError, ValueError) as error:
            return f"index files unusable ({error})"
        if self.size == 0 and not index_tail and not time_tail:
            self.next_offset = self.base_offset  # compaction emptied it; it keeps its place
            return None
        if self.size == 0 or not index_tail:
            return "the segment or its offset index is empty"
        relative_offset, position = _OFFSET_ENTRY.unpack(index_tail)
        if not 0 <= position < self.size:
            return f"the offset index points at position {position}, past the end"
        try:
            tail = [header for _, header in self._walk(position, self.size)]
        except KafkaError as error:
            return error.message
        largest, time_relative = _TIME_ENTRY.unpack(time_tail) if time_tail else (NO_TIMESTAMP, 0)
        if tail[0].last_offset != self.base_offset + relative_offset:
            return "the offset index's last entry disagrees with the batch it points at"
        if max(header.max_timestamp for header in tail) > largest or (
                self.base_offset + time_relative >= tail[-1].next_offset):
            return "the time index does not cover the end of the segment"
        self.next_offset = tail[-1].next_offset
        self.max_timestamp = largest
        return None

    def recover(self, now_ms: int, contiguous: bool = True) -> bool:
        """Rescan every batch (lengths, offsets, CRC-32C), cut the file at the first bad one
        and rebuild the indexes in memory. Returns True when bytes were cut off.

        ``contiguous``: each batch must start where the previous one ended (the active
        segment); otherwise it may start later (a sealed segment compaction left gaps in)."""
        self._offset_index = OffsetIndex(self.base_offset)
        self._time_index = TimeIndex(self.base_offset)
        self.next_offset, self.max_timestamp = self.base_offset, NO_TIMESTAMP
        valid_size, problem = self._scan(contiguous)
        # log.roll.ms counts from the first batch's timestamp, as in Kafka, but never from the
        # future; new segments count from the clock, so old timestamps cost one roll at most.
        first_timestamp = parse_header(os.pread(self.fd, HEADER_SIZE, 0)).max_timestamp \
            if self.next_offset > self.base_offset else NO_TIMESTAMP
        self.roll_base_ms = first_timestamp if 0 <= first_timestamp <= now_ms else now_ms
        if problem is None:
            return False
        logger.warning("%s: truncating at position %d (offset %d), dropping %d bytes: %s",
                       self.log_path, valid_size, self.next_offset, self.size - valid_size,
                       problem)
        os.ftruncate(self.fd, valid_size)
        self.size = valid_size
        return True

    def _scan(self, contiguous: bool) -> tuple[int, str | None]:
        """Walk, verify and track whole batches; return (valid bytes, problem or None)."""
        position, chunk, chunk_start = 0, b"", 0
        while position < self.size:
            remaining = self.size - position
            if remaining < HEADER_SIZE:
                return position, f"{remaining} trailing bytes are a torn batch header"
            at = position - chunk_start
            if at + HEADER_SIZE > len(chunk):
                chunk, chunk_start, at = os.pread(self.fd, min(_SCAN_CHUNK, remaining),
                                                  position), position, 0
            header = parse_header(chunk, at)
            problem = _header_problem(header, self.next_offset, remaining, contiguous)
            if problem is not None:
                return position, problem
            if at + header.size > len(chunk):
                chunk, chunk_start, at = os.pread(self.fd, max(header.size, min(
                    _SCAN_CHUNK, remaining)), position), position, 0
            actual = crc32c(memoryview(chunk)[at + CRC_START:at + header.size])
            if actual != header.crc:
                return position, (f"batch CRC {header.crc:#010x} but its content hashes to "
                                  f"{actual:#010x}")
            self._track(position, header.last_offset, header.max_timestamp)
            position += header.size
        return position, None

    # -- appending -------------------------------------------------------------------------

    def append(self, buffer: ReadableBuffer, headers: Sequence[tuple[int, BatchHeader]],
               leader_epoch: int | None, now_ms: int) -> int:
        """Assign offsets from ``next_offset``, write ``buffer`` with one ``os.write`` and index
        it. ``headers`` are ``buffer``'s batches as ``iter_headers`` gave them. Returns the
        file position of the first batch. ``leader_epoch=None`` is replication's append: the
        batches keep the offsets and epochs the leader gave them (``headers`` carry them)."""
        position = self.size
        if leader_epoch is not None:
            assert isinstance(buffer, bytearray), "a leader's append patches its buffer"
            offset = self.next_offset
            shifted = []
            for at, header in headers:
                set_base_offset(buffer, at, offset)
                set_partition_leader_epoch(buffer, at, leader_epoch)
                shifted.append((at, header._replace(base_offset=offset)))
                offset += header.last_offset_delta + 1
            headers = shifted
        self._write(buffer)
        for at, header in headers:
            self._track(position + at, header.last_offset, header.max_timestamp)
        self.size = position + len(buffer)
        self.last_modified_ms = now_ms
        if 0 <= self._cache_retain <= self.size - self._cache_dropped_to - _CACHE_STEP:
            self._drop_cached_behind()
        return position

    def keep_cached(self, retain_bytes: int) -> None:
        """From now on keep only the newest ``retain_bytes`` written in the page cache (-1:
        all of them): a partition's role sets it (``Log.keep_cached``)."""
        self._cache_retain = retain_bytes if _fadvise is not None else -1

    def _drop_cached_behind(self) -> None:
        """Ask the kernel to drop this file's pages behind the newest ``cache_retain_bytes``.

        The page cache otherwise grows by every byte written, each a fresh page to fault in;
        a page dropped here is free memory the next write reuses at once (on a VM whose free
        memory goes back to the host, a fresh page costs the host a fault too: see
        docs/operations.md for what it measured). ``POSIX_FADV_DONTNEED`` starts writing dirty
        pages back and drops the clean ones, so the range is advised again in later steps.
        Readers of the retained tail (followers, consumers keeping up) still read from memory;
        older bytes come from disk."""
        assert _fadvise is not None  # else _cache_retain is -1 and nothing is dropped
        end = self.size - self._cache_retain
        start = max(0, self._cache_dropped_to - _CACHE_RECHECK_STEPS * _CACHE_STEP)
        _fadvise(self.fd, start, end - start, os.POSIX_FADV_DONTNEED)
        self._cache_dropped_to = end

    def _write(self, buffer: ReadableBuffer) -> None:
        written = 0
        try:
            while written < len(buffer):  # a regular file takes it all at once unless full
                written += os.write(self.fd, memoryview(buffer)[written:] if written else buffer)
        except OSError as error:
            os.ftruncate(self.fd, self.size)  # never leave half a batch behind
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"cannot write {len(buffer)} bytes to {self.log_path}: {error}"
                             ) from error

    def _track(self, position: int, last_offset: int, max_timestamp: int) -> None:
        """Account for one batch now in the file: maybe index it, move next_offset."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
        index, time_index = self._offset_index, self._time_index
        assert index is not None and time_index is not None, "tracked before its indexes"
        if not index.positions or position - index.positions[-1] >= self._index_interval_bytes:
            index.append(last_offset, position)
            time_index.maybe_append(self.max_timestamp, last_offset)
        self.next_offset = last_offset + 1

    # -- reading ---------------------------------------------------------------------------

    def locate(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset``, with its file position."""
        for position, header in self._walk(self._offsets().lookup(offset), self.size):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool,
             region_min_bytes: int | None = None) -> bytes | memoryview | FileRegion | None:
        """Whole batches from the one holding ``offset`` (see ``Log.read``); None when this
        segment holds nothing at or after ``offset``. With ``region_min_bytes``, a span at
        least that long comes as a ``FileRegion`` to send as it is, not read."""
        found = self.locate(offset)
        if found is None:
            return None
        position, first = found
        limit = _NO_LIMIT if max_offset is None else max_offset
        if first.base_offset >= limit:
            return b""
        if first.size > max_bytes:  # KIP-74: one oversized batch still makes progress
            if not min_one_batch:
                return b""
            size, next_offset = first.size, first.next_offset
        elif region_min_bytes is not None:
            size, next_offset = self._span(position, first, max_bytes, limit)
        else:
            data = os.pread(self.fd, min(max_bytes, self.size - position), position)
            end = first.size
            while len(data) - end >= LOG_OVERHEAD:
                base_offset, size = peek_offset_and_size(data, end)
                if end + size > len(data) or base_offset >= limit:
                    break
                end += size
            # A view, not a slice: the bytes go on to the response encoder without a copy.
            return data if end == len(data) else memoryview(data)[:end]
        if region_min_bytes is not None and size >= region_min_bytes:
            return FileRegion(self.fd, position, size, next_offset)
        return os.pread(self.fd, size, position)

    def _span(self, position: int, first: BatchHeader, max_bytes: int,
              limit: int) -> tuple[int, int]:
        """Bytes of the whole batches from ``position`` that fit ``max_bytes`` and start
        below ``limit``, found from their headers alone, and the offset after the last."""
        end, stop, next_offset = position + first.size, position + max_bytes, first.next_offset
        for at, header in self._walk(end, self.size):
            if at + header.size > stop or header.base_offset >= limit:
                break
            end, next_offset = at + header.size, header.next_offset
        return end - position, next_offset

    def find_by_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """The first record with a timestamp >= ``timestamp`` (Kafka's ListOffsets rule)."""
        if self.max_timestamp < timestamp:
            return None
        older = self._times().lookup(timestamp)  # offsets up to here are all older
        found = self.locate(self.base_offset if older is None else older + 1)
        if found is None:
            return None
        for position, header in self._walk(found[0], self.size):
            if header.max_timestamp < timestamp:
                continue
            if header.attributes & TIMESTAMP_TYPE_FLAG:  # LogAppendTime: one time for all
                return OffsetAndTimestamp(header.base_offset, header.max_timestamp)
            for record in decode_records(os.pread(self.fd, header.size, position), header):
                if record.timestamp >= timestamp:
                    return OffsetAndTimestamp(record.offset, record.timestamp)
        return None

    def _walk(self, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
        """Yield (position, header) of each batch in [start, end), reading headers only."""
        position, window, window_start = start, b"", start
        while position < end:
            at = position - window_start
            if at + HEADER_SIZE > len(window):
                window, window_start, at = os.pread(self.fd, min(_WALK_WINDOW, end - position),
                                                    position), position, 0
                if len(window) < HEADER_SIZE:
                    raise self._corrupt(position, f"{len(window)} bytes left for a batch header")
            header = parse_header(window, at)
            if header.magic != MAGIC or header.batch_length < MIN_BATCH_LENGTH:
                raise self._corrupt(position, f"magic {header.magic}, length "
                                              f"{header.batch_length}")
            if position + header.size > end:
                raise self._corrupt(position, f"a {header.size}-byte batch runs past {end}")
            yield position, header
            position += header.size

    def _corrupt(self, position: int, detail: str) -> KafkaError:
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                          f"{self.log_path} is damaged at position {position}: {detail}")

    # -- indexes ---------------------------------------------------------------------------

    def activate(self) -> None:
        """Become the segment that grows: its indexes must be in memory from now on."""
        self._offsets()
        self._times()

    def _offsets(self) -> OffsetIndex:
        index = self._offset_index
        return index if index is not None else self._load_indexes()[0]

    def _times(self) -> TimeIndex:
        index = self._time_index
        return index if index is not None else self._load_indexes()[1]

    def _load_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        index_path, time_index_path = self.index_paths
        try:
            self._offset_index = OffsetIndex.from_bytes(self.base_offset, index_path.read_bytes())
            self._time_index = TimeIndex.from_bytes(self.base_offset,
                                                    time_index_path.read_bytes())
        except OSError as error:  # removed since open: rebuild from the headers
            logger.warning("%s: rebuilding indexes (%s)", self.log_path, error)
            self._offset_index = OffsetIndex(self.base_offset)
            self._time_index = TimeIndex(self.base_offset)
            for position, header in self._walk(0, self.size):
                self._track(position, header.last_offset, header.max_timestamp)
        return self._offset_index, self._time_index

    def seal(self) -> None:
        """Write both index files (after roll, or at close), ending the time index with the
        segment's largest timestamp (Kafka's ``onBecomeInactiveSegment``)."""
        offset_index, time_index = self._offsets(), self._times()
        if self.size:
            time_index.maybe_append(self.max_timestamp, self.next_offset - 1)
        index_path, time_index_path = self.index_paths
        files.replace(index_path, offset_index.to_bytes())  # the old file or the new, never half
        files.replace(time_index_path, time_index.to_bytes())

    # -- truncation and removal --------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset is >= ``offset``; a batch straddling ``offset``
        goes whole (Kafka's ``LogSegment.truncateTo``), so ``next_offset`` may end below it."""
        found = self.locate(offset)
        if found is None:
            return
        cut, first_dropped = found
        offset_index, time_index = self._offsets(), self._times()
        offset_index.truncate_to_position(cut)
        time_index.truncate_to_offset(first_dropped.base_offset)
        # The kept time entries cover batches up to the last offset-index entry; the batches
        # after it are few (one index interval), so walk them for the new maximum.
        tail_start = offset_index.positions[-1] if offset_index.positions else 0
        self.max_timestamp = max([time_index.last_timestamp] + [
            header.max_timestamp for _, header in self._walk(tail_start, cut)])
        os.ftruncate(self.fd, cut)
        self.size = cut
        self.next_offset = first_dropped.base_offset
        self.txn_index.truncate_to(self.next_offset)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        """Close and remove the files, the .log first: orphan index files are harmless (the
        next open removes them), a .log without its indexes would come back to life."""
        self.close()
        for path in (self.log_path, *self.index_paths):
            path.unlink(missing_ok=True)
        self.txn_index.delete()


def _header_problem(header: BatchHeader, expected_offset: int, available: int,
                    contiguous: bool = True) -> str | None:
    if header.magic != MAGIC:
        return f"record batch magic {header.magic}"
    if header.batch_length < MIN_BATCH_LENGTH:
        return f"batch length {header.batch_length} is too small"
    if header.size > available:
        return f"a {header.size}-byte batch is torn: only {available} bytes follow"
    gap_allowed = not contiguous and header.base_offset > expected_offset
    if header.base_offset != expected_offset and not gap_allowed:
        return f"base offset {header.base_offset} where {expected_offset} was expected"
    return None


def _read_last_entry(path: Path, entry_size: int) -> bytes:
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size % entry_size:
            raise ValueError(f"{path.name} is {size} bytes, not whole {entry_size}-byte entries")
        return os.pread(file.fileno(), entry_size, size - entry_size) if size else b""
