"""Log compaction on real files: the latest record per key survives, offsets never change,
segments stay contiguous, tombstones go after ``delete.retention.ms``, and a reopened log
(recovery included) reads the same."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.protocol.batches import TRANSACTIONAL_FLAG, iter_headers, parse_header
from oncelog.protocol.control_records import encode_marker
from oncelog.protocol.records import GZIP, decode_records, make_batch
from oncelog.storage import AbortedTxn, Log, LogConfig
from oncelog.storage.cleaner import TEMPORARY_DIRECTORY, LogCleaner, clean
from oncelog.storage.segment import INDEX_SUFFIX, segment_file
from tests.fake_clock import START_MS, FakeClock

DAY_MS = 24 * 3600 * 1000

def open_log(path: Path, clock: FakeClock, segment_bytes: int = 1024) -> Log:
    return Log.open(path / "__consumer_offsets-0",
                    LogConfig(segment_bytes=segment_bytes, compacted=True), clock)


def append(log: Log, clock: FakeClock, pairs: list[tuple[bytes | None, bytes | None]],
           **kwargs) -> None:
    log.append(bytearray(make_batch([v for _, v in pairs], keys=[k for k, _ in pairs],
                                    timestamp_ms=clock.now, **kwargs)), 0)


def entries(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, read through the log's public read path."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = bytes(log.read(offset, 1 << 20))
        for position, header in iter_headers(data):
            out += [(r.offset, r.key, r.value)
                    for r in decode_records(data[position:position + header.size], header)]
            offset = header.next_offset
    return out


def batch_ranges(log: Log) -> list[tuple[int, int, int]]:
    """(base offset, last offset, records) of every batch, segment by segment."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = bytes(log.read(offset, 1 << 20))
        for _, header in iter_headers(data):
            out.append((header.base_offset, header.last_offset, header.records_count))
            offset = header.next_offset
    return out


def test_only_the_latest_record_of_each_key_survives_in_sealed_segments(tmp_path):
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    for round_ in range(30):
        append(log, clock, [(b"a", b"a%d" % round_), (b"b", b"b%d" % round_)])
    append(log, clock, [(b"c", b"c-first")])
    sealed_end = log.segment_base_offsets[-1]
    assert len(log.segment_base_offsets) > 2
    before = entries(log)

    result = clean(log, clock.now, DAY_MS)

    after = entries(log)
    assert result.segments_rewritten >= 1 and result.records_removed > 0
    # Sealed part: one record per key (the latest there); the active segment untouched.
    latest_sealed = {}
    for offset, key, value in before:
        if offset < sealed_end:
            latest_sealed[key] = (offset, key, value)
    assert [e for e in after if e[0] < sealed_end] == sorted(latest_sealed.values())
    assert [e for e in after if e[0] >= sealed_end] == [e for e in before if e[0] >= sealed_end]
    # Offsets are what they were; the log's ends too.
    assert {e[0] for e in after} <= {e[0] for e in before}
    assert log.log_end_offset == len(before) and log.log_start_offset == 0


def test_dropped_batches_leave_gaps_that_reads_step_over(tmp_path):
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    for i in range(40):
        append(log, clock, [(b"k", b"v%d" % i)])  # one record per batch, all the same key
    end = log.log_end_offset
    sealed_end = log.segment_base_offsets[-1]
    clean(log, clock.now, DAY_MS)
    assert [e for e in entries(log) if e[0] < sealed_end] == [
        (sealed_end - 1, b"k", b"v%d" % (sealed_end - 1))]
    assert all(count > 0 for _, _, count in batch_ranges(log))  # no empty batches
    # A read from a vanished offset gets the next batch that is still there.
    first = parse_header(bytes(log.read(0, 1 << 20)))
    assert first.base_offset == sealed_end - 1
    assert (log.log_start_offset, log.log_end_offset) == (0, end)
    assert log.segment_base_offsets[0] == 0  # emptied segments keep their place


def test_a_partly_kept_batch_keeps_its_offset_range_compression_and_timestamps(tmp_path):
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    log.append(bytearray(make_batch([b"1", b"2", b"3"], keys=[b"x", b"y", b"z"],
                                    timestamps=[START_MS, START_MS + 5, START_MS + 9],
                                    codec=GZIP)), 0)
    append(log, clock, [(b"y", b"2-new")])
    log.append(bytearray(make_batch([b"pad" * 400], keys=[b"pad"])), 0)  # seal both
    log.append(bytearray(make_batch([b"pad" * 400], keys=[b"pad"])), 0)
    clean(log, clock.now, DAY_MS)
    data = bytes(log.read(0, 1 << 20))
    header = parse_header(data)
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (0, 2, 2)
    assert header.compression == GZIP and header.max_timestamp == START_MS + 9
    kept = decode_records(data[:header.size], header)
    assert [(r.offset, r.key, r.timestamp) for r in kept] == [
        (0, b"x", START_MS), (2, b"z", START_MS + 9)]


def test_tombstones_are_kept_until_delete_retention_then_removed(tmp_path):
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    append(log, clock, [(b"gone", b"v")])
    append(log, clock, [(b"gone", None)])
    for _ in range(20):
        append(log, clock, [(b"other", b"x" * 100)])
    cleaner = LogCleaner()

    first = cleaner.maybe_clean(log, clock.now, DAY_MS)
    assert (1, b"gone", None) in entries(log)  # the tombstone stays for delete.retention.ms
    assert first.next_tombstone_expiry_ms == START_MS + DAY_MS
    assert cleaner.maybe_clean(log, clock.now + 1000, DAY_MS) is None  # nothing to do yet

    clock.now += DAY_MS + 1
    second = cleaner.maybe_clean(log, clock.now, DAY_MS)
    assert second.tombstones_removed == 1
    assert all(key != b"gone" for _, key, _ in entries(log))


def test_records_without_keys_and_a_producers_last_batch_are_left_alone(tmp_path):
    """The idempotent batch is its producer's last: kept whole so that replaying the log
    rebuilds the producer's sequence state (test_cleaner_transactions has the rest)."""
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    append(log, clock, [(None, b"no key")])
    append(log, clock, [(b"p", b"old")], producer_id=7, producer_epoch=0, base_sequence=0)
    for _ in range(20):
        append(log, clock, [(b"p", b"x" * 100)])
    clean(log, clock.now, DAY_MS)
    kept = entries(log)
    assert (0, None, b"no key") in kept and (1, b"p", b"old") in kept


def test_a_producers_last_batches_and_their_txn_index_entry_survive_compaction(tmp_path):
    """An aborted batch that is its producer's last data batch, and the ABORT marker that is
    its last control batch, stay byte for byte (producer state is rebuilt from them), so
    the rewritten segment's ``.txnindex`` keeps the entry that hides the batch from
    ``read_committed`` readers. Other aborted batches go: see test_cleaner_transactions."""
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    append(log, clock, [(b"k", b"aborted")], producer_id=7, producer_epoch=0, base_sequence=0,
           attributes=TRANSACTIONAL_FLAG)
    marker = log.append(bytearray(encode_marker(7, 0, False, 0, clock.now)), 0).base_offset
    log.append_aborted_txn(AbortedTxn(7, 0, marker, marker + 1))
    for i in range(20):
        append(log, clock, [(b"k", b"v%d" % i)])  # supersedes the aborted record's key
    first = log.sealed_segments()[0]
    before = os.pread(first.fd, 2 * 200, 0)
    result = clean(log, clock.now, DAY_MS)
    assert result.segments_rewritten >= 1
    kept = entries(log)
    assert (0, b"k", b"aborted") in kept and any(offset == marker for offset, _, _ in kept)
    after = bytes(log.read(0, 1 << 20))
    headers = [h for _, h in iter_headers(after)][:2]
    assert [h.is_transactional for h in headers] == [True, True]
    assert after[:headers[0].size + headers[1].size] == before[:headers[0].size
                                                               + headers[1].size]
    assert log.collect_aborted_transactions(0, 100) == [AbortedTxn(7, 0, marker, marker + 1)]


def test_a_cleaned_log_reopens_and_recovers_to_the_same_records(tmp_path):
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    for round_ in range(25):
        append(log, clock, [(b"k%d" % (round_ % 4), b"v%d" % round_)])
    clean(log, clock.now, DAY_MS)
    cleaned = entries(log)
    end = log.log_end_offset
    first = log.sealed_segments()[0].base_offset
    log.close()

    reopened = open_log(tmp_path, clock)
    assert entries(reopened) == cleaned and reopened.log_end_offset == end
    reopened.close()
    # Index files lost (a crash between the renames): recovery rebuilds them from the log.
    os.unlink(segment_file(tmp_path / "__consumer_offsets-0", first, INDEX_SUFFIX))
    (tmp_path / "__consumer_offsets-0" / TEMPORARY_DIRECTORY).mkdir()  # a pass cut short
    recovered = open_log(tmp_path, clock)
    assert entries(recovered) == cleaned
    clean(recovered, clock.now, DAY_MS)
    assert not (tmp_path / "__consumer_offsets-0" / TEMPORARY_DIRECTORY).exists()
    assert entries(recovered) == cleaned  # a second pass changes nothing


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c", b"d"]),
                          st.one_of(st.none(), st.binary(min_size=1, max_size=200))),
                min_size=1, max_size=60))
def test_compaction_keeps_exactly_the_latest_value_of_every_key(tmp_path_factory, writes):
    """Model: a dict of key -> latest value. After cleaning (tombstones expired), reading the
    log and applying records in order gives the same dict as applying every write did."""
    path = tmp_path_factory.mktemp("model")
    clock = FakeClock()
    log = open_log(path, clock, segment_bytes=300)
    model: dict[bytes, bytes | None] = {}
    for key, value in writes:
        append(log, clock, [(key, value)])
        model[key] = value
    clean(log, clock.now + 2 * DAY_MS, DAY_MS)
    replayed: dict[bytes, bytes | None] = {}
    offsets = []
    for offset, key, value in entries(log):
        replayed[key] = value
        offsets.append(offset)
    assert {k: v for k, v in replayed.items() if v is not None} == {
        k: v for k, v in model.items() if v is not None}
    assert offsets == sorted(set(offsets)) and log.log_end_offset == len(writes)
    log.close()
