"""Fixtures for the partition tests (issue 31): an isolated cluster per test (every broker and
ZooKeeper node in a network namespace of its own), stopped - its namespaces with it - even
when the test fails; and the test's seed, printed with the failure so it can be replayed:

    ONCELOG_PARTITION_SEED=1234 pytest tests/partitions -k idempotent

``ONCELOG_PARTITION_SECONDS`` sets how long a random schedule runs (90 s by default).
"""

from __future__ import annotations

import os
import random

import pytest

from oncelog.cluster.local import LocalCluster

SESSION_MS = 3000
SETTINGS = {
    "zookeeper.session.timeout.ms": str(SESSION_MS),
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


@pytest.fixture
def partition_seed(request) -> int:
    """The seed of this test's schedule: ``ONCELOG_PARTITION_SEED`` or a fresh one."""
    given = os.environ.get("ONCELOG_PARTITION_SEED")
    seed = int(given) if given else random.SystemRandom().randrange(1 << 30)
    request.node.partition_seed = seed
    print(f"partition schedule seed {seed}")
    return seed


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    seed = getattr(item, "partition_seed", None)
    if seed is not None and report.failed:
        report.sections.append(("partition seed", f"replay with ONCELOG_PARTITION_SEED={seed} "
                                f"pytest {item.nodeid}"))
    return report


@pytest.fixture
def isolated_cluster(tmp_path):
    """``isolated_cluster(zookeepers=1, **settings)`` starts 3 brokers, each node in a
    namespace of its own; every cluster is stopped (network destroyed) afterwards."""
    started: list[LocalCluster] = []

    def start(zookeepers: int = 1, **settings: str) -> LocalCluster:
        cluster = LocalCluster(tmp_path / f"cluster-{len(started)}", 3, isolated=True,
                               zookeepers=zookeepers, settings={**SETTINGS, **settings})
        started.append(cluster)
        return cluster.start()

    yield start
    for cluster in started:
        cluster.stop()
