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
import time
from collections import Counter

import pytest

from oncelog.cluster.isolation import missing_prerequisites
from oncelog.coordinator.record_codec import partition_for

from .conftest import SETTINGS
from .nemesis import (Schedule, assert_replicas_identical, create_topic, leader_of, read_all,
                      wait_in_sync)
from .workload import TransactionRun

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.skipif(
    bool(missing_prerequisites()), reason="network namespaces need root, ip and nft: "
    + ", ".join(missing_prerequisites()))]

SECONDS = float(os.environ.get("ONCELOG_PARTITION_SECONDS", "90"))
TOPIC = "payments"
PARTITIONS = 3
TRANSACTIONAL_ID = "partitioned-payments"


def test_transactions_commit_whole_and_abort_clean_under_random_partitions(
        isolated_cluster, partition_seed):
    cluster = isolated_cluster()
    create_topic(cluster, TOPIC, PARTITIONS, **{"min.insync.replicas": "2"})
    coordinator_partition = partition_for(
        TRANSACTIONAL_ID, int(SETTINGS["transaction.state.log.num.partitions"]))
    schedule = Schedule(cluster, random.Random(partition_seed), targets=lambda: [
        leader_of(cluster, "__transaction_state", coordinator_partition),
        leader_of(cluster, TOPIC, 0)])
    run = TransactionRun(cluster.bootstrap, TOPIC, TRANSACTIONAL_ID,
                         random.Random(partition_seed + 1)).start()
    try:
        time.sleep(3)  # the first transactions before the first fault
        schedule.run(SECONDS)
    finally:
        cluster.heal()
        run.finish()
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
