"""Log compaction: keep only the latest record of each key in a log's sealed segments (a
simplified Kafka ``LogCleaner``), for logs whose ``cleanup.policy`` includes ``compact`` —
``__consumer_offsets`` first of all.

One pass over a log (``clean``):

1. **Map.** Read every record of the sealed segments (all but the active one, which is never
   cleaned, as in Kafka) and note, per key, the offset of its latest record.
2. **Filter.** A record survives if it is its key's latest in the sealed segments. A
   tombstone (a null value) survives only until ``delete.retention.ms`` after its segment's
   largest timestamp, so that readers who saw the old value also see it deleted. Records
   without a key, control batches and batches with a producer id (idempotent or
   transactional producers, whose sequence state lives in batch headers) are kept untouched.
3. **Rewrite.** A segment losing nothing stays as it is. Otherwise it is written again:
   batches keeping every record are copied byte for byte; a batch keeping some is rebuilt
   with its records' original offsets and timestamps, the same base offset and the same last
   offset delta (Kafka preserves a batch's offset range the same way), compressed as before;
   batches keeping nothing are dropped, leaving a gap in the offsets, as in Kafka. A
   segment keeping nothing becomes an empty file that still holds its place (its base
   offset), so the log's start offset does not move.
4. **Swap.** The new segment is built in ``<log dir>/cleaner.tmp/``, its files fsynced, then
   renamed over the old ones (indexes first, the ``.log`` last) and the directory fsynced;
   only then does the log use it.

Invariants kept (see ``storage.log`` and ``storage.segment``): no offset is ever changed and
segments never overlap; the active segment is never touched, so the log end offset stays.
Gaps are why compaction does not write empty batches instead: librdkafka counts a fetch
that yields no record as "message too large" and gives up after ten, whereas a fetch that
lands in a gap simply gets the next batch. A crash mid-swap leaves either the old or the new
``.log`` (renames are atomic), and index files that may not match it: recovery's
``check_sealed`` notices and rebuilds them; leftovers in ``cleaner.tmp`` are removed by the
next pass.

Divergences from Kafka: no ``min.cleanable.dirty.ratio`` or ``min.compaction.lag.ms`` (a
log is cleaned whenever a segment was sealed since its last pass, or a kept tombstone has
expired); segments are not merged; the tombstone horizon is per segment (its largest
timestamp), not the batch-level delete horizon of KIP-534. Cleaning runs synchronously on
the caller's thread and decodes every record of the sealed segments, which suits internal
topics, not large user topics.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..protocol.batches import (CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, BatchHeader,
                                crc32c, iter_headers)
from ..protocol.records import Record, compress, decode_records, encode_record
from .log import Log
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, Segment, segment_file

logger = logging.getLogger(__name__)

TEMPORARY_DIRECTORY = "cleaner.tmp"
_CRC_OFFSET = 17  # the CRC field's position in a batch header


@dataclass
class CleanResult:
    segments_rewritten: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    # When a tombstone kept by this pass may go (the earliest), or None if none was kept.
    next_tombstone_expiry_ms: int | None = None


@dataclass
class _Plan:
    """The cleaned form of one segment: whole batches, in order."""
    batches: list[bytes] = field(default_factory=list)
    changed: bool = False
    records_removed: int = 0
    tombstones_removed: int = 0
    tombstones_kept_until_ms: int | None = None


class LogCleaner:
    """Decides when each compacted log needs a pass; the logs' owner calls ``maybe_clean``
    from its periodic maintenance."""

    def __init__(self) -> None:
        # log directory -> (active segment's base offset at the last pass, tombstone expiry)
        self._last_pass: dict[Path, tuple[int, int | None]] = {}

    def maybe_clean(self, log: Log, now_ms: int, delete_retention_ms: int) -> CleanResult | None:
        last = self._last_pass.get(log.directory)
        active_base = log.segment_base_offsets[-1]
        if last is not None:
            sealed_since, tombstone_expiry = last[0] != active_base, last[1]
            if not sealed_since and (tombstone_expiry is None or now_ms < tombstone_expiry):
                return None
        result = clean(log, now_ms, delete_retention_ms)
        self._last_pass[log.directory] = (active_base, result.next_tombstone_expiry_ms)
        return result

    def forget(self, log: Log) -> None:
        self._last_pass.pop(log.directory, None)


def clean(log: Log, now_ms: int, delete_retention_ms: int) -> CleanResult:
    """One compaction pass over ``log``'s sealed segments (see the module docstring)."""
    result = CleanResult()
    temporary = log.directory / TEMPORARY_DIRECTORY
    if temporary.exists():
        shutil.rmtree(temporary)  # a pass cut short by a crash
    sealed = log.sealed_segments()
    if not sealed:
        return result
    latest: dict[bytes, int] = {}
    for segment in sealed:
        for _, header, batch in _batches(segment):
            if _compactable(header):
                for record in decode_records(batch, header):
                    if record.key is not None:
                        latest[record.key] = record.offset
    horizon_ms = now_ms - delete_retention_ms
    for segment in sealed:
        keep_tombstones = segment.largest_timestamp_ms > horizon_ms
        plan = _filter(segment, latest, keep_tombstones)
        if plan.tombstones_kept_until_ms is not None:
            expiry = plan.tombstones_kept_until_ms + delete_retention_ms
            if result.next_tombstone_expiry_ms is None or expiry < result.next_tombstone_expiry_ms:
                result.next_tombstone_expiry_ms = expiry
        if not plan.changed:
            continue
        result.bytes_before += segment.size
        cleaned = _write_cleaned(log, segment, plan.batches, now_ms)
        log.replace_sealed_segment(segment, cleaned)
        result.segments_rewritten += 1
        result.records_removed += plan.records_removed
        result.tombstones_removed += plan.tombstones_removed
        result.bytes_after += cleaned.size
    if result.segments_rewritten:
        logger.info("%s: compacted %d segments, %d records removed (%d tombstones), %d -> %d "
                    "bytes", log.directory.name, result.segments_rewritten,
                    result.records_removed, result.tombstones_removed, result.bytes_before,
                    result.bytes_after)
    return result


def _compactable(header: BatchHeader) -> bool:
    return not header.is_control and not header.has_producer_id


def _batches(segment: Segment):
    data = os.pread(segment.fd, segment.size, 0)
    for position, header in iter_headers(data):
        yield position, header, data[position:position + header.size]


def _filter(segment: Segment, latest: dict[bytes, int], keep_tombstones: bool) -> _Plan:
    plan = _Plan()
    for _, header, batch in _batches(segment):
        if not _compactable(header):
            kept: list[Record] | None = None
        else:
            records = decode_records(batch, header)
            kept = []
            for record in records:
                superseded = record.key is not None and latest.get(record.key) != record.offset
                expired_tombstone = record.key is not None and record.value is None \
                    and not keep_tombstones
                if superseded or expired_tombstone:
                    plan.records_removed += 1
                    plan.tombstones_removed += record.value is None
                    continue
                kept.append(record)
                if record.value is None:
                    plan.tombstones_kept_until_ms = max(plan.tombstones_kept_until_ms or 0,
                                                        segment.largest_timestamp_ms)
            if len(kept) == len(records):
                kept = None
        if kept is None:
            plan.batches.append(batch)
        elif kept:
            plan.batches.append(_rebuilt_batch(header, kept))
            plan.changed = True
        else:
            plan.changed = True  # the whole batch goes: a gap in the offsets
    return plan


def _rebuilt_batch(header: BatchHeader, records: list[Record]) -> bytes:
    """The surviving records at their original offsets, in a batch with the original offset
    range, attributes (compression included), producer fields and timestamp bounds."""
    body = compress(header.compression, b"".join(
        encode_record(r.offset - header.base_offset, r.timestamp - header.base_timestamp,
                      r.key, r.value, r.headers) for r in records))
    head = bytearray(HEADER.pack(
        header.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body),
        header.partition_leader_epoch, header.magic, 0, header.attributes,
        header.last_offset_delta, header.base_timestamp, header.max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, len(records)))
    crc = crc32c(bytes(head[CRC_START:]) + body)
    head[_CRC_OFFSET:_CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(head) + body


def _write_cleaned(log: Log, old: Segment, batches: list[bytes], now_ms: int) -> Segment:
    """Build the cleaned segment aside, then rename its files over the old ones."""
    temporary = log.directory / TEMPORARY_DIRECTORY
    temporary.mkdir()
    with open(segment_file(temporary, old.base_offset, LOG_SUFFIX), "wb") as file:
        for batch in batches:
            file.write(batch)
    building = Segment.open(temporary, old.base_offset, log.config)
    if building.recover(now_ms, contiguous=False):  # indexes, and a check of what we wrote
        raise OSError(f"the compacted copy of {old} does not read back whole")
    assert building.next_offset <= old.next_offset, (old, building)
    building.seal()
    os.fsync(building.fd)
    building.close()
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):  # the .log last
        source = segment_file(temporary, old.base_offset, suffix)
        _fsync_file(source)
        os.replace(source, segment_file(log.directory, old.base_offset, suffix))
    _fsync_file(log.directory)
    temporary.rmdir()
    cleaned = Segment.open(log.directory, old.base_offset, log.config)
    problem = cleaned.check_sealed()
    if problem is not None:  # an empty segment; or the disk lies: recover rather than trust
        if cleaned.size:
            logger.warning("%s: rebuilding the cleaned segment's indexes: %s", cleaned, problem)
        cleaned.recover(now_ms, contiguous=False)
        cleaned.seal()
    return cleaned


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
