"""The states of a transaction at its coordinator, and the transitions between them as one
explicit table (Kafka's ``TransactionState``: the same ids, names and allowed previous states,
so ``__transaction_state`` and DescribeTransactions read as Kafka's do).

::

    Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
      ▲                                   │  └──EndTxn(abort), timeout──▶ PrepareAbort ──markers──▶ CompleteAbort
      └──────── InitProducerId ◀──────────┴── (a new producer instance) ▶ PrepareEpochFence ──▶ PrepareAbort

CompleteCommit and CompleteAbort are at rest like Empty: the next AddPartitionsToTxn starts
the next transaction. Dead is a transactional id expired by ``transactional.id.expiration.ms``.
Empty, CompleteCommit and CompleteAbort may also go to PrepareAbort: a client of transaction
protocol v2 that does not know whether its transaction began ends it with an abort.
"""  # noqa: E501 - the diagram is wider than a line

from __future__ import annotations

import enum

from ...protocol.errors import ErrorCode, KafkaError


class TransactionState(enum.Enum):
    EMPTY = (0, "Empty", True)
    ONGOING = (1, "Ongoing", False)
    PREPARE_COMMIT = (2, "PrepareCommit", False)
    PREPARE_ABORT = (3, "PrepareAbort", False)
    COMPLETE_COMMIT = (4, "CompleteCommit", True)
    COMPLETE_ABORT = (5, "CompleteAbort", True)
    DEAD = (6, "Dead", False)
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence", False)

    def __init__(self, state_id: int, display_name: str, expiration_allowed: bool) -> None:
        self.id = state_id
        self.display_name = display_name  # as DescribeTransactions and the CLI show it
        self.expiration_allowed = expiration_allowed

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.id == state_id:
                return state
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown transaction state id {state_id}")

    @property
    def is_at_rest(self) -> bool:
        """No transaction in progress: the id may start one, or expire."""
        return self.expiration_allowed

    @property
    def is_preparing(self) -> bool:
        """Markers are being written: the coordinator answers CONCURRENT_TRANSACTIONS."""
        return self in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE)


S = TransactionState

# to-state -> the states it may be entered from (Kafka's validPreviousStates)
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT,
                                S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def check_transition(transactional_id: str, current: TransactionState,
                     target: TransactionState) -> None:
    """Raise (a coordinator bug, never a client's) unless the table allows the move."""
    if current not in VALID_PREVIOUS[target]:
        raise IllegalTransition(f"transactional id {transactional_id!r}: "
                                f"{current.display_name} -> {target.display_name} is not a "
                                "valid transition")


class IllegalTransition(RuntimeError):
    """The coordinator tried a move the state table forbids."""
