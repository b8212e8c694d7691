"""The producer workload: ``python -m oncelog.verify.workloads.producer``.

One process per producer. It sends records at a steady rate with the chosen semantics'
producer preset (``oncelog.client.producer``), each value carrying a unique id
(``encode_value(make_id(producer, seq))``), and records in its own history file:

- ``Produced`` *before* each send (a producer killed mid-send still leaves the attempt);
- ``Acknowledged`` or ``Failed`` from the delivery callback (offset ``None`` under
  ``acks=0``, where librdkafka reports -1).

Record ``seq`` goes to partition ``seq % partitions``, chosen by the producer, so the
checker can judge order per producer within each partition. The process stops after
``--duration`` seconds or on SIGTERM, then flushes for at most ``--flush-timeout`` seconds
(records still unanswered then are neither acknowledged nor failed: they promised nothing).
It prints ``ready`` when its first send was made and ``done N`` at the end.

**Transactional** (``--semantics transactional``): the exactly-once preset plus a stable
``transactional.id`` (``<topic>-<producer>``, so a producer started again fences its
predecessor and aborts what it left open). Records go out in transactions of 2-12 records,
which with ``seq % partitions`` span several partitions; each transaction is aborted with
probability ``--abort-probability`` (drawn from ``--seed`` and the producer's name, so a
seed replays the same decisions). The history gets a ``Transaction`` record per outcome:
``committing`` before ``commit_transaction()``, then ``committed``; ``aborted`` once
``abort_transaction()`` returned (a chosen abort, or a commit that failed with an abortable
error); ``unknown`` when a commit got no answer. A fatal error (fenced), or an abort that
fails, replaces the producer with a new instance of the same ``transactional.id``, whose
``init_transactions()`` aborts whatever the old one left open - without a ``committing``
record, such a transaction was never asked to commit (the checker's *uncommitted*).
"""

from __future__ import annotations

import argparse
import logging
import random
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...client.security import from_environment

if TYPE_CHECKING:
    from confluent_kafka import Producer

__all__ = ["command", "main"]


def command(*, bootstrap: str, topic: str, semantics: str, producer: str, history: str,
            rate: float, duration_s: float, partitions: int, payload_size: int = 100,
            flush_timeout_s: float = 30.0, seed: int = 0,
            abort_probability: float = 0.2, socket_timeout_ms: int | None = None) -> list[str]:
    extra = [] if socket_timeout_ms is None else ["--socket-timeout-ms", str(socket_timeout_ms)]
    return [sys.executable, "-m", "oncelog.verify.workloads.producer",
            "--bootstrap", bootstrap, "--topic", topic, "--semantics", semantics,
            "--producer", producer, "--history", history, "--rate", str(rate),
            "--duration", str(duration_s), "--partitions", str(partitions),
            "--payload-size", str(payload_size), "--flush-timeout", str(flush_timeout_s),
            "--seed", str(seed), "--abort-probability", str(abort_probability), *extra]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m oncelog.verify.workloads.producer")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--semantics", required=True,
                        choices=["at_most_once", "at_least_once", "exactly_once",
                                 "transactional"])
    parser.add_argument("--producer", required=True, help="producer name, e.g. p0")
    parser.add_argument("--history", required=True, help="this producer's history file")
    parser.add_argument("--rate", type=float, default=250.0, help="records per second")
    parser.add_argument("--duration", type=float, required=True, help="seconds")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--payload-size", type=int, default=100)
    parser.add_argument("--flush-timeout", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0, help="seeds the abort decisions")
    parser.add_argument("--abort-probability", type=float, default=0.2,
                        help="transactional: the chance that a transaction is aborted")
    parser.add_argument("--socket-timeout-ms", type=int, default=None,
                        help="librdkafka's socket.timeout.ms: how long a request waits for "
                             "its response before it is sent again (the reordered control "
                             "shortens it from 60 s)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from confluent_kafka import Producer

    from ...client.producer import producer_config
    from ..history import HistoryWriter
    from ..processes import die_with_parent

    die_with_parent()
    stopping = False

    def stop(*_) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the verifier decides when we stop
    quiet = logging.getLogger("oncelog.verify.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    # Retries must outlast a broker restart (1-3 s down, then recovery) and dropped acks.
    settings = {"linger.ms": 5, "message.timeout.ms": 60000, "request.timeout.ms": 5000,
                "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000,
                "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
                "queue.buffering.max.messages": 200000, "logger": quiet,
                **from_environment()}  # a secured broker: oncelog verify --command-config
    if args.socket_timeout_ms is not None:
        settings["socket.timeout.ms"] = args.socket_timeout_ms
    history = HistoryWriter(args.history)

    def delivered(id: str, error, message) -> None:
        if error is not None:
            history.failed(id, error.str())
        else:
            offset = message.offset()
            history.acknowledged(id, message.topic(), message.partition(),
                                 offset if offset is not None and offset >= 0 else None)

    sender = _Sender(args, history, delivered, lambda: stopping)
    if args.semantics == "transactional":
        # An abandoned transaction holds read_committed readers back until it times out;
        # librdkafka wants message.timeout.ms <= transaction.timeout.ms.
        settings.update({"transactional.id": f"{args.topic}-{args.producer}",
                         "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                         "message.timeout.ms": TRANSACTION_TIMEOUT_MS})
        config = producer_config("exactly_once", args.bootstrap, **settings)
        status = _Transactions(config, sender, history, args).run()
    else:
        producer = Producer(producer_config(args.semantics, args.bootstrap, **settings))
        while sender.send_next(producer):
            pass
        unanswered = producer.flush(args.flush_timeout)
        print(f"done {sender.seq} sent, {unanswered} unanswered", flush=True)
        status = 0
    history.close()
    return status


class _Sender:
    """Sends record after record at the steady rate, each with a ``Produced`` first."""

    def __init__(self, args, history, delivered: Callable, stopping: Callable[[], bool]) -> None:
        self.args = args
        self.history = history
        self.delivered = delivered
        self.stopping = stopping
        self.started = time.monotonic()
        self.interval = 1.0 / args.rate
        self.seq = 0

    @property
    def running(self) -> bool:
        return not self.stopping() and time.monotonic() - self.started < self.args.duration

    def send_next(self, producer) -> str | None:
        """Wait for the next record's turn and send it; its id, or None when it is time to
        stop."""
        from ..history import encode_value, make_id
        args = self.args
        while True:
            if not self.running:
                return None
            pause = self.started + self.seq * self.interval - time.monotonic()
            if pause <= 0:
                break
            producer.poll(min(pause, 0.1))
        seq = self.seq
        id = make_id(args.producer, seq)
        partition = seq % args.partitions
        self.history.produced(id, args.producer, seq, partition)
        value = encode_value(id, args.payload_size)
        while True:
            try:
                producer.produce(args.topic, value=value, partition=partition,
                                 on_delivery=lambda error, message, id=id:
                                 self.delivered(id, error, message))
                break
            except BufferError:
                producer.poll(0.05)
        if seq == 0:
            print("ready", flush=True)
        self.seq += 1
        producer.poll(0)
        return id


TRANSACTION_TIMEOUT_MS = 20000
TXN_RECORDS = (2, 12)          # records per transaction, at random
COMMIT_GIVE_UP_S = 60.0        # a commit unanswered this long has an unknown outcome
INIT_TIMEOUT_S = 30.0


class _Transactions:
    """The transactional loop: begin, send a few records, abort or commit, record which."""

    def __init__(self, config: dict, sender: _Sender, history, args) -> None:
        self.config = config
        self.sender = sender
        self.history = history
        self.args = args
        self.rng = random.Random(f"{args.seed}-{args.producer}")
        self.txn = 0
        self.outcomes = {"committed": 0, "aborted": 0, "unknown": 0, "abandoned": 0}
        self.producer: Producer | None = None

    def run(self) -> int:
        """0, or 1 when no producer instance could be initialised (the runner notes it)."""
        from confluent_kafka import KafkaException
        self._new_producer()
        while self.sender.running and self.producer is not None:
            size = self.rng.randint(*TXN_RECORDS)
            abort = self.rng.random() < self.args.abort_probability
            ids: list[str] = []
            try:
                self.producer.begin_transaction()
                while len(ids) < size and (id := self.sender.send_next(self.producer)):
                    ids.append(id)
                self._finish(ids, abort)
            except KafkaException as error:  # fatal (fenced), or an abort that failed
                self._abandon(error)
            self.txn += 1
        if self.producer is not None:
            self.producer.flush(self.args.flush_timeout)
        print(f"done {self.sender.seq} sent in {self.txn} transactions: "
              + ", ".join(f"{count} {name}" for name, count in self.outcomes.items()),
              flush=True)
        return 0 if self.producer is not None else 1

    def _new_producer(self) -> None:
        """A (new) instance of the transactional id: fences the old one, aborting what it
        left open. Retried while the coordinator is unavailable (the broker restarting)."""
        from confluent_kafka import KafkaException, Producer
        deadline = time.monotonic() + COMMIT_GIVE_UP_S
        while True:
            producer = Producer(self.config)
            try:
                producer.init_transactions(INIT_TIMEOUT_S)
                self.producer = producer
                return
            except KafkaException as error:
                print(f"init_transactions failed: {error.args[0].str()}", flush=True)
                if time.monotonic() > deadline or not error.args[0].retriable():
                    self.producer = None
                    return
                time.sleep(0.5)

    def _abandon(self, error) -> None:
        """Give the transaction up without a commit; a new instance aborts it."""
        print(f"transaction {self.txn} abandoned: {error.args[0].str()}", flush=True)
        self.outcomes["abandoned"] += 1
        self._new_producer()

    def _producer(self) -> Producer:
        assert self.producer is not None, "a transaction runs on a producer"
        return self.producer

    def _finish(self, ids: list[str], abort: bool) -> None:
        """Abort or commit, and record the outcome. An abort that fails raises: the
        transaction was never asked to commit, and is abandoned."""
        producer, history = self._producer(), self.history
        if abort or not ids:
            producer.abort_transaction(COMMIT_GIVE_UP_S)
            if ids:
                history.transaction(self.args.producer, self.txn, ids, "aborted")
                self.outcomes["aborted"] += 1
            return
        history.transaction(self.args.producer, self.txn, ids, "committing")
        outcome = self._commit()
        history.transaction(self.args.producer, self.txn, ids, outcome)
        self.outcomes[outcome] += 1
        if outcome == "unknown":
            self._new_producer()  # the old instance may be stuck in its commit

    def _commit(self) -> str:
        """committed, aborted (an abortable error, then a successful abort) or unknown."""
        from confluent_kafka import KafkaException
        producer = self._producer()
        deadline = time.monotonic() + COMMIT_GIVE_UP_S
        while True:
            try:
                producer.commit_transaction(10.0)
                return "committed"
            except KafkaException as error:
                kafka_error = error.args[0]
                if kafka_error.txn_requires_abort():
                    try:
                        producer.abort_transaction(COMMIT_GIVE_UP_S)
                        return "aborted"
                    except KafkaException:
                        return "unknown"
                if kafka_error.retriable() and time.monotonic() < deadline:
                    continue
                print(f"commit of transaction {self.txn} unanswered: {kafka_error.str()}",
                      flush=True)
                return "unknown"


if __name__ == "__main__":
    sys.exit(main())
