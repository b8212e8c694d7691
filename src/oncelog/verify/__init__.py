"""The verifier: workloads, faults (the nemesis) and the checker.

- ``history``: what a run records (``Produced``, ``Acknowledged``, ``Failed``, ``Delivered``,
  ``FaultEvent``, ``Transaction``), one JSON Lines file per process (``HistoryWriter``), merged by
  ``History.load``; record ids and the record value format (``encode_value``/``decode_value``).
- ``schedule``: the seeded fault schedule (``FaultSchedule.generate``): same seed, same faults.
- ``checker``: ``check(history, semantics)`` reads only the history and reports what was
  lost, duplicated, reordered or never produced (and, for transactional runs, which aborted
  or uncommitted records were read), and whether the contract was kept.
- ``landing``: whether each fault of a run actually took effect, read from its history.
- ``report``: the terminal table, the JSON result and the PNG chart (matplotlib, lazily).
- ``proxy``: the network fault: a Kafka-aware TCP proxy that drops acknowledgements, delays
  or cuts connections.

``oncelog verify`` (``cli/verify.py``, docs/verifier.md) puts them together:

- ``scenario``: a run as data (semantics, faults, duration, seed, rate, ...), validated.
- ``workloads``: producer and consumer processes, the Spark copy job, their sinks.
- ``faults``: the nemesis - kill -9 of the broker, a consumer or the Spark driver, and
  dropped acknowledgements - played on the seeded schedule, each step a ``FaultEvent``.
- ``runner``: preflight checks, then per semantics: stage, producers, faults, drain, check.
- ``processes``, ``progress``: child processes (all stopped on Ctrl-C) and the live view.
"""

from .checker import (ALL_SEMANTICS, CONTRACTS, SEMANTICS, TRANSACTIONAL, CheckResult, Reorder,
                      check, normalize_semantics)
from .history import (Acknowledged, Delivered, Failed, FaultEvent, History, HistoryError,
                      HistoryWriter, Produced, Transaction, decode_value, encode_value, make_id)
from .proxy import FaultProxy, FaultRules, ProxyStats, ProxyThread
from .schedule import FAULTS, FaultSchedule, ScheduledFault, parse_faults, random_seed

__all__ = [
    "ALL_SEMANTICS", "Acknowledged", "CONTRACTS", "CheckResult", "Delivered", "FAULTS", "Failed",
    "FaultEvent", "FaultProxy", "FaultRules", "FaultSchedule", "History", "HistoryError",
    "HistoryWriter", "Produced", "ProxyStats", "ProxyThread", "Reorder", "SEMANTICS",
    "ScheduledFault", "TRANSACTIONAL", "Transaction", "check",
    "decode_value", "encode_value", "make_id", "normalize_semantics", "parse_faults",
    "random_seed",
]
