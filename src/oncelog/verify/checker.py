"""The checker: from one run's history alone, what was lost, duplicated, reordered or made up,
and whether the run's semantics kept its contract.

Definitions (ids are record ids; "delivered" means a ``Delivered`` record exists for it):

- **produced** — distinct ids with a ``Produced`` record (attempted sends).
- **acknowledged** — distinct ids with an ``Acknowledged`` record.
- **delivered** — distinct *produced* ids delivered at least once.
- **lost** — acknowledged ids never delivered. An id that was produced but never
  acknowledged (its acknowledgement was dropped, the producer died, or it failed) is not
  lost when absent, and not a violation when present: the producer was never promised
  anything. An id acknowledged before a broker restart and missing afterwards is lost.
- **duplicated** — produced ids delivered more than once; ``duplicate_copies`` counts the
  extra copies (an id delivered three times adds 2). ``log_duplicates`` counts the
  duplicated ids read from more than one distinct offset: the log itself holds them twice
  (a producer retry), as opposed to one log copy processed twice (a consumer replay).
- **reordered** — within one source partition, the copies are taken in ``position`` order
  (ties broken by ``time``, then by order in the history) and only the *first* copy of each
  id counts, so a replay of already-delivered records is a duplicate, not a reordering.
  Among one producer's records there, a record is *reordered* when it is delivered after a
  record its producer sent later (a higher ``seq``) — that is, when its ``seq`` is below the
  highest ``seq`` already delivered from that producer in that partition; that record is
  its witness (``Reorder.after``). Each reordered record counts once. Example: seqs
  delivered ``1, 4, 2, 3, 5`` -> 2 and 3 are reordered (both after 4). One record that
  jumps far ahead marks every record it overtook (``5, 1, 2, 3, 4`` -> 4 reordered); this
  is deliberate: each of them really did arrive after a later record, and each comes with
  a witness a person can check.
- **unexpected** — delivered ids never produced: corruption visible to the checker (a
  record the workload never wrote, or a mangled value). Excluded from every other count.

**Transactional runs** (``transactional``) judge each record by its transaction, from the
producers' ``Transaction`` records (``history.py``). A produced id's transaction is:

- *committed* — ``commit_transaction()`` returned;
- *aborted* — ``abort_transaction()`` returned (a chosen abort, or an abort after a commit
  that failed with an abortable error): the broker wrote its abort markers;
- *unknown* — commit was asked for (``committing``) and no answer was recorded (the producer
  died, or the commit timed out and could not be aborted): it may have gone either way;
- *uncommitted* — commit was never asked for (the producer gave up on the transaction, or
  died inside it): the broker aborts it, by the producer's next epoch or by its timeout.

Then, for transactional runs only: **acknowledged** means committed (what the producer was
promised), so **lost** is committed ids never delivered; **aborted_reads** are delivered
aborted ids; **uncommitted_reads** are delivered uncommitted ids. An unknown id may be
delivered or not, but at most once (a second copy is a duplicate like any other).
``transactions`` counts the transactions per outcome and ``aborted_records`` the records
produced in aborted ones, so a run that aborted nothing (and so proved nothing about
aborted reads) is visible, and warned about.

Contracts (``CONTRACTS``: which anomalies break which semantics):

- at-most-once: no duplicates (losses allowed).
- at-least-once: nothing lost (duplicates allowed).
- exactly-once: nothing lost, no duplicates, and no reordering.
- transactional: as exactly-once, and no aborted or uncommitted reads.
- every semantics: nothing unexpected.

``SEMANTICS`` are the three guarantees (what ``--semantics all`` runs); ``transactional``
is exactly-once through Kafka transactions, run when asked for by name.

Reordering is reported for every semantics but breaks only exactly-once: Kafka promises
per-partition order only to an idempotent producer (or ``max.in.flight.requests.per
.connection=1``); the at-most-once and at-least-once presets allow 5 requests in flight
without idempotence, so a retried batch may land after a later one. The exactly-once preset
is idempotent, so its order is part of its contract.

**Verdict** (``CheckResult.verdict``): ``broken`` when an anomaly breaks the contract;
otherwise ``inconclusive`` when the run proved nothing - the runner said so
(``run_inconclusive_because``: the Spark stage of a ``--spark-master`` run ran no task on an
executor); nothing produced, acknowledged or delivered; faults were planned and none of
them landed (``landing.py``: nothing dropped, a kill of a process that was not running, a
fault never injected); or a negative control
(``control``) did not show its anomaly - and ``kept`` only when none of that holds. A run
with no faults planned (``--faults none``) is a plain run: ``kept`` if clean, its report
saying that no fault was requested.

**Unplanned exits** (``unplanned_exits``, from the runner: the history cannot show them): a
delivery stage's process - the Spark copy job, a consumer, the transform worker or its
reader - that ended while no fault was killing it. The runner restarts it so the run
completes, but a user's pipeline would simply have stopped there, so each is a finding of
its own (``unplanned_exit_findings``: one sentence per process, with the first line of its
error), in the report and the JSON document, not a warning. It leaves the verdict alone:
the contract is about records, and the records are still checked.

Informational (never a violation): ``unacknowledged_delivered`` (delivered although the
producer never saw an acknowledgement: a dropped ack), ``failed_delivered`` (delivered
although the producer saw an error: librdkafka's errors after retries, e.g. a message
timeout, do not prove that nothing was written) and ``warnings`` (e.g. nothing was
acknowledged, so "nothing lost" proves nothing).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .history import Delivered, FaultEvent, History, record_to_dict
from .landing import FaultOutcome, fault_outcomes

__all__ = ["ALL_SEMANTICS", "ANOMALIES", "CONTRACTS", "SEMANTICS", "TRANSACTIONAL", "VERDICTS",
           "CheckResult", "Reorder", "UnplannedExit", "check", "normalize_semantics"]

SEMANTICS = ("at_most_once", "at_least_once", "exactly_once")   # what "all" means
TRANSACTIONAL = "transactional"
ALL_SEMANTICS = (*SEMANTICS, TRANSACTIONAL)

CONTRACTS: dict[str, tuple[str, ...]] = {
    "at_most_once": ("duplicated", "unexpected"),
    "at_least_once": ("lost", "unexpected"),
    "exactly_once": ("lost", "duplicated", "reordered", "unexpected"),
    "transactional": ("aborted_reads", "uncommitted_reads", "lost", "duplicated", "reordered",
                      "unexpected"),
}


ANOMALIES = ("lost", "duplicated", "reordered", "unexpected", "aborted_reads",
             "uncommitted_reads")
VERDICTS = ("kept", "broken", "inconclusive")


def normalize_semantics(semantics: str) -> str:
    """``at-most-once`` or ``at_most_once`` -> ``at_most_once``; ``ValueError`` otherwise."""
    name = semantics.strip().lower().replace("-", "_")
    if name not in ALL_SEMANTICS:
        raise ValueError(f"unknown semantics {semantics!r}; choose at-most-once, "
                         "at-least-once, exactly-once or transactional")
    return name


@dataclass(frozen=True)
class Reorder:
    id: str           # delivered after ...
    after: str        # ... this record, which its producer sent later
    topic: str
    partition: int


@dataclass(frozen=True)
class UnplannedExit:
    """A delivery stage's process that ended with no fault killing it (the runner saw it,
    restarted it and recorded this)."""
    process: str           # "exactly-once copy job", "at-least-once consumer", ...
    status: int            # its exit status
    at_s: float            # when the runner saw it, on the schedule's clock
    error: str | None      # the first line of its error, from its log (None: none found)
    log: str               # its log file

    def to_dict(self) -> dict[str, Any]:
        return {"process": self.process, "status": self.status, "at_s": self.at_s,
                "error": self.error, "log": self.log}


@dataclass
class CheckResult:
    semantics: str
    produced: int
    acknowledged: int
    failed: int
    delivered: int
    lost: list[str]
    duplicated: dict[str, int]          # id -> copies delivered (>= 2)
    log_duplicates: int
    reordered: list[Reorder]
    unexpected: dict[str, int]          # id -> copies delivered
    unacknowledged_delivered: list[str]
    failed_delivered: list[str]
    faults: list[FaultEvent] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # transactional runs only (empty otherwise); see the module doc
    aborted_reads: list[str] = field(default_factory=list)
    uncommitted_reads: list[str] = field(default_factory=list)
    transactions: dict[str, int] = field(default_factory=dict)  # outcome -> transactions
    aborted_records: int = 0
    # what the faults did (landing.py); None: not judged (no schedule was given to check)
    fault_outcomes: list[FaultOutcome] | None = None
    control: str | None = None          # a negative control: the anomaly it must show
    # what the runner saw that the history cannot show: e.g. --spark-master given and no
    # task of the copy job ran on an executor (runner._spark_evidence); None: nothing
    run_inconclusive_because: str | None = None
    # delivery processes that ended on their own, each restarted by the runner
    unplanned_exits: list[UnplannedExit] = field(default_factory=list)

    @property
    def unplanned_exit_findings(self) -> list[str]:
        """One sentence per process that exited unplanned: how many times, the first
        line of its first error, when, and where its log is."""
        by_process: dict[str, list[UnplannedExit]] = {}
        for ended in self.unplanned_exits:
            by_process.setdefault(ended.process, []).append(ended)
        findings = []
        for process, exits in by_process.items():
            first = exits[0]
            error = next((ended.error for ended in exits if ended.error), None)
            times = "1 time" if len(exits) == 1 else f"{len(exits)} times"
            when = ", ".join(f"{ended.at_s:g} s" for ended in exits[:5])
            when += ", ..." if len(exits) > 5 else ""
            statuses = sorted({ended.status for ended in exits})
            findings.append(
                f"the {process} exited unplanned {times}: "
                f"{error or 'no error line in its log'} (status "
                f"{', '.join(map(str, statuses))} at {when}; restarted each time so the run "
                f"could finish; see {first.log})")
        return findings

    @property
    def faults_requested(self) -> bool | None:
        return None if self.fault_outcomes is None else bool(self.fault_outcomes)

    @property
    def faults_landed(self) -> list[FaultOutcome]:
        return [outcome for outcome in self.fault_outcomes or () if outcome.landed]

    @property
    def inconclusive_because(self) -> str | None:
        """Why a run with no broken promise still proved nothing (None: it proved
        something, or it broke its contract)."""
        if self.violations:
            return None
        if self.run_inconclusive_because:
            return self.run_inconclusive_because
        if self.control is not None and not self.count(self.control):
            return (f"the negative control showed no {self.control.replace('_', ' ')} "
                    "record: the broken configuration was not caught")
        if self.produced == 0:
            return "nothing was produced"
        if self.acknowledged == 0:
            return "nothing was acknowledged"
        if self.delivered == 0:
            return "nothing produced was delivered"
        if self.fault_outcomes and not self.faults_landed:
            return "no fault landed: " + "; ".join(
                f"{outcome.name} at {outcome.at_s:g} s {outcome.effect}"
                for outcome in self.fault_outcomes)
        return None

    @property
    def verdict(self) -> str:
        """``broken`` (an anomaly its contract forbids), ``inconclusive`` (nothing broken,
        but nothing proved: see ``inconclusive_because``) or ``kept``. With no faults
        requested (``--faults none``) a clean run is ``kept``: a plain run, and its report
        says that no fault was requested."""
        if self.violations:
            return "broken"
        return "inconclusive" if self.inconclusive_because else "kept"

    @property
    def duplicate_copies(self) -> int:
        return sum(copies - 1 for copies in self.duplicated.values())

    def count(self, anomaly: str) -> int:
        """Ids showing ``anomaly``: lost, duplicated, reordered, unexpected, aborted_reads
        or uncommitted_reads."""
        return len(getattr(self, anomaly))

    @property
    def broken_by(self) -> list[str]:
        """The anomalies present that this semantics' contract forbids."""
        return [anomaly for anomaly in CONTRACTS[self.semantics] if self.count(anomaly)]

    @property
    def violations(self) -> list[str]:
        """One sentence per anomaly in ``broken_by``."""
        sentences = {
            "lost": lambda n: f"{n} acknowledged record(s) lost",
            "duplicated": lambda n: (f"{n} record(s) delivered more than once "
                                     f"({self.duplicate_copies} extra copies)"),
            "reordered": lambda n: f"{n} record(s) delivered after a later record",
            "unexpected": lambda n: f"{n} delivered record(s) never produced",
            "aborted_reads": lambda n: f"{n} record(s) of aborted transactions delivered",
            "uncommitted_reads": lambda n: (f"{n} record(s) of transactions never committed "
                                            "delivered"),
        }
        return [sentences[anomaly](self.count(anomaly)) for anomaly in self.broken_by]

    @property
    def contract_kept(self) -> bool:
        return not self.violations

    def to_dict(self, sample_size: int | None = 20) -> dict[str, Any]:
        """A JSON-ready summary: every count, and up to ``sample_size`` ids per anomaly."""
        def sample(items):
            return list(items)[:sample_size] if sample_size is not None else list(items)

        document: dict[str, Any] = {
            "semantics": self.semantics,
            "contract": list(CONTRACTS[self.semantics]),
            "contract_kept": self.contract_kept,
            "verdict": self.verdict,
            "inconclusive_because": self.inconclusive_because,
            "violations": self.violations,
            "counts": {
                "produced": self.produced, "acknowledged": self.acknowledged,
                "failed": self.failed, "delivered": self.delivered,
                "lost": len(self.lost), "duplicated": len(self.duplicated),
                "duplicate_copies": self.duplicate_copies,
                "log_duplicates": self.log_duplicates,
                "reordered": len(self.reordered), "unexpected": len(self.unexpected),
                "unacknowledged_delivered": len(self.unacknowledged_delivered),
                "failed_delivered": len(self.failed_delivered),
            },
            "samples": {
                "lost": sample(self.lost),
                "duplicated": sample({"id": id, "copies": copies}
                                     for id, copies in self.duplicated.items()),
                "reordered": sample({"id": r.id, "after": r.after, "topic": r.topic,
                                     "partition": r.partition} for r in self.reordered),
                "unexpected": sample({"id": id, "copies": copies}
                                     for id, copies in self.unexpected.items()),
                "unacknowledged_delivered": sample(self.unacknowledged_delivered),
                "failed_delivered": sample(self.failed_delivered),
            },
            "faults": [record_to_dict(event) for event in self.faults],
            "unplanned_exits": {
                "count": len(self.unplanned_exits),
                "findings": self.unplanned_exit_findings,
                "exits": [ended.to_dict() for ended in self.unplanned_exits],
            },
            "warnings": list(self.warnings),
        }
        if self.fault_outcomes is not None:
            document["faults_requested"] = self.faults_requested
            document["faults_landed"] = len(self.faults_landed)
            document["fault_outcomes"] = [outcome.to_dict() for outcome in self.fault_outcomes]
        if self.control is not None:
            document["control"] = self.control
        if self.semantics == TRANSACTIONAL:
            document["counts"].update(aborted_reads=len(self.aborted_reads),
                                      uncommitted_reads=len(self.uncommitted_reads),
                                      aborted_records=self.aborted_records)
            document["transactions"] = dict(self.transactions)
            document["samples"].update(aborted_reads=sample(self.aborted_reads),
                                       uncommitted_reads=sample(self.uncommitted_reads))
        return document


def check(history: History, semantics: str, *, planned: Iterable[Any] | None = None,
          control: str | None = None) -> CheckResult:
    """Compare what producers saw acknowledged with what was delivered, for one run.

    ``planned``: the faults the run was given (``ScheduledFault``s, empty for none); with
    it, the result says what each one did (``fault_outcomes``) and whether the run proved
    anything (``verdict``). ``control``: the run is a negative control that must show this
    anomaly (``scenario.CONTROLS``)."""
    semantics = normalize_semantics(semantics)
    if control is not None and control not in ANOMALIES:
        raise ValueError(f"unknown anomaly {control!r} for a negative control")
    produced = {record.id: record for record in history.produced}
    acknowledged = {record.id for record in history.acknowledged}
    outcomes: dict[str, str] = {}
    if semantics == TRANSACTIONAL:
        outcomes = _record_outcomes(history, produced)
        acknowledged = {id for id, outcome in outcomes.items() if outcome == "committed"}
    failed = {record.id for record in history.failed}
    copies = Counter(record.id for record in history.delivered)
    offsets: dict[str, set] = defaultdict(set)
    for record in history.delivered:
        if record.offset is not None:
            offsets[record.id].add((record.topic, record.partition, record.offset))

    def order(ids):  # by producer, then send order; unknown ids by name
        return sorted(ids, key=lambda id: (produced[id].producer, produced[id].seq)
                      if id in produced else (id, -1))

    delivered = [id for id in copies if id in produced]
    duplicated = {id: copies[id] for id in order(delivered) if copies[id] > 1}
    result = CheckResult(
        semantics=semantics,
        produced=len(produced),
        acknowledged=len(acknowledged),
        failed=len(failed),
        delivered=len(delivered),
        lost=order(acknowledged - copies.keys()),
        duplicated=duplicated,
        log_duplicates=sum(1 for id in duplicated if len(offsets[id]) > 1),
        reordered=_reordered(history.delivered, produced),
        unexpected={id: copies[id] for id in order(copies.keys() - produced.keys())},
        unacknowledged_delivered=order(set(delivered) - acknowledged),
        failed_delivered=order((set(delivered) & failed) - acknowledged),
        faults=history.faults,
    )
    if semantics == TRANSACTIONAL:
        result.aborted_reads = order(id for id in delivered if outcomes[id] == "aborted")
        result.uncommitted_reads = order(id for id in delivered
                                         if outcomes[id] == "uncommitted")
        result.transactions = _transaction_outcomes(history)
        result.aborted_records = sum(1 for outcome in outcomes.values() if outcome == "aborted")
    if planned is not None:
        result.fault_outcomes = fault_outcomes(
            history.faults, planned,
            acknowledged_times=[record.time for record in history.acknowledged])
    result.control = control
    result.warnings = _warnings(history, result)
    return result


def _record_outcomes(history: History, produced: dict) -> dict[str, str]:
    """Produced id -> committed, aborted, unknown or uncommitted (see the module doc)."""
    final: dict[str, str] = {}
    requested: set[str] = set()
    for transaction in history.transactions:
        if transaction.outcome in ("committed", "aborted"):
            final.update(dict.fromkeys(transaction.ids, transaction.outcome))
        else:  # committing, unknown
            requested.update(transaction.ids)
    return {id: final.get(id) or ("unknown" if id in requested else "uncommitted")
            for id in produced}


def _transaction_outcomes(history: History) -> dict[str, int]:
    """Transactions per outcome: committed, aborted, unknown (committing, never answered)."""
    last: dict[tuple[str, int], str] = {}
    for transaction in history.transactions:
        key = (transaction.producer, transaction.txn)
        if last.get(key) not in ("committed", "aborted"):
            last[key] = transaction.outcome
    counts = dict.fromkeys(("committed", "aborted", "unknown"), 0)
    for outcome in last.values():
        counts["unknown" if outcome == "committing" else outcome] += 1
    return counts


def _reordered(delivered: list[Delivered], produced: dict) -> list[Reorder]:
    """Records delivered after a record their producer sent later (see the module doc)."""
    by_partition: dict[tuple[str, int], list[tuple[int, float, int, Delivered]]] = \
        defaultdict(list)
    for index, record in enumerate(delivered):
        by_partition[(record.topic, record.partition)].append(
            (record.position, record.time, index, record))
    reordered = []
    for (topic, partition), copies in sorted(by_partition.items()):
        seen: set[str] = set()
        highest: dict[str, tuple[int, str]] = {}  # producer -> (seq, id) delivered so far
        for *_, record in sorted(copies, key=lambda item: item[:3]):
            if record.id in seen or record.id not in produced:
                continue
            seen.add(record.id)
            sent = produced[record.id]
            top = highest.get(sent.producer)
            if top is not None and sent.seq < top[0]:
                reordered.append(Reorder(record.id, top[1], topic, partition))
            else:
                highest[sent.producer] = (sent.seq, record.id)
    return reordered


def _warnings(history: History, result: CheckResult) -> list[str]:
    warnings = []
    if result.produced == 0:
        warnings.append("no record was produced: the run checked nothing")
    elif result.acknowledged == 0:
        warnings.append("no record was acknowledged: 'nothing lost' proves nothing")
    elif result.delivered == 0:
        warnings.append("nothing produced was delivered")
    if result.semantics == TRANSACTIONAL and result.produced and \
            not result.transactions.get("aborted"):
        warnings.append("no transaction was aborted: 'no aborted reads' proves nothing")
    if history.torn_lines:
        warnings.append(f"{history.torn_lines} torn history line(s) skipped "
                        "(a process was killed mid-write)")
    return warnings
