"""``oncelog verify --brokers 3`` with network partitions (issue 31): the run starts its cluster
isolated - each broker and each of three ZooKeeper nodes in a network namespace of its own -
and cuts it: the leader cut off from everything, one ZooKeeper node of three isolated, the
leader's link to a follower cut one way. With replication factor 3, ``min.insync.replicas=2``
and unclean election off, at-least-once loses nothing; the report says what each cut did.
Real processes, real namespaces (root, ``ip`` and ``nft``: CI has them)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from oncelog.cluster.isolation import missing_prerequisites, remove_isolated_networks

from .test_verify import faults_of
from .verify_run import run_verify

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    bool(missing_prerequisites()), reason="network namespaces need "
    + ", ".join(missing_prerequisites()))]

PARTITIONS = ["partition-leader", "isolate-zookeeper", "cut-link"]


@contextmanager
def partitioned_run(out, *args: str, timeout: float) -> Iterator:
    """A verify run; afterwards nothing of its network is left (what a run killed half-way
    would leave is removed, and must not have been there)."""
    run = run_verify(out, *args, timeout=timeout)
    bridge = re.search(r"on bridge (\w+)br\b", run.stdout)
    try:
        yield run
    finally:
        if bridge is not None:
            assert remove_isolated_networks(bridge.group(1)) == [], "the run left namespaces"
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert bridge is not None and f"{bridge.group(1)}-" not in namespaces, run.explain()


def test_at_least_once_loses_nothing_when_the_network_is_cut(tmp_path):
    with partitioned_run(tmp_path / "out", "--semantics", "at-least-once", "--brokers", "3",
                         "--duration", "45", "--seed", "5", "--faults", ",".join(PARTITIONS),
                         timeout=300) as run:
        assert run.returncode == 0, run.explain()
        result = run.result["results"]["at_least_once"]
        assert result["contract_kept"] and result["counts"]["lost"] == 0, run.explain()
        assert result["counts"]["acknowledged"] > 1000, run.explain()
        injected = {e["name"]: e["detail"] for e in faults_of(run.result, "at_least_once")
                    if e["action"] == "inject"}
        healed = {e["name"]: e["detail"] for e in faults_of(run.result, "at_least_once")
                  if e["action"] == "heal"}
        assert set(injected) == set(healed) == set(PARTITIONS), run.explain()
        leader = injected["partition-leader"]
        assert leader["caption"] == f"isolate broker-{leader['broker']}" and leader["led"]
        assert injected["isolate-zookeeper"]["caption"].startswith("isolate zookeeper-")
        assert injected["isolate-zookeeper"]["zookeepers"] == 3
        cut = injected["cut-link"]
        assert cut["caption"] == f"cut broker-{cut['broker']} -> broker-{cut['follower']}"
        for name in PARTITIONS:
            assert healed[name]["cut_s"] >= 2.5, run.explain()
            assert "leaders_meanwhile" in healed[name]
        # the report's lines say what was cut and for how long
        assert re.search(r"partition-leader at [\d.]+ s landed: isolate broker-\d for [\d.]+ s",
                         run.stdout), run.stdout
        assert "isolated: every broker and ZooKeeper node in a network namespace" in run.stdout


def test_the_spark_pipeline_keeps_exactly_once_when_the_broker_it_reads_from_is_cut_off(
        tmp_path):
    """The exactly-once run - the PySpark copy job reading the topic into its sink - with the
    leader cut off twice (once past the 5 s session: the partitions it led move, and the
    source follows them) and the leader's link to a follower cut one way. Seed 11."""
    faults = ["partition-leader", "cut-link"]
    with partitioned_run(tmp_path / "out", "--semantics", "exactly-once", "--brokers", "3",
                         "--duration", "40", "--seed", "11", "--faults", ",".join(faults),
                         timeout=400) as run:
        assert run.returncode == 0, run.explain()
        result = run.result["results"]["exactly_once"]
        counts = result["counts"]
        assert result["contract_kept"], run.explain()
        assert counts["lost"] == counts["duplicated"] == counts["reordered"] == 0, \
            run.explain()
        assert counts["acknowledged"] > 1000, run.explain()
        healed = [e["detail"] for e in faults_of(run.result, "exactly_once")
                  if e["action"] == "heal" and e["name"] == "partition-leader"]
        assert any(h["cut_s"] > 5 for h in healed), run.explain()  # past the session
        assert result["unplanned_exits"]["count"] == 0, run.explain()
