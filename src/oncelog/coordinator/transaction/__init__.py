"""The transaction coordinator's foundations (issue 12, in progress): the state table
(``state``), one transactional id's state and every change to it (``metadata``), and the
records of ``__transaction_state`` (``records``). Nothing serves transactions yet:
FindCoordinator for transaction keys and InitProducerId with a transactional id are still
refused with one clear message (docs/compatibility.md)."""

from .metadata import TransactionMetadata
from .state import TransactionState

__all__ = ["TransactionMetadata", "TransactionState"]
