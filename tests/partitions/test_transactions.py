"""Transactions under a seeded random schedule of network partitions (issue 31): RF 3,
min.insync.replicas 2, one transactional producer committing or aborting (at random)
transactions over three partitions while brokers - the transaction coordinator's and the
partition leaders' most often - are isolated, split off, cut from one peer or from ZooKeeper
for about 90 s. After healing, a read_committed consumer sees every committed transaction
whole and once, no aborted record, and a transaction whose outcome the producer never learnt
all or nothing; the producer is never fenced (its coordinator moved, it was not replaced);
all replicas hold byte-identical logs, markers included."""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from confluent_kafka import KafkaException, Producer

from oncelog.cluster.isolation import missing_prerequisites
from oncelog.coordinator.record_codec import partition_for

from .conftest import SETTINGS
from .nemesis import (CLIENT, Schedule, assert_replicas_identical, create_topic, leader_of,
                      read_all, wait_in_sync)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.skipif(
    bool(missing_prerequisites()), reason="network namespaces need root, ip and nft: "
    + ", ".join(missing_prerequisites()))]

SECONDS = float(os.environ.get("ONCELOG_PARTITION_SECONDS", "90"))
TOPIC = "payments"
PARTITIONS = 3
TRANSACTIONAL_ID = "partitioned-payments"


@dataclass
class TransactionRun:
    """Transactions of 1-8 records each, committed (70 %) or aborted, one after another, each
    outcome as the producer learnt it: committed, aborted, or unknown (an error left it
    undecided for the client)."""
    bootstrap: str
    rng: random.Random
    committed: dict[int, list[bytes]] = field(default_factory=dict)
    aborted: dict[int, list[bytes]] = field(default_factory=dict)
    unknown: dict[int, list[bytes]] = field(default_factory=dict)
    fatal_errors: list[str] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)
    stop: threading.Event = field(default_factory=threading.Event)
    _error: BaseException | None = None

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
                                 "transactional.id": TRANSACTIONAL_ID,
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
                producer.produce(TOPIC, value, key=value)
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


def test_transactions_commit_whole_and_abort_clean_under_random_partitions(
        isolated_cluster, partition_seed):
    cluster = isolated_cluster()
    create_topic(cluster, TOPIC, PARTITIONS, **{"min.insync.replicas": "2"})
    coordinator_partition = partition_for(
        TRANSACTIONAL_ID, int(SETTINGS["transaction.state.log.num.partitions"]))
    schedule = Schedule(cluster, random.Random(partition_seed), targets=lambda: [
        leader_of(cluster, "__transaction_state", coordinator_partition),
        leader_of(cluster, TOPIC, 0)])
    run = TransactionRun(cluster.bootstrap, random.Random(partition_seed + 1))
    worker = threading.Thread(target=run.run, name="transactions", daemon=True)
    worker.start()
    try:
        time.sleep(3)  # the first transactions before the first fault
        schedule.run(SECONDS)
    finally:
        cluster.heal()
        run.stop.set()
        worker.join(200)
    if run._error is not None:
        raise run._error
    context = (f"seed {partition_seed}, errors {dict(run.errors)}, "
               f"schedule: {schedule.describe()}")
    wait_in_sync(cluster, TOPIC, PARTITIONS)
    assert len(run.committed) > SECONDS / 10, f"{len(run.committed)} committed; {context}"
    expected = {v for values in run.committed.values() for v in values}
    reads = read_all(cluster, TOPIC, PARTITIONS, "read_committed",
                     until=lambda reads: {r.value for r in reads} >= expected)
    counts = Counter(r.value for r in reads)
    lost = sorted(expected - counts.keys())
    repeated = sorted(v for v, n in counts.items() if n > 1)
    aborted_read = sorted({v for values in run.aborted.values() for v in values} & counts.keys())
    halves = {n: values for n, values in run.unknown.items()
              if 0 < len(set(values) & counts.keys()) < len(values)}
    assert not lost, f"{len(lost)} committed records missing, e.g. {lost[:5]}; {context}"
    assert not repeated, f"{len(repeated)} records twice, e.g. {repeated[:5]}; {context}"
    assert not aborted_read, f"aborted records read: {aborted_read[:5]}; {context}"
    assert not halves, f"transactions read in part: {halves}; {context}"
    assert not run.fatal_errors, f"the producer was fenced: {run.fatal_errors}; {context}"
    print(f"seed {partition_seed}: {len(run.committed)} committed, {len(run.aborted)} aborted, "
          f"{len(run.unknown)} unknown; errors {dict(run.errors)}")
    print(f"schedule: {schedule.describe()}")
    cluster.stop()
    assert_replicas_identical(cluster, TOPIC, PARTITIONS, context)
