"""RF 3, min.insync.replicas 2, an idempotent acks=all producer, and a seeded random schedule
of network partitions (isolate, split, cut-link, leader-from-ZooKeeper) for about 90 s
(issue 31): after healing, every acknowledged record is readable at the offset it was
acknowledged at, none is there twice, and all three replicas hold byte-identical logs."""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from oncelog.cluster.isolation import missing_prerequisites

from .nemesis import (Schedule, assert_replicas_identical, create_topic, leader_of, read_all,
                      wait_in_sync)
from .workload import ProducerRun, unavailability

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.skipif(
    bool(missing_prerequisites()), reason="network namespaces need root, ip and nft: "
    + ", ".join(missing_prerequisites()))]

SECONDS = float(os.environ.get("ONCELOG_PARTITION_SECONDS", "90"))
TOPIC = "ledger"
PARTITIONS = 3


def test_idempotent_acks_all_loses_and_repeats_nothing_under_random_partitions(
        isolated_cluster, partition_seed):
    cluster = isolated_cluster()
    create_topic(cluster, TOPIC, PARTITIONS, **{"min.insync.replicas": "2"})
    schedule = Schedule(cluster, random.Random(partition_seed),
                        targets=lambda: [leader_of(cluster, TOPIC, 0)])
    producer = ProducerRun(cluster.bootstrap, TOPIC, {
        "acks": "all", "enable.idempotence": True, "message.timeout.ms": 120000}).start()
    try:
        schedule.run(SECONDS)
    finally:
        cluster.heal()
        producer.finish()
    context = f"seed {partition_seed}, schedule: {schedule.describe()}"
    wait_in_sync(cluster, TOPIC, PARTITIONS)
    acked = producer.acked
    assert len(acked) > SECONDS * 50, f"only {len(acked)} acknowledged; {context}"

    reads = read_all(cluster, TOPIC, PARTITIONS, "read_uncommitted",
                     until=lambda reads: {r.value for r in reads} >= acked.keys())
    counts = Counter(r.value for r in reads)
    lost = sorted(acked.keys() - counts.keys())
    repeated = sorted(v for v, n in counts.items() if n > 1)
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}; {context}"
    assert not repeated, f"{len(repeated)} records twice, e.g. {repeated[:5]}; {context}"
    where = {r.value: (r.partition, r.offset) for r in reads}
    moved = [v for v, a in acked.items() if where[v] != (a.partition, a.offset)]
    assert not moved, f"{len(moved)} records not at their acknowledged offset; {context}"
    unknown = set(counts) - acked.keys() - producer.failed.keys()
    assert not unknown, f"records never sent: {sorted(unknown)[:5]}; {context}"

    figures = unavailability(schedule, list(acked.values()), 0)
    print(f"seed {partition_seed}: {len(acked)} acknowledged, {len(producer.failed)} failed "
          f"({Counter(producer.failed.values()).most_common(3)}), {len(reads)} read")
    print(f"schedule: {schedule.describe()}")
    print(f"longest gap without an acknowledgement on {TOPIC}-0 per fault at its leader: "
          f"{figures}")
    cluster.stop()
    assert_replicas_identical(cluster, TOPIC, PARTITIONS, context)
