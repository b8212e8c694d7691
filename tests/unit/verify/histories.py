"""Building synthetic histories: a clean run, then anomalies planted one at a time.

``Run`` plays a workload by hand: ``send`` records a Produced and (unless told otherwise) an
Acknowledged at the next offset of its partition; ``deliver`` records a Delivered copy at the
partition's next sink position. Time is a counter, so every record has a distinct time.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import count

from oncelog.verify.history import (Acknowledged, Delivered, Failed, FaultEvent, History,
                                    Produced, Transaction, make_id)

TOPIC = "verify"


class Run:
    def __init__(self) -> None:
        self.history = History()
        self._clock = count(1)
        self._seq: dict[str, int] = defaultdict(int)
        self._offset: dict[int, int] = defaultdict(int)
        self._position: dict[int, int] = defaultdict(int)
        self.offset_of: dict[str, int] = {}
        self.partition_of: dict[str, int] = {}
        self._txn: dict[str, int] = defaultdict(int)

    def now(self) -> float:
        return float(next(self._clock))

    def send(self, producer: str, partition: int = 0, *, ack: bool = True,
             written: bool = True) -> str:
        """Produce one record; ``written=False``: the broker never stored it (no offset)."""
        seq = self._seq[producer]
        self._seq[producer] += 1
        id = make_id(producer, seq)
        self.history.append(Produced(id, producer, seq, partition, self.now()))
        self.partition_of[id] = partition
        if written:
            self.offset_of[id] = self._offset[partition]
            self._offset[partition] += 1
        if ack:
            self.history.append(Acknowledged(id, TOPIC, partition, self.offset_of.get(id),
                                             self.now()))
        return id

    def fail(self, id: str, error: str = "MSG_TIMED_OUT") -> None:
        self.history.append(Failed(id, error, self.now()))

    def deliver(self, *ids: str, partition: int | None = None, offset: int | None = None) -> None:
        for id in ids:
            where = self.partition_of.get(id, 0) if partition is None else partition
            at = self.offset_of.get(id) if offset is None else offset
            self.history.append(Delivered(id, TOPIC, where, at, self._position[where],
                                          self.now()))
            self._position[where] += 1

    def transaction(self, producer: str, ids: list[str], *outcomes: str) -> None:
        """Record a transaction's outcomes in order, e.g. ("committing", "committed")."""
        txn = self._txn[producer]
        self._txn[producer] += 1
        for outcome in outcomes:
            self.history.append(Transaction(producer, txn, list(ids), outcome, self.now()))

    def fault(self, name: str, action: str, **detail) -> None:
        self.history.append(FaultEvent(name, action, self.now(), detail))


def clean_run(records: dict[str, int], partitions: int = 1) -> tuple[Run, list[str]]:
    """Each producer sends its records round-robin over the partitions; all are delivered
    in send order."""
    run = Run()
    ids = [run.send(producer, seq % partitions)
           for producer, n in records.items() for seq in range(n)]
    run.deliver(*ids)
    return run, ids
