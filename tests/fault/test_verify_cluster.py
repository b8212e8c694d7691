"""``oncelog verify --brokers 3``: the verifier's workloads on a cluster it starts (ZooKeeper
and three broker processes), with the cluster faults: ``kill-leader`` (kill -9 of the broker
leading the most partitions, then a restart) and ``pause-broker`` (SIGSTOP, then SIGCONT).
With replication factor 3, ``min.insync.replicas=2`` and unclean election off, at-least-once
loses nothing and exactly-once neither loses nor duplicates; Ctrl-C in the middle of a pause
still stops every process, the paused broker and ZooKeeper included.

Each run is short (25-30 s of workload); the seeds are chosen so that a pause outlasts the
cluster's 5 s ZooKeeper session in one run and not in the other.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from .test_verify import assert_schedule_played, faults_of
from .verify_run import (command_line, descendants, interruptible, run_verify, running, stop_run,
                         verify_command, wait_for)

pytestmark = pytest.mark.slow

CLUSTER_FAULTS = ["kill-leader", "pause-broker"]


def events(run, semantics: str, name: str, action: str) -> list[dict]:
    return [e["detail"] for e in faults_of(run.result, semantics)
            if e["name"] == name and e["action"] == action]


def assert_cluster_faults_landed(run, semantics: str) -> None:
    """Each kill hit the broker that led the most partitions; each pause a broker; every
    broker process the run started is gone after it."""
    kills = events(run, semantics, "kill-leader", "inject")
    pauses = events(run, semantics, "pause-broker", "inject")
    assert kills and pauses, run.explain()
    for kill in kills:
        assert kill["broker"] in (1, 2, 3) and kill["led"] and kill["signal"] == "SIGKILL", \
            run.explain()
    for pause in pauses:
        assert pause["broker"] in (1, 2, 3) and pause["signal"] == "SIGSTOP", run.explain()
        assert pause["session_timeout_ms"] == 5000, run.explain()
    healed = events(run, semantics, "pause-broker", "heal")
    assert [h["signal"] for h in healed] == ["SIGCONT"] * len(pauses), run.explain()
    details = run.result["runs"][semantics]
    assert (details["brokers"], details["replication_factor"]) == (3, 3), run.explain()
    assert details["min.insync.replicas"] == "2", run.explain()
    assert details["unclean.leader.election.enable"] == "false", run.explain()
    pids = [e["pid"] for e in kills + pauses + events(run, semantics, "kill-leader", "heal")]
    assert not [pid for pid in pids if running(pid)], "a broker outlived the run"
    for node in (1, 2, 3):
        assert (run.out / "cluster" / f"broker-{node}" / "broker.log").exists()


def test_at_least_once_on_a_cluster_loses_nothing_when_leaders_die_and_brokers_pause(tmp_path):
    """Seed 31: the leader of a partition is killed at 4.1 s for 2 s; a broker is paused
    at 8.9 s for 8.3 s, longer than its ZooKeeper session."""
    run = run_verify(tmp_path / "out", "--semantics", "at-least-once", "--brokers", "3",
                     "--duration", "25", "--seed", "31", "--faults", ",".join(CLUSTER_FAULTS))
    assert run.returncode == 0, run.explain()
    result = run.result["results"]["at_least_once"]
    counts = result["counts"]
    assert result["contract_kept"] and counts["lost"] == 0, run.explain()
    assert counts["acknowledged"] > 1000, run.explain()
    assert_schedule_played(run, "at_least_once", CLUSTER_FAULTS, 25)
    assert_cluster_faults_landed(run, "at_least_once")
    assert any(p["outlasts_session"] for p in events(run, "at_least_once", "pause-broker",
                                                     "inject")), run.explain()
    assert "3 brokers, replication factor 3" in run.stdout, run.explain()
    # The static consumer's session outlasts the coordinator's failover: librdkafka never
    # times it out and gets fenced (a fatal error that would stop a user's consumer).
    assert result["unplanned_exits"]["count"] == 0, run.explain()


def test_exactly_once_on_a_cluster_neither_loses_nor_duplicates(tmp_path):
    """Seed 32: a leader killed at 8.4 s for 2.9 s; a broker paused at 20.8 s for 3.2 s,
    within its session. The idempotent producer's retries to the new leaders are still
    recognised (producer state is rebuilt on followers), and the pipeline's sink skips
    nothing it should keep."""
    run = run_verify(tmp_path / "out", "--semantics", "exactly-once", "--brokers", "3",
                     "--duration", "30", "--seed", "32", "--faults", ",".join(CLUSTER_FAULTS),
                     timeout=300)
    assert run.returncode == 0, run.explain()
    result = run.result["results"]["exactly_once"]
    counts = result["counts"]
    assert result["contract_kept"], run.explain()
    assert counts["lost"] == counts["duplicated"] == counts["reordered"] == 0, run.explain()
    assert counts["acknowledged"] > 1000, run.explain()
    assert counts["delivered"] >= counts["acknowledged"], run.explain()
    assert_schedule_played(run, "exactly_once", CLUSTER_FAULTS, 30)
    assert_cluster_faults_landed(run, "exactly_once")


def test_ctrl_c_during_a_pause_stops_the_whole_cluster(tmp_path):
    """SIGINT while a broker is stopped by SIGSTOP (seed 13 pauses one at 3.0 s for 7.6 s):
    the verifier exits 130, and nothing it started survives - not the paused broker (a
    stopped process cannot act on SIGTERM; LocalCluster.stop sends SIGCONT first), not
    ZooKeeper (which runs in a session of its own), not the producers or the consumer."""
    out = tmp_path / "out"
    args = ["--semantics", "at-least-once", "--brokers", "3", "--faults", "pause-broker",
            "--duration", "20", "--seed", "13"]
    log = open(tmp_path / "verify.log", "w+")
    tree: list[int] = []
    verify = subprocess.Popen(verify_command(out, *args), stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, preexec_fn=interruptible)
    try:
        wait_for(lambda: "pause-broker inject" in Path(log.name).read_text(), 90,
                 "a broker to be paused")
        tree = descendants(verify.pid)
        names = " | ".join(command_line(pid) for pid in tree)
        assert "java" in names and names.count("oncelog broker") == 3, names
        verify.send_signal(signal.SIGINT)
        assert verify.wait(60) == 130, Path(log.name).read_text()[-3000:]
        wait_for(lambda: not any(running(pid) for pid in tree), 10,
                 "every process of the run to stop")
        assert "interrupted; every process the run started was stopped" in \
            Path(log.name).read_text()
    finally:  # a failing test still leaves nothing running, paused or not
        stop_run(verify, tree, 60)
        log.close()
