"""ProducerStateManager, Given/When/Then: replay batches to build state, check one batch,
assert the verdict. Hypothesis models check the dedup window against a plain list, and the
transactions' first unstable offset against a plain dict of open transactions."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from oncelog.partition.producer_state import (MAX_SEQUENCE, NUM_BATCHES_TO_RETAIN,
                                              CompletedTxn, ProducerStateManager,
                                              last_sequence)
from oncelog.protocol.batches import BatchHeader
from oncelog.protocol.control_records import Marker
from oncelog.protocol.errors import ErrorCode, KafkaError


def header(pid=1, epoch=0, seq=0, count=1, base_offset=0, timestamp=1000) -> BatchHeader:
    return BatchHeader(base_offset, 100, 0, 2, 0, 0, count - 1, timestamp, timestamp, pid,
                       epoch, seq, count)


def state_with(*batches: BatchHeader) -> ProducerStateManager:
    state = ProducerStateManager("t-0")
    for batch in batches:
        state.replay(batch, now_ms=0)
    return state


def verdict(state, batch, empty=False):
    try:
        return state.check(batch, partition_is_empty=empty)
    except KafkaError as error:
        return error.code


def test_next_sequence_is_accepted_and_a_gap_is_not():
    state = state_with(header(seq=0, count=5))
    assert verdict(state, header(seq=5)) is None
    assert verdict(state, header(seq=6)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert verdict(state, header(seq=4)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_duplicate_returns_the_original_batch():
    state = state_with(header(seq=0, count=2, base_offset=10), header(seq=2, count=3,
                                                                      base_offset=40))
    original = verdict(state, header(seq=2, count=3))
    assert (original.first_offset, original.last_offset) == (40, 42)
    # Same first sequence but another length is not the same batch.
    assert verdict(state, header(seq=2, count=2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epochs():
    state = state_with(header(epoch=3, seq=0, count=2))
    assert verdict(state, header(epoch=2, seq=2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert verdict(state, header(epoch=4, seq=2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert verdict(state, header(epoch=4, seq=0)) is None


def test_unknown_producer():
    state = state_with()
    assert verdict(state, header(seq=9), empty=True) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert verdict(state, header(seq=0), empty=True) is None
    assert verdict(state, header(seq=9), empty=False) is None


def test_wrap_around():
    assert last_sequence(MAX_SEQUENCE - 1, 3) == 1
    state = state_with(header(seq=MAX_SEQUENCE - 1, count=2))
    assert verdict(state, header(seq=0)) is None
    assert verdict(state, header(seq=MAX_SEQUENCE)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_invalid_epoch_or_sequence_is_invalid_record():
    assert verdict(state_with(), header(epoch=-1)) == ErrorCode.INVALID_RECORD
    assert verdict(state_with(), header(seq=-1)) == ErrorCode.INVALID_RECORD


def test_expiry_and_json_round_trip():
    state = state_with(header(pid=1), header(pid=2))
    state.producers[2].last_update_ms = 5000
    copy = ProducerStateManager("t-0")
    copy.load_json(state.to_json())
    assert copy.to_json() == state.to_json()
    assert state.expire(now_ms=6000, expiration_ms=2000) == 1
    assert list(state.producers) == [2]


class DedupWindowModel(RuleBasedStateMachine):
    """Any retry of one of the last five batches is recognised; anything older, or any
    sequence that does not follow, is refused; the offsets returned are the originals."""

    def __init__(self):
        super().__init__()
        self.state = ProducerStateManager("t-0")
        self.written: list[tuple[int, int, int]] = []  # (first seq, count, base offset)
        self.next_sequence = 0
        self.next_offset = 0

    @rule(count=st.integers(1, 5))
    def append_next(self, count):
        batch = header(seq=self.next_sequence, count=count)
        assert verdict(self.state, batch) is None
        self.state.update(batch, self.next_offset, now_ms=0)
        self.written.append((self.next_sequence, count, self.next_offset))
        self.next_sequence += count
        self.next_offset += count

    @rule(back=st.integers(1, 8))
    def retry_old(self, back):
        if len(self.written) < back:
            return
        first, count, offset = self.written[-back]
        result = verdict(self.state, header(seq=first, count=count))
        if back <= NUM_BATCHES_TO_RETAIN:
            assert result.first_offset == offset
        else:
            assert result == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

    @rule(skip=st.integers(1, 50))
    def gap(self, skip):
        if self.written:
            assert verdict(self.state, header(seq=self.next_sequence + skip)) == \
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

    @invariant()
    def keeps_at_most_five(self):
        for entry in self.state.producers.values():
            assert len(entry.batches) <= NUM_BATCHES_TO_RETAIN


TestDedupWindow = DedupWindowModel.TestCase
TestDedupWindow.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


# -- transactions -------------------------------------------------------------------------------

TXN = 0x10
MARKER = 0x30


def txn(pid=1, epoch=0, seq=0, count=1, base_offset=0) -> BatchHeader:
    return header(pid, epoch, seq, count, base_offset)._replace(attributes=TXN)


def marker(pid=1, epoch=0, base_offset=0) -> BatchHeader:
    return BatchHeader(base_offset, 100, 0, 2, 0, MARKER, 0, 1000, 1000, pid, epoch, -1, 1)


def commit(epoch=0) -> Marker:
    return Marker(True, epoch)


def abort(epoch=0) -> Marker:
    return Marker(False, epoch)


def test_a_transactional_batch_opens_a_transaction_at_its_offset():
    state = state_with()
    assert state.first_unstable_offset() is None
    state.update(txn(pid=1, seq=0, count=2), base_offset=10, now_ms=0)
    state.update(txn(pid=1, seq=2), base_offset=14, now_ms=0)  # same transaction
    state.update(txn(pid=2, seq=0), base_offset=12, now_ms=0)
    assert state.ongoing_transactions == {1: 10, 2: 12}
    assert state.producers[1].current_txn_first_offset == 10
    assert state.first_unstable_offset() == 10


def test_a_marker_completes_the_transaction_which_stays_unstable_until_replicated():
    state = state_with()
    state.update(txn(pid=1), 10, 0)
    state.update(txn(pid=2), 11, 0)
    completed = state.update(marker(pid=1), 12, 0, abort(epoch=3))
    assert completed == CompletedTxn(producer_id=1, first_offset=10, last_offset=12,
                                     is_aborted=True, last_stable_offset=11)  # 2 still open
    assert state.ongoing_transactions == {2: 11}
    assert state.producers[1].current_txn_first_offset is None
    assert state.producers[1].coordinator_epoch == 3
    assert state.first_unstable_offset() == 10  # the HW has not passed the marker
    state.on_high_watermark(12)
    assert state.first_unstable_offset() == 10
    state.on_high_watermark(13)
    assert state.first_unstable_offset() == 11
    done = state.update(marker(pid=2), 13, 0, commit(epoch=3))
    assert (done.first_offset, done.is_aborted, done.last_stable_offset) == (11, False, 14)
    state.on_high_watermark(14)
    assert state.first_unstable_offset() is None


def test_a_marker_without_an_open_transaction_ends_an_empty_one():
    state = state_with(header(pid=1))
    completed = state.update(marker(pid=1), 5, 0, abort())
    assert (completed.first_offset, completed.last_offset) == (5, 5)
    unknown = state.update(marker(pid=9, epoch=4), 6, 0, commit())
    assert unknown.first_offset == 6 and state.producers[9].producer_epoch == 4


def test_a_control_batch_that_is_no_marker_changes_no_transaction():
    state = state_with(txn(pid=1, base_offset=3))
    assert state.replay(marker(pid=1, base_offset=4), now_ms=0, marker=None) is None
    assert state.ongoing_transactions == {1: 3}


def test_markers_are_checked_for_producer_and_coordinator_epochs():
    state = state_with(txn(pid=1, epoch=2))
    state.update(marker(pid=1, epoch=2), 1, 0, commit(epoch=5))

    def check(pid, epoch, coordinator_epoch):
        try:
            state.check_marker(pid, epoch, coordinator_epoch)
        except KafkaError as error:
            return error.code
    assert check(1, 1, 5) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert check(1, 2, 4) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert check(1, 2, 5) is None and check(1, 3, 6) is None
    assert check(77, 0, 0) is None  # a producer never seen here: written all the same
    assert check(-1, 0, 0) == ErrorCode.INVALID_REQUEST


def test_the_idempotence_checks_apply_to_transactional_batches():
    state = state_with(txn(pid=1, epoch=3, seq=0, count=2))
    assert verdict(state, txn(pid=1, epoch=2, seq=2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert verdict(state, txn(pid=1, epoch=3, seq=5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert verdict(state, txn(pid=1, epoch=3, seq=0, count=2)).first_offset == 0  # a retry
    assert verdict(state, txn(pid=1, epoch=3, seq=2)) is None


def test_a_plain_batch_while_a_transaction_is_open_is_invalid_txn_state():
    state = state_with(txn(pid=1, seq=0))
    assert verdict(state, header(pid=1, seq=1)) == ErrorCode.INVALID_TXN_STATE
    assert verdict(state, header(pid=1, epoch=1, seq=0)) == ErrorCode.INVALID_TXN_STATE
    state.update(marker(pid=1), 1, 0, commit())
    assert verdict(state, header(pid=1, seq=1)) is None


def test_producers_with_an_open_transaction_never_expire():
    state = state_with(txn(pid=1), header(pid=2))
    assert state.expire(now_ms=10**9, expiration_ms=1000) == 1
    assert list(state.producers) == [1] and state.first_unstable_offset() == 0


def test_snapshot_json_keeps_open_transactions_and_reads_version_1():
    state = state_with(txn(pid=2, base_offset=7), txn(pid=1, base_offset=3), header(pid=5))
    state.update(marker(pid=5), 9, 0, commit(epoch=4))
    copy = ProducerStateManager("t-0")
    copy.load_json(state.to_json())
    assert copy.ongoing_transactions == {1: 3, 2: 7}  # earliest first
    assert list(copy.ongoing_transactions.values()) == [3, 7]
    assert copy.producers[5].coordinator_epoch == 4
    assert copy.to_json() == state.to_json()
    version_1 = [{"producer_id": 8, "producer_epoch": 1, "last_timestamp": 5,
                  "last_update_ms": 6, "batches": [[0, 0, 10, 10, 5]]}]
    copy.load_json(version_1)
    entry = copy.producers[8]
    assert (entry.current_txn_first_offset, entry.coordinator_epoch) == (None, -1)
    assert copy.first_unstable_offset() is None


class TransactionsModel(RuleBasedStateMachine):
    """Producers open transactions, markers end them, the HW moves: the first unstable
    offset is always the earliest first offset among open transactions and completed ones
    whose marker the HW has not passed; each completion reports Kafka's LSO."""

    def __init__(self):
        super().__init__()
        self.state = ProducerStateManager("t-0")
        self.next_offset = 0
        self.high_watermark = 0
        self.sequence: dict[int, int] = {}
        self.open: dict[int, int] = {}  # producer -> first offset
        self.completed: list[tuple[int, int]] = []  # (first offset, marker offset)

    @rule(pid=st.integers(1, 4), count=st.integers(1, 3))
    def transactional_batch(self, pid, count):
        seq = self.sequence.get(pid, 0)
        batch = txn(pid=pid, seq=seq, count=count)
        assert verdict(self.state, batch) is None
        self.state.update(batch, self.next_offset, now_ms=0)
        self.open.setdefault(pid, self.next_offset)
        self.sequence[pid] = seq + count
        self.next_offset += count

    @rule(pid=st.integers(1, 4), aborted=st.booleans())
    def end(self, pid, aborted):
        offset = self.next_offset
        others = [first for p, first in self.open.items() if p != pid]
        done = self.state.update(marker(pid=pid), offset, 0, Marker(not aborted, 0))
        first = self.open.pop(pid, offset)
        assert (done.first_offset, done.last_offset, done.is_aborted) == (first, offset, aborted)
        assert done.last_stable_offset == (min(others) if others else offset + 1)
        self.completed.append((first, offset))
        self.next_offset += 1

    @rule(data=st.data())
    def advance_high_watermark(self, data):
        self.high_watermark = data.draw(st.integers(self.high_watermark, self.next_offset))
        self.state.on_high_watermark(self.high_watermark)

    @invariant()
    def first_unstable_offset(self):
        unstable = list(self.open.values()) + [first for first, last in self.completed
                                               if last >= self.high_watermark]
        assert self.state.first_unstable_offset() == (min(unstable) if unstable else None)
        assert self.state.ongoing_transactions == dict(sorted(self.open.items(),
                                                              key=lambda item: item[1]))


TestTransactions = TransactionsModel.TestCase
TestTransactions.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


def test_presets():
    from oncelog.client.producer import producer_config
    assert producer_config("exactly-once", "h:1")["enable.idempotence"] is True
    assert producer_config("at_most_once", "h:1")["acks"] == "0"
    assert producer_config("at_least_once", "h:1", **{"linger.ms": 5})["linger.ms"] == 5
    with pytest.raises(ValueError, match="acks would change the exactly_once guarantee"):
        producer_config("exactly_once", "h:1", acks="1")
    with pytest.raises(ValueError, match="unknown semantics"):
        producer_config("twice", "h:1")
