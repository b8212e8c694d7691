"""The aborted-transaction index (``.txnindex``) on real files: Kafka's 34-byte entries, one
file per segment, cut by truncation, deleted by retention, answered across segments, and
the log's side of recovery (what it marks for rebuilding, what it keeps)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from oncelog.protocol.control_records import encode_marker
from oncelog.protocol.records import make_batch
from oncelog.storage import AbortedTxn, FileRegion, Log, LogConfig
from oncelog.storage.txn_index import ENTRY_SIZE, TransactionIndex, decode_entries
from tests.fake_clock import FakeClock

DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def open_log(path: Path, clock: FakeClock, **settings) -> Log:
    return Log.open(path / "topic-0", LogConfig(**settings), clock)


def data(log: Log, *values: bytes, pid: int = 1, seq: int = 0, timestamp_ms: int = 0) -> int:
    """A transactional batch; returns its base offset."""
    return log.append(bytearray(make_batch(list(values), producer_id=pid, producer_epoch=0,
                                           base_sequence=seq, attributes=0x10,
                                           timestamp_ms=timestamp_ms)), 0).base_offset


def abort(log: Log, pid: int, first_offset: int, stable: int | None = None) -> AbortedTxn:
    """Append an ABORT marker and index it, as the partition does."""
    offset = log.append(bytearray(encode_marker(pid, 0, False, 0, 0)), 0).base_offset
    entry = AbortedTxn(pid, first_offset, offset, offset + 1 if stable is None else stable)
    log.append_aborted_txn(entry)
    return entry


def txn_files(log: Log) -> list[str]:
    return sorted(p.name for p in log.directory.iterdir() if p.name.endswith(".txnindex"))


# -- one index file ----------------------------------------------------------------------------

def test_entries_are_kafkas_34_byte_layout(tmp_path):
    index = TransactionIndex(tmp_path / f"{0:020d}.txnindex")
    index.append(AbortedTxn(producer_id=7, first_offset=3, last_offset=10, last_stable_offset=4))
    index.append(AbortedTxn(2**40, 11, 12, 13))
    raw = index.path.read_bytes()
    assert ENTRY_SIZE == 34 and len(raw) == 2 * 34
    # version int16 | producer id int64 | first offset | last offset | last stable offset
    assert raw[:34] == struct.pack(">hqqqq", 0, 7, 3, 10, 4)
    assert raw[34:] == struct.pack(">hqqqq", 0, 2**40, 11, 12, 13)
    assert TransactionIndex(index.path).entries == [AbortedTxn(7, 3, 10, 4),
                                                    AbortedTxn(2**40, 11, 12, 13)]


def test_a_missing_file_means_no_aborted_transaction(tmp_path):
    index = TransactionIndex(tmp_path / "none.txnindex")
    assert index.entries == [] and index.collect(0, 100) == ([], False)
    index.truncate_to(0)
    assert not index.path.exists()


def test_entries_must_follow_each_other(tmp_path):
    index = TransactionIndex(tmp_path / "x.txnindex")
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 0, 5, 6))


def test_a_torn_last_entry_is_dropped_and_the_file_trimmed(tmp_path):
    path = tmp_path / "x.txnindex"
    path.write_bytes(AbortedTxn(1, 0, 5, 6).to_bytes() + b"\x00\x00\x00")
    index = TransactionIndex(path)
    assert index.entries == [AbortedTxn(1, 0, 5, 6)]
    assert path.stat().st_size == 34
    index.append(AbortedTxn(2, 6, 8, 9))  # lands after a whole entry
    assert decode_entries(path.read_bytes())[-1] == AbortedTxn(2, 6, 8, 9)


def test_truncate_and_replace(tmp_path):
    index = TransactionIndex(tmp_path / "x.txnindex")
    for entry in (AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 1, 7, 8), AbortedTxn(3, 8, 9, 10)):
        index.append(entry)
    index.truncate_to(7)  # markers at 7 and later were cut off
    assert index.entries == [AbortedTxn(1, 0, 5, 6)]
    assert TransactionIndex(index.path).entries == [AbortedTxn(1, 0, 5, 6)]
    index.replace([AbortedTxn(4, 2, 9, 10), AbortedTxn(5, 1, 3, 4)])
    assert TransactionIndex(index.path).entries == [AbortedTxn(5, 1, 3, 4),
                                                    AbortedTxn(4, 2, 9, 10)]
    index.truncate_to(0)
    assert not index.path.exists()


def test_collect_answers_overlapping_entries_and_stops_at_the_bound(tmp_path):
    index = TransactionIndex(tmp_path / "x.txnindex")
    index.append(AbortedTxn(1, 0, 4, 2))    # overlaps [3, 10)
    index.append(AbortedTxn(2, 2, 6, 7))    # overlaps
    index.append(AbortedTxn(3, 10, 12, 13))  # begins at the bound: no; and LSO >= bound: stop
    index.append(AbortedTxn(4, 1, 14, 15))  # would overlap, but the search is complete
    found, complete = index.collect(3, 10)
    assert (found, complete) == ([AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 6, 7)], True)
    assert index.collect(5, 10) == ([AbortedTxn(2, 2, 6, 7)], True)  # marker 4 < fetch offset
    assert index.collect(0, 100)[1] is False


# -- the log's indexes -------------------------------------------------------------------------

def test_each_segment_indexes_the_aborts_whose_marker_it_holds(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300)
    first = data(log, b"a", b"b", pid=1)
    while len(log.segment_base_offsets) < 2:
        data(log, b"filler", pid=9, seq=log.log_end_offset)
    entry = abort(log, 1, first)  # marker in the second segment, transaction began in the first
    bases = log.segment_base_offsets
    assert txn_files(log) == [f"{bases[1]:020d}.txnindex"]
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [entry]
    assert log.collect_aborted_transactions(first + 1, entry.last_offset) == [entry]
    assert log.collect_aborted_transactions(entry.last_offset + 1, log.log_end_offset) == []
    assert log.collect_aborted_transactions(0, first) == []  # begins at the bound


def test_collect_looks_in_later_segments_until_an_entry_says_it_may_stop(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=250)
    a = data(log, b"a", pid=1)
    b = data(log, b"b", pid=2)
    entry_a = abort(log, 1, a, stable=b)  # producer 2's transaction was still open
    while len(log.segment_base_offsets) < 3:
        data(log, b"filler", pid=9, seq=log.log_end_offset)
    entry_b = abort(log, 2, b)  # two segments later
    assert log.collect_aborted_transactions(0, b + 1) == [entry_a, entry_b]
    # entry_a's LSO (b) reaches a bound of b: nothing aborted later can begin before b
    assert log.collect_aborted_transactions(0, b) == [entry_a]


def test_truncation_cuts_entries_past_the_new_end(tmp_path, clock):
    log = open_log(tmp_path, clock)
    one = abort(log, 1, data(log, b"x", pid=1))
    two = abort(log, 2, data(log, b"y", pid=2))
    log.truncate_to(two.last_offset)
    assert log.collect_aborted_transactions(0, 100) == [one]
    assert decode_entries((log.directory / f"{0:020d}.txnindex").read_bytes()) == [one]
    log.truncate_to(one.last_offset)
    assert txn_files(log) == []


def test_retention_deletes_a_segments_index_with_it(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300, retention_ms=DAY_MS)
    entry = abort(log, 1, data(log, b"x", pid=1, timestamp_ms=clock.now))
    while len(log.segment_base_offsets) < 3:
        data(log, b"filler", pid=9, seq=log.log_end_offset, timestamp_ms=clock.now)
    assert txn_files(log) == [f"{0:020d}.txnindex"]
    clock.now += 2 * DAY_MS
    assert log.apply_retention() >= 1
    assert txn_files(log) == []
    assert entry not in log.collect_aborted_transactions(log.log_start_offset, 100)


def test_reset_and_orphans(tmp_path, clock):
    log = open_log(tmp_path, clock)
    abort(log, 1, data(log, b"x", pid=1))
    log.close()
    orphan = log.directory / f"{500:020d}.txnindex"
    orphan.write_bytes(AbortedTxn(1, 500, 501, 502).to_bytes())
    log = open_log(tmp_path, clock)
    assert not orphan.exists()  # no segment 500: a deletion cut short
    log.reset_to(10)
    assert txn_files(log) == [] and log.collect_aborted_transactions(10, 20) == []


def test_open_marks_the_active_segment_for_rebuilding_and_keeps_the_files(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300)
    sealed = abort(log, 1, data(log, b"x", pid=1))
    while len(log.segment_base_offsets) < 2:
        data(log, b"filler", pid=9, seq=log.log_end_offset)
    active = abort(log, 2, data(log, b"y", pid=2))
    bases = log.segment_base_offsets
    log.close()

    log = open_log(tmp_path, clock, segment_bytes=300)
    assert log.txn_index_rebuild_from == bases[-1]
    assert log.collect_aborted_transactions(0, 100) == [sealed, active]  # until rebuilt
    log.rebuild_txn_indexes([])  # the replay found nothing there (say)
    assert log.txn_index_rebuild_from is None
    assert log.collect_aborted_transactions(0, 100) == [sealed]  # sealed ones are trusted
    assert txn_files(log) == [f"{bases[0]:020d}.txnindex"]
    rebuilt = AbortedTxn(2, active.first_offset, active.last_offset, 77)
    log.txn_index_rebuild_from = bases[-1]
    log.rebuild_txn_indexes([rebuilt])
    assert log.collect_aborted_transactions(0, 100) == [sealed, rebuilt]


def test_a_rescanned_sealed_segment_is_rebuilt_too(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300)
    abort(log, 1, data(log, b"x", pid=1))
    while len(log.segment_base_offsets) < 3:
        data(log, b"filler", pid=9, seq=log.log_end_offset)
    bases = log.segment_base_offsets
    log.close()
    (log.directory / f"{bases[1]:020d}.index").unlink()  # forces a rescan of segment 2
    log = open_log(tmp_path, clock, segment_bytes=300)
    assert log.txn_index_rebuild_from == bases[1]


def test_a_region_knows_the_offset_after_its_last_batch(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for _ in range(5):
        log.append(bytearray(make_batch([b"a", b"b"])), 0)  # batches at 0, 2, 4, 6, 8
    region = log.read(2, 1 << 20, max_offset=7, region_min_bytes=1)
    assert isinstance(region, FileRegion) and region.next_offset == 8
    oversized = log.read(0, 1, region_min_bytes=1)  # KIP-74: one batch past max_bytes
    assert oversized.next_offset == 2


def test_on_roll_is_told_the_new_segments_base_before_anything_is_written(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=200)
    rolls = []
    log.on_roll = lambda base: rolls.append((base, log.log_end_offset))
    while len(log.segment_base_offsets) < 3:
        log.append(bytearray(make_batch([b"x" * 50])), 0)
    assert rolls == [(base, base) for base in log.segment_base_offsets[1:]]
