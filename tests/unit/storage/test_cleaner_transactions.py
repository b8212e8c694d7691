"""Transaction-aware compaction on real files (issue 12): aborted batches go, committed
transactional and idempotent records are compacted by key, markers stay while their
transaction has records and then until ``delete.retention.ms``, the ``.txnindex`` keeps
exactly the entries of the ABORT markers still there, and what ``read_committed`` readers
(offset order) and ``__consumer_offsets``' loader (a transaction applied at its marker)
end up with is the same before and after.

The logs are written the way a partition writes them: batches appended to a ``Log``,
producer state updated by the real ``ProducerStateManager``, whose completed aborted
transactions become ``.txnindex`` entries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.partition.producer_state import ProducerStateManager
from oncelog.protocol.batches import TRANSACTIONAL_FLAG, iter_headers, parse_header
from oncelog.protocol.control_records import Marker, decode_marker, encode_marker
from oncelog.protocol.records import decode_records, make_batch
from oncelog.storage import AbortedTxn, Log, LogConfig
from oncelog.storage import cleaner as cleaner_module
from oncelog.storage import producer_snapshots
from oncelog.storage.cleaner import LogCleaner, clean
from tests.fake_clock import FakeClock

DAY_MS = 24 * 3600 * 1000


class Writer:
    """Appends like a partition: data batches with producer fields, markers, and the
    aborted-transaction index entries producer state yields."""

    def __init__(self, path: Path, clock: FakeClock, segment_bytes: int = 600) -> None:
        self.clock = clock
        self.log = Log.open(path / "topic-0",
                            LogConfig(segment_bytes=segment_bytes, compacted=True), clock)
        self.state = ProducerStateManager("topic-0")
        self.sequences: dict[int, int] = {}

    def _append(self, batch: bytes, marker: Marker | None = None):
        info = self.log.append(bytearray(batch), 0)
        completed = self.state.update(parse_header(batch), info.base_offset, self.clock.now,
                                      marker)
        self.state.on_high_watermark(self.log.log_end_offset)
        if completed is not None and completed.is_aborted:
            self.log.append_aborted_txn(AbortedTxn(
                completed.producer_id, completed.first_offset, completed.last_offset,
                completed.last_stable_offset))
        return info.base_offset

    def plain(self, pairs) -> int:
        return self._append(make_batch([v for _, v in pairs], keys=[k for k, _ in pairs],
                                       timestamp_ms=self.clock.now))

    def data(self, producer_id: int, pairs, transactional: bool = True) -> int:
        sequence = self.sequences.get(producer_id, 0)
        self.sequences[producer_id] = sequence + len(pairs)
        return self._append(make_batch(
            [v for _, v in pairs], keys=[k for k, _ in pairs], timestamp_ms=self.clock.now,
            producer_id=producer_id, producer_epoch=0, base_sequence=sequence,
            attributes=TRANSACTIONAL_FLAG if transactional else 0))

    def marker(self, producer_id: int, commit: bool, coordinator_epoch: int = 0,
               producer_epoch: int = 0) -> int:
        return self._append(encode_marker(producer_id, producer_epoch, commit,
                                          coordinator_epoch, self.clock.now),
                            Marker(commit, coordinator_epoch))

    def pad(self, count: int = 8) -> None:
        for _ in range(count):
            self.plain([(b"pad", b"x" * 100)])


def batches(log: Log):
    """(header, whole batch) of every batch, through the log's public read path."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = bytes(log.read(offset, 1 << 20))
        for position, header in iter_headers(data):
            out.append((header, data[position:position + header.size]))
            offset = header.next_offset
    return out


def read_uncommitted(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for header, batch in batches(log)
            if not header.is_control for r in decode_records(batch, header)]


def read_committed(log: Log, upper_bound: int | None = None):
    """What a ``read_committed`` consumer returns, with the Java consumer's algorithm over
    the aborted list a fetch carries: an aborted transaction's producer is skipped from its
    first offset until its ABORT marker."""
    end = log.log_end_offset if upper_bound is None else upper_bound
    pending = sorted(log.collect_aborted_transactions(log.log_start_offset, end),
                     key=lambda entry: entry.first_offset)
    aborted_producers: set[int] = set()
    out = []
    for header, batch in batches(log):
        if header.base_offset >= end:
            break
        while pending and pending[0].first_offset <= header.last_offset:
            aborted_producers.add(pending.pop(0).producer_id)
        if header.is_control:
            if not decode_marker(batch, header).commit:
                aborted_producers.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborted_producers:
            continue
        out += [(r.offset, r.key, r.value) for r in decode_records(batch, header)]
    return out


def loaded(log: Log) -> dict:
    """Key -> value as ``__consumer_offsets``' loader builds it: plain records at once, a
    transaction's records at its COMMIT marker, dropped at its ABORT."""
    state, pending = {}, {}
    for header, batch in batches(log):
        if header.is_control:
            records = pending.pop(header.producer_id, {})
            if decode_marker(batch, header).commit:
                state.update(records)
        elif header.is_transactional:
            pending.setdefault(header.producer_id, {}).update(
                (r.key, r.value) for r in decode_records(batch, header))
        else:
            state.update((r.key, r.value) for r in decode_records(batch, header))
    return {key: value for key, value in state.items() if value is not None}


def latest(view) -> dict:
    out = {}
    for _, key, value in view:
        out[key] = value
    return {key: value for key, value in out.items() if value is not None}


def markers(log: Log) -> dict[int, bool]:
    """Offset -> commit of every marker in the log."""
    return {h.base_offset: decode_marker(b, h).commit for h, b in batches(log) if h.is_control}


def assert_txn_index_matches_markers(log: Log) -> None:
    """Exactly one entry per ABORT marker in the log, in the marker's segment."""
    entries = log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset + 1)
    aborts = sorted(offset for offset, commit in markers(log).items() if not commit)
    assert sorted(entry.last_offset for entry in entries) == aborts
    for segment in log.sealed_segments() + [log._segments[-1]]:
        for entry in segment.txn_index.entries:
            assert segment.base_offset <= entry.last_offset < segment.next_offset


def write_mixed(writer: Writer) -> dict:
    """Producers 1 and 2 interleave committed and aborted transactions over repeated keys,
    with plain records between; each producer's last transaction commits. Returns the
    offsets of interest."""
    w = writer
    aborted_data = [w.data(1, [(b"a", b"1-aborted"), (b"b", b"1-aborted")])]
    w.plain([(b"a", b"plain-a0")])
    aborted_data.append(w.data(2, [(b"c", b"2-aborted")]))
    first_abort = w.marker(1, commit=False)
    w.pad()
    w.data(2, [(b"a", b"2-committed")])
    second_abort = w.marker(2, commit=False)  # producer 2's first transaction: aborted
    commit_1 = w.data(1, [(b"b", b"1-committed-old")])
    first_commit = w.marker(1, commit=True)
    w.pad()
    w.data(1, [(b"b", b"1-committed"), (b"d", b"1-committed")])
    w.marker(1, commit=True)
    w.data(2, [(b"c", b"2-committed"), (b"a", b"2-committed-new")])
    w.marker(2, commit=True)
    w.pad()
    w.plain([(b"tail", b"active")])
    return {"aborted_data": aborted_data, "first_abort": first_abort,
            "second_abort": second_abort, "first_commit": first_commit, "commit_1": commit_1}


def test_aborted_batches_go_committed_records_compact_and_markers_wait_for_the_horizon(
        tmp_path):
    clock = FakeClock()
    w = Writer(tmp_path, clock)
    offsets = write_mixed(w)
    log = w.log
    assert len(log.segment_base_offsets) >= 4
    committed_before, uncommitted_before = read_committed(log), read_uncommitted(log)
    loaded_before = loaded(log)
    aborted_records = {e for e in uncommitted_before if e not in committed_before}
    assert {value for _, _, value in aborted_records} == {b"1-aborted", b"2-aborted",
                                                          b"2-committed"}
    markers_before = markers(log)

    first = clean(log, clock.now, DAY_MS)

    committed_after, uncommitted_after = read_committed(log), read_uncommitted(log)
    # Aborted records are physically gone; no offset changed; nothing new appeared.
    assert not aborted_records & set(uncommitted_after)
    assert set(uncommitted_after) <= set(uncommitted_before)
    assert first.aborted_batches_removed == 3 and first.markers_removed == 0
    # Committed records: compacted by key, the latest value of every key is what it was.
    assert set(committed_after) <= set(committed_before)
    assert (offsets["commit_1"], b"b", b"1-committed-old") not in committed_after
    assert latest(committed_after) == latest(committed_before)
    assert loaded(log) == loaded_before
    # Within delete.retention.ms every marker stays, and so do the index entries.
    assert markers(log) == markers_before
    assert_txn_index_matches_markers(log)
    assert first.next_tombstone_expiry_ms is not None

    clock.now += DAY_MS + 1
    second = clean(log, clock.now, DAY_MS)

    # Past the horizon, the markers whose transaction left nothing go, with their entries;
    # each producer's last marker stays (producer state), as do markers of transactions
    # that still hold the latest value of a key.
    remaining = markers(log)
    assert offsets["first_abort"] not in remaining and offsets["second_abort"] not in remaining
    assert offsets["first_commit"] not in remaining
    assert second.markers_removed == len(markers_before) - len(remaining) >= 3
    assert_txn_index_matches_markers(log)
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []
    assert read_committed(log) == committed_after == read_uncommitted(log)
    assert loaded(log) == loaded_before
    # The active segment and the log's ends never move.
    assert read_uncommitted(log)[-1] == uncommitted_before[-1]
    assert log.log_start_offset == 0 and log.log_end_offset == uncommitted_before[-1][0] + 1

    # A reopened log (recovery) reads the same; another pass changes nothing.
    end = log.log_end_offset
    log.close()
    reopened = Log.open(tmp_path / "topic-0", LogConfig(segment_bytes=600, compacted=True), clock)
    assert read_uncommitted(reopened) == committed_after and reopened.log_end_offset == end
    assert clean(reopened, clock.now, DAY_MS).segments_rewritten == 0
    reopened.close()


def test_a_marker_stays_while_its_transaction_holds_a_live_record(tmp_path):
    clock = FakeClock()
    w = Writer(tmp_path, clock)
    w.data(1, [(b"keep", b"committed")])
    commit = w.marker(1, commit=True)
    w.data(1, [(b"other", b"x")])  # producer 1's later batches: its first marker is not
    w.marker(1, commit=True)       # its last control batch
    w.pad(12)
    clock.now += 2 * DAY_MS
    clean(w.log, clock.now, DAY_MS)
    assert commit in markers(w.log)
    assert (0, b"keep", b"committed") in read_committed(w.log)

    cleaner = LogCleaner()
    cleaner.maybe_clean(w.log, clock.now, DAY_MS)
    assert cleaner.maybe_clean(w.log, clock.now, DAY_MS) is None  # no pass due for it

    w.plain([(b"keep", b"newer")])  # supersedes it; once sealed and cleaned, then the marker
    w.pad(12)
    cleaner.maybe_clean(w.log, clock.now, DAY_MS)
    assert (0, b"keep", b"committed") not in read_uncommitted(w.log)
    assert commit in markers(w.log)  # its record went in this pass: the marker in the next
    result = cleaner.maybe_clean(w.log, clock.now, DAY_MS)  # due at once
    assert commit not in markers(w.log) and result.markers_removed == 1
    assert cleaner.maybe_clean(w.log, clock.now, DAY_MS) is None


def test_nothing_at_or_above_the_upper_bound_is_cleaned_or_supersedes(tmp_path):
    """An open transaction (the LSO at its first offset) keeps its segment and every later
    one out of the pass, and its records do not supersede earlier ones: it may abort."""
    clock = FakeClock()
    w = Writer(tmp_path, clock)
    w.plain([(b"k", b"old")])
    w.plain([(b"k", b"committed")])
    w.pad(12)
    lso = w.data(1, [(b"k", b"open")])  # open: no marker yet
    w.pad(24)
    assert len(w.log.segment_base_offsets) >= 4
    before = read_uncommitted(w.log)
    clean(w.log, clock.now + 2 * DAY_MS, DAY_MS, upper_bound_offset=lso)
    after = read_uncommitted(w.log)
    assert (1, b"k", b"committed") in after and (0, b"k", b"old") not in after
    assert [e for e in after if e[0] >= lso] == [e for e in before if e[0] >= lso]
    assert (lso, b"k", b"open") in after


def test_a_transaction_applied_at_its_marker_keeps_what_the_offsets_loader_sees(tmp_path):
    """A plain record written between a transaction's record and its COMMIT marker is the
    latest by offset, but the loader of ``__consumer_offsets`` applies the transaction at
    its marker, after it: both records stay, so both readers end as before."""
    clock = FakeClock()
    w = Writer(tmp_path, clock)
    w.data(1, [(b"g", b"in-transaction")])
    w.plain([(b"g", b"plain-between")])
    w.marker(1, commit=True)
    w.data(1, [(b"z", b"last")])
    w.marker(1, commit=True)
    w.pad(12)
    before_loaded, before_committed = loaded(w.log), latest(read_committed(w.log))
    clean(w.log, clock.now + 2 * DAY_MS, DAY_MS)
    assert loaded(w.log) == before_loaded and before_loaded[b"g"] == b"in-transaction"
    assert latest(read_committed(w.log)) == before_committed
    assert before_committed[b"g"] == b"plain-between"


def test_transactions_whose_markers_are_not_cleanable_keep_their_records(tmp_path):
    """Two committed transactions write the same key; an open third one holds the LSO
    before their markers, so which applies last (COMMIT order) is unknown to the pass:
    both records stay, and the offsets loader still ends with the earlier one."""
    clock = FakeClock()
    w = Writer(tmp_path, clock)
    w.data(1, [(b"g", b"from-1")])
    w.data(2, [(b"g", b"from-2")])
    w.pad(12)
    lso = w.data(3, [(b"x", b"open")])
    w.marker(2, commit=True)
    w.marker(1, commit=True)  # producer 1's transaction applies last
    w.marker(3, commit=True)
    w.data(1, [(b"y", b"later")])  # the producers' last batches lie past the bound
    w.marker(1, commit=True)
    w.data(2, [(b"y", b"later")])
    w.marker(2, commit=True)
    w.pad(12)
    before_loaded, before_committed = loaded(w.log), latest(read_committed(w.log))
    assert before_loaded[b"g"] == b"from-1" and before_committed[b"g"] == b"from-2"
    clean(w.log, clock.now + 2 * DAY_MS, DAY_MS, upper_bound_offset=lso)
    assert loaded(w.log) == before_loaded
    assert latest(read_committed(w.log)) == before_committed


def test_a_tombstone_stays_while_an_older_record_of_its_key_is_kept_for_its_producer(
        tmp_path):
    clock = FakeClock()
    w = Writer(tmp_path, clock)
    w.data(1, [(b"a", b"committed")])  # producer 1's last data batch: kept whole
    w.marker(1, commit=True)
    w.plain([(b"a", None)])
    w.pad(12)
    clean(w.log, clock.now + 2 * DAY_MS, DAY_MS)
    assert (2, b"a", None) in read_committed(w.log)
    assert b"a" not in latest(read_committed(w.log)) and b"a" not in loaded(w.log)


def test_idempotent_batches_compact_but_each_producers_last_batch_stays_whole(tmp_path):
    clock = FakeClock()
    w = Writer(tmp_path, clock)
    for i in range(3):
        w.data(7, [(b"p", b"v%d" % i), (b"q", b"v%d" % i)], transactional=False)
    w.plain([(b"p", b"plain"), (b"q", b"plain")])
    w.pad(12)
    last = [h for h, _ in batches(w.log) if h.producer_id == 7][-1]
    clean(w.log, clock.now, DAY_MS)
    kept = [h for h, _ in batches(w.log) if h.producer_id == 7]
    assert kept == [last]  # byte-identical header: sequence range, epoch, record count
    records = set(read_uncommitted(w.log))
    assert {(4, b"p", b"v2"), (5, b"q", b"v2")} <= records  # superseded, but kept whole
    assert (0, b"p", b"v0") not in records and (2, b"p", b"v1") not in records


def test_producer_state_replayed_from_a_cleaned_log_matches(tmp_path):
    """Recovery may replay cleaned segments: each producer ends with the same epoch, last
    sequence and coordinator epoch, and no transaction is left open."""
    clock = FakeClock()
    w = Writer(tmp_path, clock)
    write_mixed(w)
    w.data(3, [(b"a", b"3-aborted")])
    w.marker(3, commit=False, coordinator_epoch=4)
    # Producer 1 fenced: the coordinator aborts with a bumped epoch; no data goes with this
    # last marker, so only the rule that keeps each producer's last marker keeps it.
    w.marker(1, commit=False, coordinator_epoch=5, producer_epoch=1)
    w.pad(12)
    for _ in range(2):
        clock.now += 2 * DAY_MS
        clean(w.log, clock.now, DAY_MS)

    replayed = ProducerStateManager("replayed")
    for header, batch in batches(w.log):
        marker = decode_marker(batch, header) if header.is_control else None
        replayed.replay(header, clock.now, marker)
    for producer_id, entry in w.state.producers.items():
        got = replayed.producers[producer_id]
        assert (got.producer_epoch, got.last_sequence, got.coordinator_epoch) == (
            entry.producer_epoch, entry.last_sequence, entry.coordinator_epoch), producer_id
    assert replayed.ongoing_transactions == {}


def test_snapshots_that_may_hold_a_removed_markers_transaction_open_are_deleted(tmp_path):
    clock = FakeClock()
    w = Writer(tmp_path, clock)
    w.data(1, [(b"a", b"aborted")])
    directory = w.log.directory
    producer_snapshots.write_snapshot(directory, 1, w.state.to_json())  # transaction open
    abort = w.marker(1, commit=False)
    w.data(1, [(b"b", b"x")])
    w.marker(1, commit=True)
    w.pad(12)
    producer_snapshots.write_snapshot(directory, w.log.log_end_offset, w.state.to_json())
    clock.now += 2 * DAY_MS
    clean(w.log, clock.now, DAY_MS)  # the aborted batch goes
    assert producer_snapshots.list_snapshots(directory) == [1, w.log.log_end_offset]
    clean(w.log, clock.now, DAY_MS)  # then its marker, after the snapshot that held it open
    assert abort not in markers(w.log)
    assert producer_snapshots.list_snapshots(directory) == [w.log.log_end_offset]


@pytest.mark.parametrize("crash_at", [".txnindex", ".index", ".log"])
def test_a_crash_mid_swap_never_hides_a_committed_record_or_shows_an_aborted_one(
        tmp_path, monkeypatch, crash_at):
    """The pass that removes an ABORT marker (its transaction's batches went in an earlier
    pass) dies at one of the renames. The ``.txnindex`` goes first: an entry whose marker
    is gone would make consumers skip the producer's later committed batches. After
    reopening, readers see exactly what they saw before; the next pass finishes the job."""
    clock = FakeClock()
    w = Writer(tmp_path, clock, segment_bytes=100_000)
    w.data(1, [(b"a", b"aborted")])
    w.data(2, [(b"a", b"committed")])
    w.marker(1, commit=False)
    w.marker(2, commit=True)
    w.data(1, [(b"b", b"1")])
    w.marker(1, commit=True)
    w.data(2, [(b"c", b"2")])
    w.marker(2, commit=True)
    # the next append rolls: all above is sealed
    w.log.config = LogConfig(segment_bytes=100, compacted=True)
    w.plain([(b"tail", b"x")])
    assert len(w.log.segment_base_offsets) == 2
    clock.now += 2 * DAY_MS
    clean(w.log, clock.now, DAY_MS)  # the aborted batch goes; its marker is due next pass
    visible = read_committed(w.log)
    assert (4, b"b", b"1") in visible
    real_replace, real_unlink = os.replace, Path.unlink

    def crash_on_replace(source, target):
        if str(target).endswith(crash_at):
            raise OSError("simulated crash")
        real_replace(source, target)

    def crash_on_unlink(path, missing_ok=False):
        if str(path).endswith(crash_at):
            raise OSError("simulated crash")
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(cleaner_module.os, "replace", crash_on_replace)
    monkeypatch.setattr(Path, "unlink", crash_on_unlink)
    with pytest.raises(OSError):
        clean(w.log, clock.now, DAY_MS)
    monkeypatch.undo()
    w.log.close()
    log = Log.open(tmp_path / "topic-0", LogConfig(segment_bytes=100, compacted=True), clock)
    assert read_committed(log) == visible
    assert 2 in markers(log)  # the ABORT marker, with or without its entry: both harmless
    assert clean(log, clock.now, DAY_MS).markers_removed == 1
    assert read_committed(log) == visible == read_uncommitted(log)
    assert_txn_index_matches_markers(log)
    log.close()


def test_the_cleaner_runs_again_when_the_upper_bound_lets_more_segments_in(tmp_path):
    clock = FakeClock()
    w = Writer(tmp_path, clock)
    w.plain([(b"k", b"old")])
    w.pad(12)
    w.plain([(b"k", b"new")])
    w.pad(24)
    cleaner = LogCleaner()
    nothing = cleaner.maybe_clean(w.log, clock.now, DAY_MS, upper_bound_offset=1)
    assert nothing is not None and nothing.segments_rewritten == 0  # no segment below 1
    assert (0, b"k", b"old") in read_uncommitted(w.log)
    assert cleaner.maybe_clean(w.log, clock.now, DAY_MS, upper_bound_offset=1) is None
    result = cleaner.maybe_clean(w.log, clock.now, DAY_MS, upper_bound_offset=w.log.log_end_offset)
    assert result is not None and (0, b"k", b"old") not in read_uncommitted(w.log)


_OPS = st.lists(st.one_of(
    st.tuples(st.just("plain"), st.sampled_from([b"a", b"b", b"c"]),
              st.one_of(st.none(), st.binary(min_size=1, max_size=8))),
    st.tuples(st.just("txn"), st.sampled_from([1, 2]),
              st.tuples(st.sampled_from([b"a", b"b", b"c"]), st.booleans())),
    st.tuples(st.just("end"), st.sampled_from([1, 2]), st.booleans()),
    st.tuples(st.just("pad"), st.just(0), st.just(0)),
), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(_OPS)
def test_model_cleaning_never_changes_what_either_reader_ends_with(tmp_path_factory, ops):
    """Random interleavings of plain records, transactions of two producers and their
    markers, cleaned twice past every horizon: both readers end with what they had, the
    index matches the markers, no aborted record remains unless its batch is the last of its
    producer, and each producer's state replays the same."""
    path = tmp_path_factory.mktemp("txn-model")
    clock = FakeClock()
    w = Writer(path, clock, segment_bytes=300)
    open_txn = set()
    for op, arg, value in ops:
        if op == "plain":
            w.plain([(arg, value)])
        elif op == "txn":
            key, tombstone = value
            w.data(arg, [(key, None if tombstone else b"%d@%d" % (arg, w.log.log_end_offset))])
            open_txn.add(arg)
        elif op == "end" and arg in open_txn:
            w.marker(arg, commit=value)
            open_txn.discard(arg)
        elif op == "pad":
            w.pad(3)
    for producer_id in sorted(open_txn):
        w.marker(producer_id, commit=True)
    w.pad(3)
    before_committed, before_loaded = latest(read_committed(w.log)), loaded(w.log)
    aborted = set(read_uncommitted(w.log)) - set(read_committed(w.log))
    for _ in range(3):
        clock.now += 2 * DAY_MS
        clean(w.log, clock.now, DAY_MS)
    assert latest(read_committed(w.log)) == before_committed
    assert loaded(w.log) == before_loaded
    assert_txn_index_matches_markers(w.log)
    after = batches(w.log)
    last_data = {h.producer_id: h for h, _ in after if h.has_producer_id and not h.is_control}
    for offset, _, _ in aborted & set(read_uncommitted(w.log)):
        holder = next(h for h, _ in after if h.base_offset <= offset <= h.last_offset)
        assert holder == last_data[holder.producer_id]  # kept whole for producer state
    w.log.close()
