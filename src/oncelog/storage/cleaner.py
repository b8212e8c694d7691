"""Log compaction: keep only the latest record of each key in a log's cleanable segments (a
simplified Kafka ``LogCleaner``), for logs whose ``cleanup.policy`` includes ``compact`` —
``__consumer_offsets`` first of all. Transaction-aware, as Kafka's cleaner is (KIP-98).

What may be cleaned: the sealed segments wholly below the upper bound the caller passes —
the partition's last stable offset (which is at most its high watermark), as Kafka's
``firstUncleanableOffset`` — so the active segment, an open transaction's records and
records not yet replicated are never touched, and every transactional record cleaned
belongs to a transaction already decided.

One pass over a log (``clean``):

1. **Map.** Walk the cleanable segments' batches in order. Which transactional batches
   were aborted comes from the aborted-transaction indexes, through the same
   ``Log.collect_aborted_transactions`` that ``read_committed`` fetches use: a batch of
   producer P at offset o is aborted iff an entry (P, first, last) has first <= o <= last.
   Aborted records supersede nothing. Every other record with a key is noted twice, per
   key: its offset, and its *effective* offset - where it took effect: its own offset, or
   for a committed transaction's record the offset of the COMMIT marker (a transaction
   whose marker lies past the cleanable segments counts as later than all of them).
   Consumers apply records in offset order, but ``__consumer_offsets``' loader applies a
   transaction's offsets at its marker; keeping the latest by both orders keeps both views.
2. **Filter.** A record survives if it is its key's latest by offset or by effective
   offset. A tombstone (a null value) that is its key's latest by both survives until
   ``delete.retention.ms`` after its segment's largest timestamp, so that readers who saw
   the old value also see it deleted, and while an older record of its key is kept (see
   next). Records without a key survive. Batches of aborted transactions go whole. Kept
   whatever they hold: the last data batch and the last control batch of each producer id
   in the whole log, when cleanable (so replaying the log rebuilds each producer's epoch,
   last sequence and coordinator epoch, see below) - a last data batch is filtered like
   any other but kept whole rather than emptied; the batches of a committed transaction
   whose marker is not cleanable yet (which of two such transactions applied last is not
   known); control batches that are not transaction markers.
   A transaction marker (COMMIT or ABORT) stays while any batch of its transaction is in
   the log. Once none is — aborted: removed; committed: compacted away — it stays until
   ``delete.retention.ms`` after its segment's largest timestamp (the tombstone horizon),
   then goes, with its ``.txnindex`` entry. A marker goes only in a pass *after* the one
   that removed its transaction's last batch, so no crash can leave an aborted record
   without the index entry that hides it (see 4).
3. **Rewrite.** A segment losing nothing stays as it is. Otherwise it is written again:
   batches keeping every record are copied byte for byte; a batch keeping some is rebuilt
   with its records' original offsets and timestamps, the same base offset and the same last
   offset delta (Kafka preserves a batch's offset range the same way), and the same
   attributes, producer id, epoch and base sequence, compressed as before; batches keeping
   nothing are dropped, leaving a gap in the offsets, as in Kafka. A segment keeping
   nothing becomes an empty file that still holds its place (its base offset), so the
   log's start offset does not move. Its ``.txnindex`` keeps the entries whose ABORT
   marker it keeps: an entry is in the index exactly while its marker is in the log.
4. **Swap.** The new segment is built in ``<log dir>/cleaner.tmp/``, its files fsynced, then
   renamed over the old ones (``.txnindex`` first, then the other indexes, the ``.log``
   last) and the directory fsynced; only then does the log use it. An index entry is
   dropped only with a marker whose transaction has no batch left on disk, so a crash
   between the renames leaves at worst a marker without its entry, which consumers ignore
   — never an entry whose marker is gone (a client would then skip that producer's later
   committed batches) nor an aborted batch without its entry.

Invariants kept (see ``storage.log`` and ``storage.segment``): no offset is ever changed and
segments never overlap; the active segment is never touched, so the log end offset stays.
Gaps are why compaction does not write empty batches instead: librdkafka counts a fetch
that yields no record as "message too large" and gives up after ten, whereas a fetch that
lands in a gap simply gets the next batch. A crash mid-swap leaves either the old or the new
``.log`` (renames are atomic), and index files that may not match it: recovery's
``check_sealed`` notices and rebuilds them — the ``.txnindex`` too, by the partition's
replay of producer state from that segment on; leftovers in ``cleaner.tmp`` are removed
by the next pass.

Producer state (``partition.producer_state``) is rebuilt from a snapshot plus a replay of
the batches after it. Normally the replay starts at the active segment, which compaction
never touches. It starts earlier when recovery rescans a sealed segment, when snapshots
are gone, and on a follower that fetches a compacted log; then:
- each producer's last data batch and last marker are in the log with their headers as
  written, so the replay ends with its epoch, last sequence and coordinator epoch (Kafka
  retains the same batches).
  Fewer of its earlier batches may be retained for duplicate detection; a retry of one of
  those gets OUT_OF_ORDER_SEQUENCE_NUMBER, not a duplicate append;
- a transaction's batches never outlive its marker, so a replay never opens a
  transaction that nothing closes; a marker whose batches are gone closes an empty one;
- a snapshot taken inside a transaction records it open; were its marker removed, a
  replay from that snapshot would keep it open for ever. So before a segment losing
  markers is swapped in, the snapshots at or below the last marker removed are deleted
  (all are older than the active segment: recovery then replays from an older snapshot
  or the log start, slower but right).
A follower or consumer more than ``delete.retention.ms`` behind may miss a removed
marker, as it may miss a removed tombstone (Kafka has the same limit).

Divergences from Kafka: no ``min.cleanable.dirty.ratio`` or ``min.compaction.lag.ms`` (a
log is cleaned whenever a segment became cleanable since its last pass, or a kept
tombstone or marker has expired); segments are not merged; the tombstone and marker
horizon is per segment (its largest timestamp), not the batch-level delete horizon of
KIP-534; a producer's last data batch keeps its records when none survives (Kafka
keeps it empty, which librdkafka mishandles, see gaps), so such a batch of an aborted
transaction stays readable by ``read_uncommitted`` consumers (``read_committed`` ones skip
it: its marker and index entry stay too); a record may survive as its key's latest by
effective offset where Kafka would drop it. Cleaning runs synchronously on the caller's
thread and decodes every record of the cleanable segments, which suits internal topics,
not large user topics.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..protocol.batches import (CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, BatchHeader,
                                crc32c, iter_headers)
from ..protocol.control_records import decode_marker
from ..protocol.errors import KafkaError
from ..protocol.records import Record, compress, decode_records, encode_record
from . import files, producer_snapshots
from .log import Log
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, Segment, segment_file
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn, encode_entries

logger = logging.getLogger(__name__)

TEMPORARY_DIRECTORY = "cleaner.tmp"
_CRC_OFFSET = 17  # the CRC field's position in a batch header
_UNDECIDED = 1 << 63  # the effective offset of a transaction whose marker is not cleanable


@dataclass
class CleanResult:
    segments_rewritten: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    aborted_batches_removed: int = 0
    markers_removed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    # When a tombstone or marker kept by this pass may go (the earliest), or None if none
    # waits: the next pass is due then.
    next_tombstone_expiry_ms: int | None = None


@dataclass
class _Txn:
    """One transaction's data batches in the cleanable segments (base offsets)."""
    batches: list[int] = field(default_factory=list)
    # committed: (key, offset)
    records: list[tuple[bytes | None, int]] = field(default_factory=list)


@dataclass
class _Map:
    """What the map phase learnt about the cleanable segments."""
    by_offset: dict[bytes, int] = field(default_factory=dict)
    by_effective: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    effective: dict[int, int] = field(default_factory=dict)  # txn batch -> its marker's offset
    aborted: set[int] = field(default_factory=set)  # base offsets of aborted batches
    # Each producer's last data and control batch (base offsets): see ``_kept_records``.
    retained: set[int] = field(default_factory=set)
    undecided: set[int] = field(default_factory=set)  # committed, marker not cleanable: kept
    marker_batches: dict[int, list[int]] = field(default_factory=dict)  # marker -> its txn's

    def note(self, key: bytes | None, offset: int, effective: int) -> None:
        if key is None:
            return
        if offset > self.by_offset.get(key, -1):
            self.by_offset[key] = offset
        if (effective, offset) > self.by_effective.get(key, (-1, -1)):
            self.by_effective[key] = (effective, offset)


@dataclass
class _Plan:
    """The cleaned form of one segment: whole batches, in order, and its index entries."""
    batches: list[bytes] = field(default_factory=list)
    changed: bool = False
    records_removed: int = 0
    tombstones_removed: int = 0
    aborted_batches_removed: int = 0
    markers_removed: list[int] = field(default_factory=list)
    txn_entries: list[AbortedTxn] = field(default_factory=list)
    tombstones_kept_until_ms: int | None = None  # tombstones or markers waiting to expire
    pass_again: bool = False  # a marker may go in the next pass (its batches went in this)


class LogCleaner:
    """Decides when each compacted log needs a pass; the logs' owner calls ``maybe_clean``
    from its periodic maintenance."""

    def __init__(self) -> None:
        # log directory -> (first uncleanable segment's base offset at the last pass,
        # when a kept tombstone or marker expires)
        self._last_pass: dict[Path, tuple[int, int | None]] = {}

    def maybe_clean(self, log: Log, now_ms: int, delete_retention_ms: int,
                    upper_bound_offset: int | None = None) -> CleanResult | None:
        """``upper_bound_offset``: nothing at or above it is cleaned - the partition's last
        stable offset; None (tests) means the log end offset."""
        last = self._last_pass.get(log.directory)
        cleanable_end = _first_uncleanable_base(log, upper_bound_offset)
        if last is not None:
            more_cleanable, expiry = last[0] != cleanable_end, last[1]
            if not more_cleanable and (expiry is None or now_ms < expiry):
                return None
        result = clean(log, now_ms, delete_retention_ms, upper_bound_offset)
        self._last_pass[log.directory] = (cleanable_end, result.next_tombstone_expiry_ms)
        return result

    def forget(self, log: Log) -> None:
        self._last_pass.pop(log.directory, None)


def _cleanable_segments(log: Log, upper_bound_offset: int | None) -> list[Segment]:
    bound = log.log_end_offset if upper_bound_offset is None else upper_bound_offset
    cleanable = []
    for segment in log.sealed_segments():
        if segment.next_offset > bound:
            break
        cleanable.append(segment)
    return cleanable


def _first_uncleanable_base(log: Log, upper_bound_offset: int | None) -> int:
    return log.segment_base_offsets[len(_cleanable_segments(log, upper_bound_offset))]


def clean(log: Log, now_ms: int, delete_retention_ms: int,
          upper_bound_offset: int | None = None) -> CleanResult:
    """One compaction pass over ``log``'s cleanable segments: the sealed ones wholly below
    ``upper_bound_offset`` (the last stable offset; None: the log end). See the module
    docstring."""
    result = CleanResult()
    temporary = log.directory / TEMPORARY_DIRECTORY
    if temporary.exists():
        shutil.rmtree(temporary)  # a pass cut short by a crash
    cleanable = _cleanable_segments(log, upper_bound_offset)
    if not cleanable:
        return result
    found = _map(log, cleanable)
    horizon_ms = now_ms - delete_retention_ms
    kept_batches: set[int] = set()  # base offsets of the data batches this pass keeps
    pinned: set[bytes] = set()
    for segment in cleanable:
        plan = _filter(segment, found, segment.largest_timestamp_ms > horizon_ms, kept_batches,
                       pinned)
        expiry = None
        if plan.tombstones_kept_until_ms is not None:
            expiry = plan.tombstones_kept_until_ms + delete_retention_ms
        if plan.pass_again:
            expiry = now_ms if expiry is None else min(expiry, now_ms)
        if expiry is not None and (result.next_tombstone_expiry_ms is None
                                   or expiry < result.next_tombstone_expiry_ms):
            result.next_tombstone_expiry_ms = expiry
        if not plan.changed:
            continue
        if plan.markers_removed:
            _delete_snapshots_at_or_below(log.directory, max(plan.markers_removed))
        result.bytes_before += segment.size
        cleaned = _write_cleaned(log, segment, plan, now_ms)
        log.replace_sealed_segment(segment, cleaned)
        result.segments_rewritten += 1
        result.records_removed += plan.records_removed
        result.tombstones_removed += plan.tombstones_removed
        result.aborted_batches_removed += plan.aborted_batches_removed
        result.markers_removed += len(plan.markers_removed)
        result.bytes_after += cleaned.size
    if result.segments_rewritten:
        logger.info("%s: compacted %d segments, %d records removed (%d tombstones), %d "
                    "aborted batches and %d transaction markers removed, %d -> %d bytes",
                    log.directory.name, result.segments_rewritten, result.records_removed,
                    result.tombstones_removed, result.aborted_batches_removed,
                    result.markers_removed, result.bytes_before, result.bytes_after)
    return result


def _map(log: Log, cleanable: list[Segment]) -> _Map:
    found = _Map()
    end = cleanable[-1].next_offset
    aborted: dict[int, list[tuple[int, int]]] = {}
    for entry in log.collect_aborted_transactions(log.log_start_offset, end):
        aborted.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))
    # Each producer's last data and control batch in the whole log: kept if cleanable.
    last_data: dict[int, int] = {}
    last_control: dict[int, int] = {}
    for header in log.batch_headers(log.log_start_offset):
        if header.has_producer_id:
            (last_control if header.is_control else last_data)[header.producer_id] = \
                header.base_offset
    found.retained.update(last_data.values())
    found.retained.update(last_control.values())
    open_txns: dict[int, _Txn] = {}  # producer id -> its transaction's batches so far
    for segment in cleanable:
        for _, header, batch in _batches(segment):
            offset, producer_id = header.base_offset, header.producer_id
            if header.is_control:
                if producer_id < 0 or not _is_marker(batch, header):
                    continue  # not a marker we know: never in marker_batches, so kept
                txn = open_txns.pop(producer_id, _Txn())
                found.marker_batches[offset] = txn.batches
                for key, record_offset in txn.records:
                    found.note(key, record_offset, offset)
                for base in txn.batches:
                    found.effective[base] = offset
            elif header.is_transactional and producer_id >= 0:
                txn = open_txns.setdefault(producer_id, _Txn())
                txn.batches.append(offset)
                if any(first <= offset <= last for first, last in aborted.get(producer_id, ())):
                    found.aborted.add(offset)
                else:
                    txn.records += [(r.key, r.offset) for r in decode_records(batch, header)]
            else:
                for record in decode_records(batch, header):
                    found.note(record.key, record.offset, record.offset)
    for txn in open_txns.values():  # committed, but their markers are not cleanable yet
        for key, record_offset in txn.records:
            found.note(key, record_offset, _UNDECIDED)
        for base in txn.batches:
            found.effective[base] = _UNDECIDED
            if base not in found.aborted:
                found.undecided.add(base)
    return found


def _is_marker(batch: bytes, header: BatchHeader) -> bool:
    try:
        decode_marker(batch, header)
    except KafkaError:
        return False
    return True


def _batches(segment: Segment) -> Iterator[tuple[int, BatchHeader, bytes]]:
    data = os.pread(segment.fd, segment.size, 0)
    for position, header in iter_headers(data):
        yield position, header, data[position:position + header.size]


def _filter(segment: Segment, found: _Map, keep_deletes: bool, kept_batches: set[int],
            pinned: set[bytes]) -> _Plan:
    """Plan one segment. ``keep_deletes``: the segment is within ``delete.retention.ms``
    (tombstones and markers whose transaction is gone stay). ``kept_batches`` gathers the
    data batches kept, segment after segment, which decides their markers' fate;
    ``pinned`` the keys of records kept whole although superseded (see ``_kept_records``)."""
    plan = _Plan()
    for _, header, batch in _batches(segment):
        offset = header.base_offset
        if header.is_control:
            if offset in found.retained or offset not in found.marker_batches:
                plan.batches.append(batch)
                continue
            txn_batches = found.marker_batches[offset]
            if any(base in kept_batches for base in txn_batches):
                plan.batches.append(batch)  # its transaction still has records in the log
            elif keep_deletes:
                plan.batches.append(batch)
                plan.tombstones_kept_until_ms = max(plan.tombstones_kept_until_ms or 0,
                                                    segment.largest_timestamp_ms)
            elif txn_batches:
                plan.batches.append(batch)  # they went in this pass: the marker goes next
                plan.pass_again = True
            else:
                plan.markers_removed.append(offset)
                plan.changed = True
            continue
        if offset in found.aborted and offset not in found.retained:
            plan.aborted_batches_removed += 1
            plan.records_removed += header.records_count
            plan.changed = True
            continue
        kept = _kept_records(header, batch, found, keep_deletes, plan, segment, pinned)
        if kept is None:
            plan.batches.append(batch)
            kept_batches.add(offset)
        elif kept:
            plan.batches.append(_rebuilt_batch(header, kept))
            kept_batches.add(offset)
            plan.changed = True
        else:
            plan.changed = True  # the whole batch goes: a gap in the offsets
    removed = set(plan.markers_removed)
    plan.txn_entries = [entry for entry in segment.txn_index.entries
                        if entry.last_offset not in removed]
    return plan


def _kept_records(header: BatchHeader, batch: bytes, found: _Map, keep_deletes: bool,
                  plan: _Plan, segment: Segment, pinned: set[bytes]) -> list[Record] | None:
    """The records of a data batch that survive; None when the batch is kept as it is.

    A producer's last data batch is filtered like any other but, as a batch cannot be
    empty (see gaps), kept whole when none of its records survives; an undecided
    transaction's batch is kept whole. Their superseded records stay readable, so a later
    tombstone of their keys must stay too: such keys are ``pinned``."""
    records = decode_records(batch, header)
    offset = header.base_offset
    if offset in found.undecided:
        pinned.update(r.key for r in records if r.key is not None)
        return None
    effective = found.effective.get(offset)
    removed = (plan.records_removed, plan.tombstones_removed)
    kept = _surviving(records, effective, found, keep_deletes, plan, segment, pinned)
    if not kept and offset in found.retained:
        plan.records_removed, plan.tombstones_removed = removed
        if offset not in found.aborted:
            pinned.update(r.key for r in records if r.key is not None)
        return None
    return None if len(kept) == len(records) else kept


def _surviving(records: list[Record], effective: int | None, found: _Map, keep_deletes: bool,
               plan: _Plan, segment: Segment, pinned: set[bytes]) -> list[Record]:
    kept = []
    for record in records:
        if record.key is not None:
            position = (record.offset if effective is None else effective, record.offset)
            latest_by_offset = found.by_offset.get(record.key) == record.offset
            latest_by_effective = found.by_effective.get(record.key) == position
            latest_by_both = latest_by_offset and latest_by_effective
            superseded = not (latest_by_offset or latest_by_effective)
            expired_tombstone = (record.value is None and latest_by_both and not keep_deletes
                                 and record.key not in pinned)
            if superseded or expired_tombstone:
                plan.records_removed += 1
                plan.tombstones_removed += record.value is None
                continue
            if record.value is None and latest_by_both and record.key not in pinned:
                plan.tombstones_kept_until_ms = max(plan.tombstones_kept_until_ms or 0,
                                                    segment.largest_timestamp_ms)
        kept.append(record)
    return kept


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


def _delete_snapshots_at_or_below(directory: Path, offset: int) -> None:
    """A producer-state snapshot at or below a marker about to go may hold its transaction
    open (see the module docstring): delete it first, durably."""
    doomed = [o for o in producer_snapshots.list_snapshots(directory) if o <= offset]
    for snapshot_offset in doomed:
        producer_snapshots.snapshot_path(directory, snapshot_offset).unlink(missing_ok=True)
    if doomed:
        logger.info("%s: deleted %d producer snapshots at or below offset %d, the last "
                    "transaction marker compaction removes", directory.name, len(doomed), offset)
        files.fsync_path(directory)


def _write_cleaned(log: Log, old: Segment, plan: _Plan, now_ms: int) -> Segment:
    """Build the cleaned segment aside, then rename its files over the old ones."""
    temporary = log.directory / TEMPORARY_DIRECTORY
    temporary.mkdir()
    with open(segment_file(temporary, old.base_offset, LOG_SUFFIX), "wb") as file:
        for batch in plan.batches:
            file.write(batch)
    building = Segment.open(temporary, old.base_offset, log.config)
    if building.recover(now_ms, contiguous=False):  # indexes, and a check of what we wrote
        raise OSError(f"the compacted copy of {old} does not read back whole")
    assert building.next_offset <= old.next_offset, (old, building)
    building.seal()
    os.fsync(building.fd)
    building.close()
    suffixes = [INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX]  # the .log last
    if plan.txn_entries != old.txn_index.entries:
        # First: entries go only with markers whose transaction left nothing on disk.
        suffixes.insert(0, TXN_INDEX_SUFFIX)
        if plan.txn_entries:
            segment_file(temporary, old.base_offset, TXN_INDEX_SUFFIX).write_bytes(
                encode_entries(plan.txn_entries))
    for suffix in suffixes:
        source = segment_file(temporary, old.base_offset, suffix)
        target = segment_file(log.directory, old.base_offset, suffix)
        if suffix == TXN_INDEX_SUFFIX and not plan.txn_entries:
            target.unlink(missing_ok=True)
            continue
        files.fsync_path(source)
        os.replace(source, target)
    files.fsync_path(log.directory)
    temporary.rmdir()
    cleaned = Segment.open(log.directory, old.base_offset, log.config)
    problem = cleaned.check_sealed()
    if problem is not None:  # an empty segment; or the disk lies: recover rather than trust
        if cleaned.size:
            logger.warning("%s: rebuilding the cleaned segment's indexes: %s", cleaned, problem)
        cleaned.recover(now_ms, contiguous=False)
        cleaned.seal()
    return cleaned
