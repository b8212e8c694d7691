"""The transaction coordinator (KIP-98, KIP-447), one per broker for the transactional ids
whose partition of ``__transaction_state`` it leads.

- ``coordinator`` — ``TransactionCoordinator``: InitProducerId with a transactional id
  (fencing the previous instance and aborting its open transaction), AddPartitionsToTxn,
  AddOffsetsToTxn, EndTxn, DescribeTransactions/ListTransactions, timed-out and abandoned
  transactions, expired ids; every change written and replicated before it is applied.
- ``markers`` — ``TransactionMarkers``: the commit or abort marker written into every
  partition of a transaction, locally or with WriteTxnMarkers to its leader.
- ``verification`` — ``TransactionVerifier`` (KIP-890): a partition leader asks the
  transaction's coordinator, before a producer's first transactional batch, whether the
  partition is in its ongoing transaction (AddPartitionsToTxn v5, ``verify_only``).
- ``state`` — the states and the one table of allowed transitions (Kafka's
  ``TransactionState``); ``metadata`` — one transactional id's immutable state and every
  change to it.
- ``records`` — the records of ``__transaction_state`` in Kafka's formats; ``state_topic`` —
  that topic on this broker.
"""

from .metadata import TransactionMetadata
from .state import TransactionState

__all__ = ["TransactionMetadata", "TransactionState"]
