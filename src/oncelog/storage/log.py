"""The log of one partition: its segments, offsets, roll, retention, recovery and flush.

A log is a directory ``<data-dir>/<topic>-<partition>/`` of segments ``<base_offset:020d>.log``
with their ``.index``, ``.timeindex`` and ``.txnindex`` (see ``storage.segment`` and
``storage.txn_index``). Files with other names (producer-state snapshots, the leader-epoch
checkpoint, later) are left alone.

Invariants:
- There is always at least one segment; the last one is the active segment, the only one
  written to. Segments are contiguous: each starts at the previous one's next offset —
  except after compaction (``storage.cleaner``), which may drop batches at the end of a
  sealed segment and so leave a gap before the next one, as Kafka's cleaner does. Segments
  never overlap.
- ``log_start_offset`` is the first segment's base offset, ``log_end_offset`` the active
  segment's next offset. Only ``truncate_to`` moves ``log_end_offset`` back.
- Retention deletes whole segments from the front and never the active one. When every
  segment has expired the log first rolls, as Kafka's ``deleteSegments`` does, so an empty
  active segment at ``log_end_offset`` remains and the offsets carry on.
- The segment list is replaced, never changed in place, and always under ``_lock``: ``flush``
  runs on another thread and snapshots it there. Everything else runs on the owner's thread.
- Compaction (``storage.cleaner``) may replace a sealed segment by a copy with fewer records
  and the same base offset; the offsets of the records it keeps never change, and the log's
  start and end offsets stay.

Durability: ``append`` is one ``os.write`` into the page cache, so a killed process (kill -9)
loses nothing that was appended. ``flush`` fsyncs the active segment, segments sealed since
the last flush, their index files and the directory: only that survives a power loss.

Recovery (``open``): leftover temporary files and index files without a ``.log`` are removed;
a non-active segment whose index files pass ``Segment.check_sealed`` is trusted, any other is
rescanned with CRCs and its indexes rewritten; the active segment is always rescanned, because
its indexes were only in memory. A torn or corrupt batch cuts its segment there. If that
happens before the last segment, or a segment overlaps the one before it, the later segments
are deleted (Kafka's recovery does the same) so the log stays a prefix of what was written.
A gap between segments is accepted in a compacted log: the cleaner leaves them. In any other
log a gap is what a power loss leaves when segments rolled after the last fsync (their files
exist, their records never reached the disk): the segments from the gap on are deleted, so the
log ends where its durable records end instead of at an empty segment's base offset - where
a consumer would wait for ever for offsets that do not exist. Under ``log.flush.policy=ack``
nothing deleted this way was acknowledged (an ack waits for the fsync of every earlier
segment too).

Aborted-transaction indexes (``.txnindex``) are trusted like the other index files of a
segment that passed ``check_sealed``; a missing one means no aborted transaction. From the
first segment recovery rescanned (always the active one) to the end, they may be stale or
incomplete after a crash, and only producer state knows which transaction a marker ends,
so the log cannot rebuild them itself: ``open`` sets ``txn_index_rebuild_from`` to that
segment's base offset, and the owner of producer state (``Partition``) replays the batches
from there and hands the entries to ``rebuild_txn_indexes``. Until then the files are left
as they were, so a crash meanwhile loses nothing the next open would not rebuild.

Divergences from Kafka: ``log_start_offset`` moves only by whole segments (no DeleteRecords,
hence no log-start-offset checkpoint); no roll jitter; indexes are not preallocated; after a
restart the active segment's roll timer starts from its first record's timestamp, but
segments created later time from the clock, so old producer timestamps cannot cause a roll
per append.
"""

from __future__ import annotations

import logging
import operator
import os
import re
import shutil
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from ..protocol.batches import TIMESTAMP_TYPE_FLAG, BatchHeader, ReadableBuffer, iter_headers
from ..protocol.errors import ErrorCode, KafkaError
from . import files
from .config import LogConfig
from .file_region import FileRegion
from .index import OffsetAndTimestamp
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, Segment, segment_file
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn

logger = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"(\d{20})(\.log|\.index|\.timeindex|\.txnindex)(\.tmp)?")
_MAX_RELATIVE_OFFSET = (1 << 31) - 1  # index entries store offsets relative to the base
_base_offset_of = operator.attrgetter("base_offset")


@dataclass(frozen=True)
class AppendInfo:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the caller stamped LogAppendTime
    position: int  # file position of the first batch in its segment (tests, debugging)


class Log:
    """One partition's log. ``config`` may be replaced between calls (dynamic topic configs);
    ``clock()`` is wall time in ms, injected so tests and simulations control time."""

    def __init__(self, directory: Path, config: LogConfig, clock: Callable[[], int],
                 segments: list[Segment], txn_index_rebuild_from: int | None = None) -> None:
        self.directory = directory
        self.config = config
        self._clock = clock
        self._segments = segments
        self._unflushed: list[Segment] = []  # sealed, not yet fsynced
        # Offsets below it were fsynced by ``flush`` (or survived the last recovery).
        self._durable_end = segments[-1].next_offset
        self._directory_dirty = True  # recovery may have created, cut or removed files
        self._parent_dirty = False
        self._lock = threading.Lock()
        self._closed = False
        # Set by ``open``: the base offset from which the .txnindex files await
        # ``rebuild_txn_indexes`` (see the module docstring); None once rebuilt.
        self.txn_index_rebuild_from = txn_index_rebuild_from
        # Called with the new active segment's base offset after every roll, before anything
        # is written to it: the owner of producer state snapshots it there (Kafka does too),
        # so recovery can replay from the active segment's start.
        self.on_roll: Callable[[int], None] | None = None

    def __repr__(self) -> str:
        return (f"Log({self.directory}, offsets {self.log_start_offset}.."
                f"{self.log_end_offset}, {len(self._segments)} segments)")

    @classmethod
    def open(cls, directory: Path, config: LogConfig, clock: Callable[[], int]) -> Log:
        """Open or create the log in ``directory`` and recover it (see the module docstring).
        ``clock()`` is wall time in milliseconds."""
        directory = Path(directory)
        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        now_ms = clock()
        segments, rebuild_from = _load_segments(directory, _discover(directory), config, now_ms)
        if not segments:
            segments = [Segment.create(directory, 0, config, now_ms)]
        segments[-1].activate()
        if rebuild_from is None or rebuild_from > segments[-1].base_offset:
            rebuild_from = segments[-1].base_offset
        log = cls(directory, config, clock, segments, rebuild_from)
        log._parent_dirty = created
        return log

    @property
    def log_start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def durable_end_offset(self) -> int:
        """The end of what the last ``flush`` fsynced: what a power loss cannot take."""
        return min(self._durable_end, self.log_end_offset)

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segment_base_offsets(self) -> list[int]:
        return [segment.base_offset for segment in self._segments]

    @property
    def active_segment_base_offset(self) -> int:
        return self._segments[-1].base_offset

    # -- append ----------------------------------------------------------------------------

    def append(self, buffer: ReadableBuffer, leader_epoch: int | None) -> AppendInfo:
        """Append whole, already validated v2 batches, giving them offsets from
        ``log_end_offset``: ``base_offset`` and ``partition_leader_epoch`` are patched in
        ``buffer`` (outside the CRC), then it is written with one ``os.write``. Rolls first
        when the active segment is full or old. Work is per batch, never per record.

        ``leader_epoch=None`` is a follower's append (replication): the batches keep the
        offsets and epochs the leader gave them. Their offsets must increase from
        ``log_end_offset`` (a gap is fine: the leader's compaction leaves them), else
        OFFSET_OUT_OF_RANGE, since appending them would break the log's order."""
        self._check_open()
        headers = list(iter_headers(buffer))
        if not headers or headers[-1][0] + headers[-1][1].size != len(buffer):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                             f"{len(buffer)} bytes are not whole record batches")
        if leader_epoch is None:
            self._check_follower_offsets(headers)
            last_offset = headers[-1][1].last_offset
        else:
            last_offset = self.log_end_offset + sum(h.last_offset_delta + 1
                                                    for _, h in headers) - 1
        now_ms = self._clock()
        active = self._segments[-1]
        if active.size and (
                active.size + len(buffer) > self.config.segment_bytes
                or self._roll_due(active, now_ms)
                or last_offset - active.base_offset > _MAX_RELATIVE_OFFSET):
            try:
                active = self._roll(now_ms)
            except OSError as error:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                                 f"cannot roll {self.directory}: {error}") from error
        base_offset = active.next_offset if leader_epoch is not None else headers[0][1].base_offset
        position = active.append(buffer, headers, leader_epoch, now_ms)
        first = headers[0][1]
        append_time_ms = first.max_timestamp if first.attributes & TIMESTAMP_TYPE_FLAG else -1
        return AppendInfo(base_offset, active.next_offset - 1, append_time_ms, position)

    def _check_follower_offsets(self, headers: list[tuple[int, BatchHeader]]) -> None:
        expected = self.log_end_offset
        for _, header in headers:
            if header.base_offset < expected:
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                 f"{self.directory}: replicated batch at offset "
                                 f"{header.base_offset} is below the expected {expected}")
            expected = header.next_offset

    def roll_if_due(self) -> bool:
        """Roll a non-empty active segment older than ``segment_ms`` (for a periodic task:
        without it a quiet partition's last records would never become deletable)."""
        self._check_open()
        now_ms = self._clock()
        active = self._segments[-1]
        if not active.size or not self._roll_due(active, now_ms):
            return False
        self._roll(now_ms)
        return True

    def keep_cached(self, retain_bytes: int) -> None:
        """Keep only the newest ``retain_bytes`` written in the page cache from now on, in
        the active segment and the ones that follow it (``LogConfig.cache_retain_bytes``)."""
        if retain_bytes != self.config.cache_retain_bytes:
            self.config = replace(self.config, cache_retain_bytes=retain_bytes)
            self._segments[-1].keep_cached(retain_bytes)

    def _roll_due(self, active: Segment, now_ms: int) -> bool:
        return now_ms - active.roll_base_ms > self.config.segment_ms

    def _roll(self, now_ms: int) -> Segment:
        with self._lock:
            old = self._segments[-1]
            old.seal()  # index files first: a segment with a successor must have them
            new = Segment.create(self.directory, old.next_offset, self.config, now_ms)
            self._segments = [*self._segments, new]
            self._unflushed.append(old)
            self._directory_dirty = True
        logger.debug("%s: rolled to a new segment at offset %d", self.directory, new.base_offset)
        if self.on_roll is not None:
            self.on_roll(new.base_offset)
        return new

    # -- read ------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True,
             region_min_bytes: int | None = None) -> bytes | memoryview | FileRegion:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` of them, none
        with a base offset >= ``max_offset`` (the caller's high watermark or LSO). With
        ``min_one_batch`` the first batch comes even when larger than ``max_bytes`` (KIP-74).
        A read stays within one segment, as Kafka's does. With ``region_min_bytes``, a read
        at least that long is a ``FileRegion`` (the network sends it from the file).

        Raises OFFSET_OUT_OF_RANGE outside [log_start_offset, log_end_offset];
        ``log_end_offset`` itself gives b"".
        """
        self._check_open()
        segments = self._segments
        start, end = segments[0].base_offset, segments[-1].next_offset
        if not start <= offset <= end:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} is outside {start}..{end} in {self.directory.name}")
        if offset == end:
            return b""
        slot = bisect_right(segments, offset, key=_base_offset_of) - 1
        for segment in segments[slot:]:
            data = segment.read(offset, max_bytes, max_offset, min_one_batch, region_min_bytes)
            if data is not None:
                return data
        return b""

    def batch_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        """Headers of every batch whose last offset is >= ``from_offset``, in log order.
        Reads headers only; used to rebuild the leader-epoch cache after a restart."""
        for header, _ in self.replay_batches(from_offset):
            yield header

    def replay_batches(self, from_offset: int) -> Iterator[tuple[BatchHeader, bytes | None]]:
        """(header, whole batch for a control batch, else None) of every batch whose last
        offset is >= ``from_offset``, in log order: headers only, but a transaction
        marker's one record is needed to know what it ended. Used to rebuild producer state
        (and the aborted-transaction indexes) after a restart."""
        self._check_open()
        for segment in list(self._segments):
            if segment.next_offset <= from_offset:
                continue
            found = segment.locate(max(from_offset, segment.base_offset))
            if found is None:
                continue
            for position, header in segment._walk(found[0], segment.size):
                yield header, (os.pread(segment.fd, header.size, position)
                               if header.is_control else None)

    # -- aborted transactions --------------------------------------------------------------

    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Index a transaction aborted by the marker at ``entry.last_offset``, just appended."""
        self._check_open()
        segments = self._segments
        slot = bisect_right(segments, entry.last_offset, key=_base_offset_of) - 1
        if slot < 0 or entry.last_offset >= segments[slot].next_offset:
            raise ValueError(f"{self.directory.name}: no segment holds offset "
                             f"{entry.last_offset} of {entry}")
        try:
            segments[slot].txn_index.append(entry)
        except OSError as error:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"cannot write {segments[slot].txn_index.path}: {error}") from error

    def rebuild_txn_indexes(self, entries: list[AbortedTxn]) -> None:
        """Recovery: the aborted transactions whose markers lie at or after
        ``txn_index_rebuild_from``, found by replaying producer state from there, become
        those segments' indexes (each entry in its marker's segment); older segments' files
        are kept as they are."""
        self._check_open()
        start = self.txn_index_rebuild_from
        if start is None:
            return
        segments = [segment for segment in self._segments if segment.base_offset >= start]
        bases = [segment.base_offset for segment in segments]
        per_segment: list[list[AbortedTxn]] = [[] for _ in segments]
        for entry in entries:
            slot = bisect_right(bases, entry.last_offset) - 1
            if slot >= 0:
                per_segment[slot].append(entry)
        for segment, found in zip(segments, per_segment):
            segment.txn_index.replace(found)
        self.txn_index_rebuild_from = None

    def collect_aborted_transactions(self, fetch_offset: int,
                                     upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [``fetch_offset``, ``upper_bound_offset``): from
        the segment holding ``fetch_offset`` on (an abort marker comes after every record of
        its transaction, so earlier segments cannot hold one whose marker is at or after the
        fetch offset), until an index says no later segment can hold more (Kafka's
        ``collectAbortedTransactions``). In marker order."""
        self._check_open()
        segments = self._segments
        slot = max(bisect_right(segments, fetch_offset, key=_base_offset_of) - 1, 0)
        found: list[AbortedTxn] = []
        for segment in segments[slot:]:
            entries, complete = segment.txn_index.collect(fetch_offset, upper_bound_offset)
            found += entries
            if complete:
                break
        return found

    def offset_for_timestamp(self, timestamp_ms: int) -> OffsetAndTimestamp | None:
        """ListOffsets by timestamp: the first record (record precision) whose timestamp is
        >= ``timestamp_ms``, with its timestamp; None when there is none."""
        self._check_open()
        for segment in self._segments:
            if segment.max_timestamp >= timestamp_ms:
                found = segment.find_by_timestamp(timestamp_ms)
                if found is not None:
                    return found
        return None

    def max_timestamp(self) -> OffsetAndTimestamp | None:
        """ListOffsets MAX_TIMESTAMP (KIP-734): the record with the largest timestamp, the
        earliest if several share it; that is the first record at >= the largest."""
        self._check_open()
        largest = max(segment.max_timestamp for segment in self._segments)
        return self.offset_for_timestamp(largest) if largest >= 0 else None

    # -- flush -----------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync what a power loss could take: the active segment, segments sealed since the
        last flush with their index files, and the directory when files came or went.

        Blocking; safe on another thread while the owner appends: the file descriptors are
        duplicated under the lock, so a segment deleted meanwhile is still a valid target.
        """
        with self._lock:
            if self._closed:
                return
            pending = list(self._unflushed)
            end = self._segments[-1].next_offset
            fds = _dup_all([segment.fd for segment in (*pending, self._segments[-1])])
            index_paths = [path for segment in pending
                           for path in (*segment.index_paths, segment.txn_index.path)]
            sync_directory, self._directory_dirty = self._directory_dirty, False
            sync_parent, self._parent_dirty = self._parent_dirty, False
        try:
            for fd in fds:
                os.fsync(fd)
            for path in index_paths:
                files.fsync_path(path, missing_ok=True)  # retention may have deleted it since
            if sync_directory:
                files.fsync_path(self.directory)
            if sync_parent:
                files.fsync_path(self.directory.parent)
        except BaseException:
            with self._lock:
                self._directory_dirty |= sync_directory
                self._parent_dirty |= sync_parent
            raise
        finally:
            for fd in fds:
                os.close(fd)
        with self._lock:
            self._unflushed = [segment for segment in self._unflushed if segment not in pending]
            # a truncation meanwhile lowered the end: what it cut is not durable either
            self._durable_end = min(max(self._durable_end, end),
                                    self._segments[-1].next_offset)

    # -- compaction ------------------------------------------------------------------------

    def sealed_segments(self) -> list[Segment]:
        """Every segment but the active one (what compaction may rewrite)."""
        self._check_open()
        return self._segments[:-1]

    def replace_sealed_segment(self, old: Segment, cleaned: Segment) -> None:
        """Use ``cleaned`` instead of ``old``: its compacted copy, already renamed over
        ``old``'s files and fsynced, with the same base offset and a subset of its records."""
        self._check_open()
        assert cleaned.base_offset == old.base_offset, (old, cleaned)
        assert cleaned.next_offset <= old.next_offset, (old, cleaned)
        with self._lock:
            assert old in self._segments[:-1], (self, old)
            self._segments = [cleaned if segment is old else segment
                              for segment in self._segments]
            self._unflushed = [segment for segment in self._unflushed if segment is not old]
            self._directory_dirty = True
        old.close()

    # -- retention and truncation ----------------------------------------------------------

    def apply_retention(self, high_watermark: int | None = None) -> int:
        """Delete whole segments from the front while expired (largest timestamp older than
        ``retention_ms``) or not needed to keep ``retention_bytes``; return how many went.

        Only segments wholly below ``high_watermark`` (default: ``log_end_offset``) may go, as
        in Kafka. ``log_start_offset`` becomes the new first segment's base offset.
        """
        self._check_open()
        now_ms = self._clock()
        count = self._count_deletable(now_ms, high_watermark)
        if count == 0:
            return 0
        if count == len(self._segments):
            self._roll(now_ms)  # keep an empty active segment so log_end_offset stays
        with self._lock:
            doomed = self._segments[:count]
            self._segments = self._segments[count:]
            self._unflushed = [segment for segment in self._unflushed if segment not in doomed]
            self._directory_dirty = True
        for segment in doomed:  # oldest first: a crash meanwhile leaves a shorter prefix gone
            segment.delete()
        logger.debug("%s: retention deleted %d segments; log_start_offset is now %d",
                    self.directory, count, self.log_start_offset)
        return count

    def _count_deletable(self, now_ms: int, high_watermark: int | None) -> int:
        retention_ms, retention_bytes = self.config.retention_ms, self.config.retention_bytes
        upper_bound = self.log_end_offset if high_watermark is None else high_watermark
        remaining_bytes = self.size_bytes
        count = 0
        for segment in self._segments:
            if segment.size == 0 or segment.next_offset > upper_bound:
                break
            expired = retention_ms >= 0 and now_ms - segment.largest_timestamp_ms > retention_ms
            surplus = retention_bytes >= 0 and remaining_bytes - segment.size >= retention_bytes
            if not (expired or surplus):
                break
            remaining_bytes -= segment.size
            count += 1
        return count

    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset is >= ``offset`` (replication's truncation).

        ``offset`` should be a batch boundary: a batch straddling it goes whole, as in
        Kafka, leaving ``log_end_offset`` below ``offset``. Below ``log_start_offset`` the log
        is emptied and restarts at ``offset`` (Kafka's ``truncateFullyAndStartAt``).
        """
        self._check_open()
        if offset >= self.log_end_offset:
            return
        now_ms = self._clock()
        with self._lock:
            keep = [segment for segment in self._segments if segment.base_offset < offset]
            for segment in reversed(self._segments[len(keep):]):  # newest first, as a prefix
                segment.delete()
            if keep:
                keep[-1].truncate_to(offset)
                keep[-1].activate()
            else:
                keep = [Segment.create(self.directory, offset, self.config, now_ms)]
            self._segments = keep
            self._unflushed = [segment for segment in self._unflushed if segment in keep[:-1]]
            self._durable_end = min(self._durable_end, keep[-1].next_offset)
            self._directory_dirty = True
        logger.info("%s: truncated to offset %d; log_end_offset is now %d",
                    self.directory, offset, self.log_end_offset)

    def reset_to(self, offset: int) -> None:
        """Empty the log and start it again at ``offset`` (Kafka's ``truncateFullyAndStartAt``:
        a follower whose log ends before its leader's log start)."""
        self._check_open()
        now_ms = self._clock()
        with self._lock:
            for segment in reversed(self._segments):
                segment.delete()
            self._segments = [Segment.create(self.directory, offset, self.config, now_ms)]
            self._segments[-1].activate()
            self._unflushed = []
            self._durable_end = offset
            self._directory_dirty = True
        logger.info("%s: emptied; starts again at offset %d", self.directory, offset)

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Write the active segment's indexes and close every file. Does not fsync: a clean
        shutdown calls ``flush`` first (as Kafka's ``LogManager.shutdown`` does)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            segments = self._segments
        segments[-1].seal()
        for segment in segments:
            segment.close()

    def delete(self) -> None:
        """Close and remove the whole directory (topic deletion)."""
        self.close()
        shutil.rmtree(self.directory)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {self.directory} is closed")


def _discover(directory: Path) -> list[int]:
    """Base offsets of the segments in ``directory``, after removing leftovers: temporary
    index files and index files whose .log is gone (a deletion cut short)."""
    log_bases, index_files = set(), []
    for name in os.listdir(directory):
        match = _SEGMENT_FILE.fullmatch(name)
        if match is None:
            continue
        if match[3]:
            (directory / name).unlink()
        elif match[2] == LOG_SUFFIX:
            log_bases.add(int(match[1]))
        else:
            index_files.append((int(match[1]), name))
    for base_offset, name in index_files:
        if base_offset not in log_bases:
            logger.info("%s: removing %s, whose segment is gone", directory, name)
            (directory / name).unlink()
    return sorted(log_bases)


def _load_segments(directory: Path, base_offsets: list[int], config: LogConfig,
                   now_ms: int) -> tuple[list[Segment], int | None]:
    """The segments that make a consistent log, and the base offset of the first one that
    had to be rescanned (None if only the active segment was)."""
    segments: list[Segment] = []
    first_rescanned = None
    for i, base_offset in enumerate(base_offsets):
        last = i == len(base_offsets) - 1
        if segments and not config.compacted and segments[-1].next_offset < base_offset:
            logger.warning("%s: the previous segment ends at offset %d, before this one starts "
                           "at %d (what was between never reached the disk); deleting it and "
                           "the %d after it", segment_file(directory, base_offset, LOG_SUFFIX),
                           segments[-1].next_offset, base_offset, len(base_offsets) - i - 1)
            _delete_segment_files(directory, base_offsets[i:])
            break
        segment = Segment.open(directory, base_offset, config)
        cut = False
        problem = None if last else segment.check_sealed()
        if problem is not None:
            logger.info("%s: rebuilding indexes: %s", segment.log_path, problem)
            cut = segment.recover(now_ms, contiguous=False)  # compaction may have left gaps
            segment.seal()
            if first_rescanned is None:
                first_rescanned = base_offset
        elif last:
            cut = segment.recover(now_ms)
        if segments and segments[-1].next_offset > base_offset:
            logger.warning("%s: the previous segment ends at offset %d, after this one starts "
                           "at %d; deleting it and the %d after it", segment.log_path,
                           segments[-1].next_offset, base_offset, len(base_offsets) - i - 1)
            segment.delete()
            _delete_segment_files(directory, base_offsets[i + 1:])
            break
        segments.append(segment)
        if cut and not last:
            logger.warning("%s: cut short by recovery; deleting the %d later segments",
                           segment.log_path, len(base_offsets) - i - 1)
            _delete_segment_files(directory, base_offsets[i + 1:])
            break
    return segments, first_rescanned


def _delete_segment_files(directory: Path, base_offsets: list[int]) -> None:
    for base_offset in reversed(base_offsets):  # newest first: the log stays a prefix
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            segment_file(directory, base_offset, suffix).unlink(missing_ok=True)


def _dup_all(fds: list[int]) -> list[int]:
    duplicates: list[int] = []
    try:
        for fd in fds:
            duplicates.append(os.dup(fd))
    except OSError:
        for fd in duplicates:
            os.close(fd)
        raise
    return duplicates
