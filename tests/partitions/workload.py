"""The producer side of the partition tests: a thread that sends unique values at a steady
rate and records, for each, when it was sent and what the broker acknowledged; the
unavailability each fault aimed at a leader caused, from those records; and a transactional
producer committing or aborting at random, each outcome as it learnt it."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, Producer

from .nemesis import CLIENT, Schedule


@dataclass
class Ack:
    partition: int
    offset: int
    sent_at: float
    acked_at: float


@dataclass
class ProducerRun:
    """Sends ``b"<prefix>-<n>"`` to ``topic`` (keyed by n, so spread over its partitions) at
    about ``rate`` records a second until ``stop``; ``acked`` maps each acknowledged value to
    where it was written, ``failed`` holds the values whose delivery failed, with the error."""
    bootstrap: str
    topic: str
    config: dict
    prefix: str = "r"
    rate: float = 200.0
    acked: dict[bytes, Ack] = field(default_factory=dict)
    failed: dict[bytes, str] = field(default_factory=dict)
    sent: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    _sent_at: dict[bytes, float] = field(default_factory=dict)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def start(self) -> ProducerRun:
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.topic}",
                                        daemon=True)
        self._thread.start()
        return self

    def finish(self, flush_timeout_s: float = 90.0) -> None:
        """Stop sending, wait for every outstanding answer (or its failure)."""
        self.stop.set()
        assert self._thread is not None
        self._thread.join(flush_timeout_s + 30)
        if self._error is not None:
            raise self._error

    def _on_delivery(self, error, message) -> None:
        value = message.value()
        if error is not None:
            self.failed[value] = error.str()
        else:
            self.acked[value] = Ack(message.partition(), message.offset(),
                                    self._sent_at[value], time.monotonic())

    def _run(self) -> None:
        try:
            producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                                 **CLIENT, **self.config})
            interval = 1.0 / self.rate
            next_at = time.monotonic()
            while not self.stop.is_set():
                value = b"%s-%d" % (self.prefix.encode(), self.sent)
                self._sent_at[value] = time.monotonic()
                try:
                    producer.produce(self.topic, value, key=str(self.sent).encode(),
                                     on_delivery=self._on_delivery)
                except BufferError:
                    producer.poll(0.1)
                    continue
                self.sent += 1
                next_at += interval
                producer.poll(max(next_at - time.monotonic(), 0))
            remaining = producer.flush(90)
            assert remaining == 0, f"{remaining} records neither acknowledged nor failed"
        except BaseException as error:  # reaches the test through finish()
            self._error = error


def unavailability(schedule: Schedule, acks: list[Ack], partition: int) -> list[tuple[str, float]]:
    """For each fault aimed at the partition's leader: its caption and the longest time
    without an acknowledgement on the partition from the fault to the next fault (or the
    end), in seconds."""
    times = sorted(a.acked_at for a in acks if a.partition == partition)
    figures = []
    events = schedule.events
    for index, event in enumerate(events):
        if not event.target_leader:
            continue
        start = schedule.started + event.at_s
        end = (schedule.started + events[index + 2].at_s if index + 2 < len(events)
               else time.monotonic())
        inside = [t for t in times if start <= t <= end]
        points = [start, *inside]
        gap = max((b - a for a, b in zip(points, points[1:], strict=False)), default=end - start)
        if not inside:
            gap = end - start
        figures.append((event.caption, round(gap, 2)))
    return figures


@dataclass
class TransactionRun:
    """Transactions of 1-8 records each, committed (70 %) or aborted, one after another, each
    outcome as the producer learnt it: committed, aborted, or unknown (an error left it
    undecided for the client)."""
    bootstrap: str
    topic: str
    transactional_id: str
    rng: random.Random
    committed: dict[int, list[bytes]] = field(default_factory=dict)
    aborted: dict[int, list[bytes]] = field(default_factory=dict)
    unknown: dict[int, list[bytes]] = field(default_factory=dict)
    fatal_errors: list[str] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)
    stop: threading.Event = field(default_factory=threading.Event)
    _error: BaseException | None = None
    _thread: threading.Thread | None = None

    def start(self) -> TransactionRun:
        self._thread = threading.Thread(target=self.run, name="transactions", daemon=True)
        self._thread.start()
        return self

    def finish(self) -> None:
        """Stop after the transaction under way; raise what stopped the thread, if anything."""
        self.stop.set()
        assert self._thread is not None
        self._thread.join(200)
        if self._error is not None:
            raise self._error

    def run(self) -> None:
        try:
            producer = self._new_producer()
            number = 0
            while not self.stop.is_set():
                number += 1
                values = [b"t%d-%d" % (number, i) for i in range(self.rng.randint(1, 8))]
                outcome = self._one(producer, values, commit=self.rng.random() < 0.7)
                {"committed": self.committed, "aborted": self.aborted,
                 "unknown": self.unknown}[outcome][number] = values
                if outcome == "unknown" and self._needs_new_producer:
                    producer = self._new_producer()
        except BaseException as error:
            self._error = error

    def _new_producer(self) -> Producer:
        self._needs_new_producer = False
        while True:
            producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                                 "transactional.id": self.transactional_id,
                                 "transaction.timeout.ms": 60000,
                                 "message.timeout.ms": 50000, **CLIENT})
            try:
                producer.init_transactions(60)
                return producer
            except KafkaException as error:
                self.errors[f"init: {error.args[0].name()}"] += 1
                if self.stop.is_set():
                    raise

    def _one(self, producer: Producer, values: list[bytes], commit: bool) -> str:
        try:
            producer.begin_transaction()
            for value in values:
                producer.produce(self.topic, value, key=value)
            producer.poll(0)
            if not commit:
                producer.abort_transaction(60)
                return "aborted"
        except KafkaException as error:
            return self._failed(producer, error.args[0], "produce")
        for _ in range(10):
            try:
                producer.commit_transaction(60)
                return "committed"
            except KafkaException as exception:
                error = exception.args[0]
                if not error.retriable() or error.txn_requires_abort() or error.fatal():
                    return self._failed(producer, error, "commit")
                self.errors[f"commit (retried): {error.name()}"] += 1
        return "unknown"

    def _failed(self, producer: Producer, error, step: str) -> str:
        self.errors[f"{step}: {error.name()}"] += 1
        if error.fatal():
            self.fatal_errors.append(f"{step}: {error.str()}")
            self._needs_new_producer = True
            return "unknown"
        if error.txn_requires_abort():
            try:
                producer.abort_transaction(60)
                return "aborted"
            except KafkaException as abort_error:
                self.errors[f"abort: {abort_error.args[0].name()}"] += 1
        self._needs_new_producer = True
        return "unknown"
