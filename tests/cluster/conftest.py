"""Fixtures for cluster tests: ``cluster_factory`` starts brokers (real processes) against the
session's real ZooKeeper, each test in a chroot of its own; every broker is stopped by pid
afterwards, paused ones resumed first, even when the test fails."""

from __future__ import annotations

import pytest

from oncelog.cluster.local import LocalCluster

from .helpers import FAST


@pytest.fixture
def cluster_factory(tmp_path, zookeeper_connect):
    started: list[LocalCluster] = []

    def start(brokers: int = 3, **settings: str) -> LocalCluster:
        cluster = LocalCluster(tmp_path / f"cluster-{len(started)}", brokers,
                               zookeeper_connect=zookeeper_connect,
                               settings={**FAST, **settings})
        started.append(cluster)
        return cluster.start()

    yield start
    for cluster in started:
        cluster.stop()
