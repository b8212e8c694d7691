"""The history of a verification run: what producers attempted and saw, what the sink holds,
and which faults happened when. The checker reads nothing else.

Records (one JSON object per line, ``"type"`` names the kind):

- ``Produced(id, producer, seq, partition, time)`` — a send was *attempted*. Written before
  the send, so a producer killed mid-send still leaves the attempt behind. ``seq`` is the
  producer's own send order (0, 1, 2, ...); ``partition`` is the one the producer chose, or
  ``None`` when the partitioner chose.
- ``Acknowledged(id, topic, partition, offset, time)`` — the producer saw a success.
  ``offset`` is ``None`` when the broker does not return one (``acks=0``).
- ``Failed(id, error, time)`` — the producer saw an error for this id.
- ``Delivered(id, topic, partition, offset, position, time)`` — the sink holds (or the
  consumer processed) one copy of this id; one record per copy. ``topic``/``partition``/
  ``offset`` say where the copy was read from; ``position`` orders the copies delivered from
  one partition: any number that grows in delivery order *across the whole run*, e.g. the
  row id of a table sink, the offset in an output topic, or the index in a final scan of the
  sink. (A per-process counter that restarts with a killed consumer does not qualify.)
- ``FaultEvent(name, action, time, detail)`` — a fault was injected, healed or executed.
- ``Transaction(producer, txn, ids, outcome, time)`` — a transactional producer's view of
  its ``txn``-th transaction, holding ``ids``: ``committing`` is written *before*
  ``commit_transaction()`` is called, then ``committed`` (the call returned) or ``aborted``
  (``abort_transaction()`` returned: the broker wrote the abort markers); ``unknown`` when
  the producer gave up without knowing (a commit that timed out and could not be aborted).
  A transaction that never got ``committing`` was never asked to commit; one that got
  ``committing`` and nothing after it (the producer died) has an unknown outcome too.

Every ``time`` is wall-clock seconds (``time.time()``): histories from several processes are
merged, and only the wall clock is shared between them.

Record ids are strings ``"<producer>-<seq:06d>"`` (``make_id("p0", 123) == "p0-000123"``),
carried in the record value by ``encode_value`` and read back by ``decode_value``, so
workloads and sinks agree on one format: a JSON object ``{"id": ..., "pad": "xxx..."}``
(Spark can read it with ``get_json_object(value, '$.id')``).

Persistence: ``HistoryWriter(path)`` appends one line per record and flushes it to the OS at
once, so a process killed with ``kill -9`` loses at most the line it was writing. Each
process writes its own file (one writer per file); ``History.load(*paths)`` merges them.
A torn last line (a process killed mid-write) is skipped and counted in ``torn_lines``; an
unreadable line anywhere else is corruption and raises ``HistoryError``. A writer reopening
a file whose last line is torn cuts that line off first, so appending never buries it.
"""

from __future__ import annotations

import json
import os
import threading
import time as _time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Acknowledged", "Delivered", "Failed", "FaultEvent", "History", "HistoryError",
    "HistoryWriter", "Produced", "Record", "Transaction", "TXN_OUTCOMES", "decode_value",
    "encode_value", "make_id",
    "record_from_dict", "record_to_dict",
]


class HistoryError(ValueError):
    """A history file is unreadable (not a torn last line: real corruption)."""


@dataclass(frozen=True)
class Produced:
    id: str
    producer: str
    seq: int
    partition: int | None
    time: float


@dataclass(frozen=True)
class Acknowledged:
    id: str
    topic: str
    partition: int
    offset: int | None
    time: float


@dataclass(frozen=True)
class Failed:
    id: str
    error: str
    time: float


@dataclass(frozen=True)
class Delivered:
    id: str
    topic: str
    partition: int
    offset: int | None
    position: int
    time: float


@dataclass(frozen=True)
class FaultEvent:
    name: str       # kill-broker, kill-consumer, kill-driver, drop-acks, ...
    action: str     # inject, heal or execute
    time: float
    detail: dict[str, Any] = field(default_factory=dict)


TXN_OUTCOMES = ("committing", "committed", "aborted", "unknown")


@dataclass(frozen=True)
class Transaction:
    producer: str
    txn: int        # the producer's own transaction number (0, 1, 2, ...)
    ids: list[str]  # the records produced in it
    outcome: str    # one of TXN_OUTCOMES
    time: float


Record = Produced | Acknowledged | Failed | Delivered | FaultEvent | Transaction

_TYPES: dict[str, type] = {"produced": Produced, "acknowledged": Acknowledged,
                           "failed": Failed, "delivered": Delivered, "fault": FaultEvent,
                           "transaction": Transaction}
_NAMES = {cls: name for name, cls in _TYPES.items()}


def record_to_dict(record: Record) -> dict[str, Any]:
    return {"type": _NAMES[type(record)], **asdict(record)}


def record_from_dict(data: dict[str, Any]) -> Record:
    if not isinstance(data, dict):
        raise HistoryError(f"a history record is a JSON object, not {data!r}")
    fields = dict(data)
    kind = fields.pop("type", None)
    cls = _TYPES.get(kind)
    if cls is None:
        raise HistoryError(f"unknown history record type {kind!r}")
    try:
        return cls(**fields)
    except TypeError as error:
        raise HistoryError(f"bad {kind} record {data!r}: {error}") from None


def _line(record: Record) -> bytes:
    return (json.dumps(record_to_dict(record), separators=(",", ":")) + "\n").encode()


# -- record ids and values ---------------------------------------------------------------

def make_id(producer: str, seq: int) -> str:
    """The id of ``producer``'s ``seq``-th record: ``make_id("p0", 123) == "p0-000123"``."""
    return f"{producer}-{seq:06d}"


def encode_value(id: str, payload_size: int = 0) -> bytes:
    """A record value carrying ``id``, padded to at least ``payload_size`` bytes."""
    bare = json.dumps({"id": id, "pad": ""}, separators=(",", ":"))
    return json.dumps({"id": id, "pad": "x" * max(0, payload_size - len(bare))},
                      separators=(",", ":")).encode()


def decode_value(value: bytes | str) -> str:
    """The id carried by a value from ``encode_value``; ``ValueError`` for any other value."""
    try:
        data = json.loads(value)
    except (TypeError, UnicodeDecodeError, json.JSONDecodeError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        shown = value[:40] if isinstance(value, (bytes, str)) else value
        raise ValueError(f"not a verifier record value: {shown!r}")
    return data["id"]


# -- the container ------------------------------------------------------------------------

class History:
    """Records of one run, merged from any number of files; grouped by kind for the checker."""

    def __init__(self, records: Iterable[Record] = (), *, torn_lines: int = 0) -> None:
        self.records: list[Record] = list(records)
        self.torn_lines = torn_lines

    def append(self, record: Record) -> None:
        self.records.append(record)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, History) and self.records == other.records
                and self.torn_lines == other.torn_lines)

    def _of(self, cls: type) -> list:
        return [record for record in self.records if type(record) is cls]

    @property
    def produced(self) -> list[Produced]:
        return self._of(Produced)

    @property
    def acknowledged(self) -> list[Acknowledged]:
        return self._of(Acknowledged)

    @property
    def failed(self) -> list[Failed]:
        return self._of(Failed)

    @property
    def delivered(self) -> list[Delivered]:
        return self._of(Delivered)

    @property
    def faults(self) -> list[FaultEvent]:
        return self._of(FaultEvent)

    @property
    def transactions(self) -> list[Transaction]:
        return self._of(Transaction)

    def save(self, path: str | os.PathLike) -> None:
        """Write every record to ``path`` (replacing it) as JSON Lines."""
        with open(path, "wb") as file:
            file.writelines(_line(record) for record in self.records)

    @classmethod
    def load(cls, *paths: str | os.PathLike) -> History:
        """Merge history files; a directory stands for its ``*.jsonl`` files.

        Records keep their order within a file; the merge is a stable sort on ``time``.
        """
        records: list[Record] = []
        torn = 0
        for path in _expand(paths):
            file_records, file_torn = _read_file(path)
            records.extend(file_records)
            torn += file_torn
        records.sort(key=lambda record: record.time)
        return cls(records, torn_lines=torn)


def _expand(paths: Iterable[str | os.PathLike]) -> Iterator[Path]:
    for path in map(Path, paths):
        if path.is_dir():
            yield from sorted(path.glob("*.jsonl"))
        else:
            yield path


def _read_file(path: Path) -> tuple[list[Record], int]:
    lines = path.read_bytes().split(b"\n")
    # A complete file ends with "\n", leaving an empty last element; anything else there is
    # a line its writer never finished.
    complete, tail = lines[:-1], lines[-1]
    records = []
    for number, line in enumerate(complete, start=1):
        if not line.strip():
            continue
        try:
            records.append(record_from_dict(json.loads(line)))
        except (ValueError, UnicodeDecodeError) as error:
            raise HistoryError(f"{path}:{number}: unreadable history line: {error}") from None
    if not tail.strip():
        return records, 0
    try:
        # killed after the last byte of the record but before its newline: still whole
        records.append(record_from_dict(json.loads(tail)))
        return records, 0
    except (ValueError, UnicodeDecodeError):
        return records, 1


class HistoryWriter:
    """Appends records to one JSON Lines file; one writer per file, one file per process.

    Each record is one ``write`` of a whole line, flushed to the OS at once (``fsync=True``
    also survives a machine crash, at a cost). Thread-safe, so producer delivery callbacks
    and the main loop may share a writer. The convenience methods stamp ``time`` from
    ``clock`` (``time.time`` unless a test injects another).
    """

    def __init__(self, path: str | os.PathLike, *, clock: Callable[[], float] = _time.time,
                 fsync: bool = False) -> None:
        self.path = Path(path)
        self.clock = clock
        self.fsync = fsync
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _repair_torn_tail(self.path)
        self._file = open(self.path, "ab", buffering=0)
        self._lock = threading.Lock()

    def append(self, record: Record) -> None:
        line = _line(record)
        with self._lock:
            self._file.write(line)
            if self.fsync:
                os.fsync(self._file.fileno())

    def produced(self, id: str, producer: str, seq: int, partition: int | None = None) -> None:
        self.append(Produced(id, producer, seq, partition, self.clock()))

    def acknowledged(self, id: str, topic: str, partition: int, offset: int | None) -> None:
        self.append(Acknowledged(id, topic, partition, offset, self.clock()))

    def failed(self, id: str, error: str) -> None:
        self.append(Failed(id, error, self.clock()))

    def delivered(self, id: str, topic: str, partition: int, offset: int | None,
                  position: int) -> None:
        self.append(Delivered(id, topic, partition, offset, position, self.clock()))

    def fault(self, name: str, action: str, **detail: Any) -> None:
        self.append(FaultEvent(name, action, self.clock(), detail))

    def transaction(self, producer: str, txn: int, ids: list[str], outcome: str) -> None:
        self.append(Transaction(producer, txn, list(ids), outcome, self.clock()))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _repair_torn_tail(path: Path) -> None:
    """Cut a torn last line off ``path`` (or finish it, if only its newline is missing)."""
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    try:
        record_from_dict(json.loads(data[start:]))
    except (ValueError, UnicodeDecodeError):
        with open(path, "r+b") as file:
            file.truncate(start)
        return
    with open(path, "ab") as file:
        file.write(b"\n")
