"""One transactional id's state at its coordinator, and every change to it.

``TransactionMetadata`` is immutable: each request computes the next snapshot with one of the
functions below (which check the client's producer id and epoch and raise the ``KafkaError``
Kafka answers), the coordinator writes that snapshot to ``__transaction_state``, and only once
it is replicated does the snapshot become the id's state. A move the state table
(``state.VALID_PREVIOUS``) forbids raises ``IllegalTransition``: a coordinator bug, not a
client error.

Epochs: every InitProducerId bumps the epoch, which fences the previous producer instance;
an epoch about to run out (32767, Kafka's ``Short.MaxValue``) rotates to a new producer id at
epoch 0. A transaction that times out, or that a new instance finds still ongoing, is aborted
with a bumped epoch, so the instance that started it can never finish it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...protocol.errors import ErrorCode, KafkaError
from .state import TransactionState, check_transition

S = TransactionState
MAX_EPOCH = 32767
NO_PRODUCER_ID = -1


@dataclass(frozen=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[tuple[str, int]] = frozenset()
    last_update_ms: int = -1
    start_ms: int = -1  # when the ongoing transaction began; -1 at rest
    previous_producer_id: int = NO_PRODUCER_ID  # before the last rotation (KIP-360 retries)
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = -1  # the epoch before the last bump (a retried init matches it)

    def _to(self, state: TransactionState, now_ms: int, **changes: Any) -> TransactionMetadata:
        check_transition(self.transactional_id, self.state, state)
        return dataclasses.replace(self, state=state, last_update_ms=now_ms, **changes)


def new_transactional_id(transactional_id: str, producer_id: int, timeout_ms: int,
                         now_ms: int) -> TransactionMetadata:
    """A transactional id seen for the first time: its producer id at epoch 0, Empty."""
    return TransactionMetadata(transactional_id=transactional_id, producer_id=producer_id,
                               producer_epoch=0, timeout_ms=timeout_ms, state=S.EMPTY,
                               last_update_ms=now_ms)


def check_timeout(timeout_ms: int, max_timeout_ms: int) -> None:
    if not 0 < timeout_ms <= max_timeout_ms:
        raise KafkaError(ErrorCode.INVALID_TRANSACTION_TIMEOUT,
                         f"transaction.timeout.ms {timeout_ms} is outside (0, "
                         f"transaction.max.timeout.ms={max_timeout_ms}]")


def init_producer_id(meta: TransactionMetadata, timeout_ms: int, now_ms: int,
                     allocate: Callable[[], int],
                     expected: tuple[int, int] | None = None) -> TransactionMetadata:
    """InitProducerId for an existing id: the next epoch (or a new producer id), Empty.

    An ongoing transaction is first fenced (PrepareEpochFence, epoch bumped) and must be
    aborted before the client's retry succeeds; one whose markers are being written answers
    CONCURRENT_TRANSACTIONS (retriable). ``expected`` is the (producer id, epoch) a KIP-360
    client names: it must be the current pair, or the one a lost response had replaced.
    """
    if meta.state.is_preparing:
        raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS,
                         f"{meta.transactional_id!r} is completing a transaction; retry")
    if meta.state is S.ONGOING:
        return fence(meta, now_ms)
    if expected is not None and expected[0] != NO_PRODUCER_ID:
        current = (meta.producer_id, meta.producer_epoch)
        replaced = {(meta.producer_id, meta.last_producer_epoch),
                    (meta.previous_producer_id, MAX_EPOCH - 1)}
        if expected in replaced and expected != current:
            return meta  # a retry whose first answer was lost: the same id and epoch again
        if expected != current:
            raise KafkaError(ErrorCode.PRODUCER_FENCED,
                             f"{meta.transactional_id!r}: producer {expected[0]} epoch "
                             f"{expected[1]} is not the current {current[0]}/{current[1]}")
    if meta.producer_epoch >= MAX_EPOCH - 1:
        return meta._to(S.EMPTY, now_ms, producer_id=allocate(), producer_epoch=0,
                        previous_producer_id=meta.producer_id, last_producer_epoch=-1,
                        timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1)
    return meta._to(S.EMPTY, now_ms, producer_epoch=meta.producer_epoch + 1,
                    last_producer_epoch=meta.producer_epoch, timeout_ms=timeout_ms,
                    partitions=frozenset(), start_ms=-1)


def check_producer(meta: TransactionMetadata, producer_id: int, producer_epoch: int) -> None:
    """The request's producer must be the id's current one (else it is a zombie)."""
    if producer_id != meta.producer_id:
        raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                         f"{meta.transactional_id!r} belongs to producer {meta.producer_id}, "
                         f"not {producer_id}")
    if producer_epoch != meta.producer_epoch:
        raise KafkaError(ErrorCode.PRODUCER_FENCED,
                         f"{meta.transactional_id!r}: epoch {producer_epoch} was fenced by "
                         f"epoch {meta.producer_epoch}")


def add_partitions(meta: TransactionMetadata, producer_id: int, producer_epoch: int,
                   partitions: set[tuple[str, int]], now_ms: int) -> TransactionMetadata:
    """AddPartitionsToTxn (and AddOffsetsToTxn's offsets partition): Ongoing."""
    check_producer(meta, producer_id, producer_epoch)
    if meta.state.is_preparing:
        raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS,
                         f"{meta.transactional_id!r} is completing a transaction; retry")
    if meta.state is S.DEAD:
        raise KafkaError(ErrorCode.INVALID_TXN_STATE, f"{meta.transactional_id!r} expired")
    starting = meta.state is not S.ONGOING
    return meta._to(S.ONGOING, now_ms, partitions=meta.partitions | frozenset(partitions),
                    start_ms=now_ms if starting else meta.start_ms)


def end_transaction(meta: TransactionMetadata, producer_id: int, producer_epoch: int,
                    commit: bool, now_ms: int) -> TransactionMetadata:
    """EndTxn: PrepareCommit or PrepareAbort. A retry of an EndTxn already done returns the
    state unchanged; one still being completed answers CONCURRENT_TRANSACTIONS."""
    check_producer(meta, producer_id, producer_epoch)
    done, preparing = ((S.COMPLETE_COMMIT, S.PREPARE_COMMIT) if commit
                       else (S.COMPLETE_ABORT, S.PREPARE_ABORT))
    if meta.state is done:
        return meta
    if meta.state is preparing:
        raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS,
                         f"{meta.transactional_id!r} is already completing; retry")
    if meta.state is not S.ONGOING:
        raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                         f"{meta.transactional_id!r} is {meta.state.display_name}: "
                         f"nothing to {'commit' if commit else 'abort'}")
    return meta._to(preparing, now_ms)


def fence(meta: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """A new instance found the transaction ongoing: bump the epoch, then abort."""
    epoch = meta.producer_epoch + 1 if meta.producer_epoch < MAX_EPOCH else MAX_EPOCH
    return meta._to(S.PREPARE_EPOCH_FENCE, now_ms, producer_epoch=epoch,
                    last_producer_epoch=meta.producer_epoch)


def abort_expired(meta: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """``transaction.timeout.ms`` ran out (or a fence): PrepareAbort with a bumped epoch, so
    the producer that started the transaction is fenced."""
    if meta.state is S.ONGOING:
        meta = fence(meta, now_ms)
    return meta._to(S.PREPARE_ABORT, now_ms)


def complete(meta: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """Every partition has its marker: CompleteCommit or CompleteAbort, no partitions."""
    target = S.COMPLETE_COMMIT if meta.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
    return meta._to(target, now_ms, partitions=frozenset(), start_ms=-1)


def has_timed_out(meta: TransactionMetadata, now_ms: int) -> bool:
    return meta.state is S.ONGOING and now_ms >= meta.start_ms + meta.timeout_ms


def expire(meta: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """``transactional.id.expiration.ms`` without a transaction: Dead (then a tombstone)."""
    return meta._to(S.DEAD, now_ms)


def as_client_knows(code: ErrorCode, api_version: int, fenced_since: int) -> ErrorCode:
    """PRODUCER_FENCED for a request version that knows it (KIP-588: InitProducerId v4,
    AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v2); INVALID_PRODUCER_EPOCH before."""
    if code == ErrorCode.PRODUCER_FENCED and api_version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code
