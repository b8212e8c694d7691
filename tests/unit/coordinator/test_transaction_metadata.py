"""The transaction coordinator's foundations: the state table, a transactional id's
transitions and the ``__transaction_state`` records (issue 12, first step)."""

from __future__ import annotations

import dataclasses
import itertools
import struct

import pytest

from oncelog.coordinator.transaction import metadata as txn
from oncelog.coordinator.transaction import records
from oncelog.coordinator.transaction.state import (VALID_PREVIOUS, IllegalTransition,
                                                   TransactionState, check_transition)
from oncelog.protocol.errors import ErrorCode, KafkaError

S = TransactionState
PID = 1000


def _ongoing(partitions=(("orders", 0), ("payments", 2)), now_ms=10):
    meta = txn.new_transactional_id("app-1", PID, 60_000, 1)
    return txn.add_partitions(meta, PID, 0, set(partitions), now_ms)


def _code(call) -> ErrorCode:
    with pytest.raises(KafkaError) as error:
        call()
    return error.value.code


# -- the state table ----------------------------------------------------------------------

def test_states_carry_kafkas_ids_and_names():
    assert [(s.id, s.display_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert {s for s in S if s.is_at_rest} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_every_transition_outside_the_table_is_refused():
    allowed = {(a, b) for b, previous in VALID_PREVIOUS.items() for a in previous}
    assert (S.ONGOING, S.PREPARE_COMMIT) in allowed and (S.EMPTY, S.PREPARE_COMMIT) not in allowed
    for current, target in itertools.product(S, S):
        if (current, target) in allowed:
            check_transition("t", current, target)
        else:
            with pytest.raises(IllegalTransition):
                check_transition("t", current, target)


# -- transitions --------------------------------------------------------------------------

def test_a_transaction_from_init_to_complete_commit():
    meta = _ongoing()
    assert meta.state is S.ONGOING and meta.start_ms == 10
    assert meta.partitions == {("orders", 0), ("payments", 2)}
    meta = txn.add_partitions(meta, PID, 0, {("orders", 1)}, 20)
    assert meta.start_ms == 10 and len(meta.partitions) == 3  # same transaction, one more
    meta = txn.end_transaction(meta, PID, 0, commit=True, now_ms=30)
    assert meta.state is S.PREPARE_COMMIT
    meta = txn.complete(meta, 40)
    assert (meta.state, meta.partitions, meta.start_ms) == (S.COMPLETE_COMMIT, frozenset(), -1)
    # a retried EndTxn(commit) after completion succeeds unchanged; abort now is invalid
    assert txn.end_transaction(meta, PID, 0, commit=True, now_ms=50) is meta
    assert _code(lambda: txn.end_transaction(meta, PID, 0, False, 50)) is \
        ErrorCode.INVALID_TXN_STATE


def test_end_without_a_transaction_and_retries_while_preparing():
    empty = txn.new_transactional_id("app-1", PID, 60_000, 1)
    assert _code(lambda: txn.end_transaction(empty, PID, 0, True, 2)) is \
        ErrorCode.INVALID_TXN_STATE
    preparing = txn.end_transaction(_ongoing(), PID, 0, commit=False, now_ms=30)
    for call in (lambda: txn.end_transaction(preparing, PID, 0, False, 31),
                 lambda: txn.add_partitions(preparing, PID, 0, {("x", 0)}, 31),
                 lambda: txn.init_producer_id(preparing, 60_000, 31, lambda: 2000)):
        assert _code(call) is ErrorCode.CONCURRENT_TRANSACTIONS


def test_init_bumps_the_epoch_and_fences_the_previous_instance():
    meta = txn.complete(txn.end_transaction(_ongoing(), PID, 0, True, 30), 40)
    meta = txn.init_producer_id(meta, 30_000, 50, allocate=lambda: 2000)
    assert (meta.producer_id, meta.producer_epoch, meta.state, meta.timeout_ms) == \
        (PID, 1, S.EMPTY, 30_000)
    assert _code(lambda: txn.add_partitions(meta, PID, 0, {("x", 0)}, 60)) is \
        ErrorCode.PRODUCER_FENCED  # the old instance, epoch 0
    assert _code(lambda: txn.add_partitions(meta, PID + 1, 1, {("x", 0)}, 60)) is \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_init_with_a_transaction_ongoing_fences_it_then_aborts_it():
    fenced = txn.init_producer_id(_ongoing(), 60_000, 50, allocate=lambda: 2000)
    assert (fenced.state, fenced.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 1)
    aborting = txn.abort_expired(fenced, 51)
    assert (aborting.state, aborting.producer_epoch) == (S.PREPARE_ABORT, 1)
    assert _code(lambda: txn.end_transaction(aborting, PID, 0, True, 52)) is \
        ErrorCode.PRODUCER_FENCED  # the zombie cannot commit what was being aborted
    done = txn.complete(aborting, 53)
    again = txn.init_producer_id(done, 60_000, 54, allocate=lambda: 2000)
    assert (again.state, again.producer_epoch) == (S.EMPTY, 2)


def test_an_exhausted_epoch_rotates_to_a_new_producer_id():
    meta = txn.TransactionMetadata("app-1", PID, txn.MAX_EPOCH - 1, 60_000, S.EMPTY)
    rotated = txn.init_producer_id(meta, 60_000, 5, allocate=lambda: 2000)
    assert (rotated.producer_id, rotated.producer_epoch, rotated.previous_producer_id) == \
        (2000, 0, PID)


def test_kip_360_init_names_the_current_producer_or_is_fenced():
    meta = txn.init_producer_id(txn.new_transactional_id("app-1", PID, 60_000, 1), 60_000, 2,
                                allocate=lambda: 2000)  # epoch 1, previous epoch 0
    bumped = txn.init_producer_id(meta, 60_000, 3, lambda: 2000, expected=(PID, 1))
    assert bumped.producer_epoch == 2
    # the same request again (its answer was lost): the same epoch, not another bump
    assert txn.init_producer_id(bumped, 60_000, 4, lambda: 2000, expected=(PID, 1)) is bumped
    assert _code(lambda: txn.init_producer_id(bumped, 60_000, 4, lambda: 2000,
                                              expected=(PID, 0))) is ErrorCode.PRODUCER_FENCED


def test_timeouts():
    meta = _ongoing(now_ms=100)
    assert not txn.has_timed_out(meta, 100 + 59_999) and txn.has_timed_out(meta, 100 + 60_000)
    aborted = txn.abort_expired(meta, 60_100)
    assert (aborted.state, aborted.producer_epoch) == (S.PREPARE_ABORT, 1)
    txn.check_timeout(900_000, 900_000)
    for bad in (0, 900_001):
        assert _code(lambda: txn.check_timeout(bad, 900_000)) is \
            ErrorCode.INVALID_TRANSACTION_TIMEOUT


def test_only_an_id_at_rest_expires():
    assert txn.expire(txn.new_transactional_id("a", PID, 1, 1), 2).state is S.DEAD
    with pytest.raises(IllegalTransition):
        txn.expire(_ongoing(), 20)


# -- __transaction_state records ----------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: txn.new_transactional_id("app-1", PID, 60_000, 1),
    lambda: _ongoing(),
    lambda: txn.end_transaction(_ongoing(), PID, 0, True, 30),
    lambda: txn.complete(txn.end_transaction(_ongoing(), PID, 0, False, 30), 31),
    lambda: txn.init_producer_id(_ongoing(), 60_000, 50, lambda: 2000)])
def test_records_round_trip(make):
    meta = make()
    key, value = records.encode_key(meta.transactional_id), records.encode_value(meta)
    assert records.decode_key(key) == "app-1"
    decoded = records.decode_value("app-1", value)
    # the log keeps all but the epoch before the last bump, in memory only (as Kafka's)
    assert decoded == dataclasses.replace(meta, last_producer_epoch=-1)


def test_the_value_is_kafkas_v0_layout():
    meta = txn.add_partitions(txn.new_transactional_id("t", 5, 1000, 1), 5, 0, {("a", 7)}, 9)
    assert records.encode_key("t") == b"\x00\x00\x00\x01t"
    assert records.encode_value(meta) == (
        struct.pack(">hqhib", 0, 5, 0, 1000, 1) + struct.pack(">i", 1) + b"\x00\x01a"
        + struct.pack(">ii", 1, 7) + struct.pack(">qq", 9, 9))


def test_a_flexible_v1_value_with_tagged_producer_ids_is_read():
    value = (struct.pack(">hqhib", 1, 5, 3, 1000, 4)
             + bytes([2]) + bytes([2]) + b"a" + bytes([2]) + struct.pack(">i", 7) + b"\x00"
             + struct.pack(">qq", 9, 8)
             + bytes([2]) + bytes([0, 8]) + struct.pack(">q", 4) + bytes([1, 8])
             + struct.pack(">q", 6))
    meta = records.decode_value("t", value)
    assert (meta.producer_id, meta.producer_epoch, meta.state, meta.partitions) == \
        (5, 3, S.COMPLETE_COMMIT, frozenset({("a", 7)}))
    assert (meta.last_update_ms, meta.start_ms) == (9, 8)
    assert (meta.previous_producer_id, meta.next_producer_id) == (4, 6)


@pytest.mark.parametrize("key, value", [
    (b"\x00\x01\x00\x01t", None), (None, struct.pack(">hqhib", 2, 5, 0, 1, 0)),
    (None, struct.pack(">hqhib", 0, 5, 0, 1, 9) + b"\x00" * 20),
    (None, struct.pack(">hqh", 0, 5, 0))])
def test_damaged_records_are_corrupt_message(key, value):
    call = (lambda: records.decode_key(key)) if key else (lambda: records.decode_value("t", value))
    assert _code(call) is ErrorCode.CORRUPT_MESSAGE
