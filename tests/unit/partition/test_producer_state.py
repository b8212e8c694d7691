"""ProducerStateManager, Given/When/Then: replay batches to build state, check one batch,
assert the verdict. A Hypothesis model checks the dedup window against a plain list."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from oncelog.partition.producer_state import (MAX_SEQUENCE, NUM_BATCHES_TO_RETAIN,
                                              ProducerStateManager, last_sequence)
from oncelog.protocol.batches import BatchHeader
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


def test_presets():
    from oncelog.client.producer import producer_config
    assert producer_config("exactly-once", "h:1")["enable.idempotence"] is True
    assert producer_config("at_most_once", "h:1")["acks"] == "0"
    assert producer_config("at_least_once", "h:1", **{"linger.ms": 5})["linger.ms"] == 5
    with pytest.raises(ValueError, match="acks would change the exactly_once guarantee"):
        producer_config("exactly_once", "h:1", acks="1")
    with pytest.raises(ValueError, match="unknown semantics"):
        producer_config("twice", "h:1")
