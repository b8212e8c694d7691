"""``oncelog verify`` end to end: per semantics, a short run under faults keeps its contract;
a deliberately broken configuration is caught; bad input stops before anything runs; and
Ctrl-C stops every process a run started.

Every run goes through the CLI as a subprocess and is judged from its ``result.json``;
assertion messages carry the seed, so a failure can be replayed with ``--seed``.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oncelog.broker.process import free_port
from oncelog.verify.schedule import FaultSchedule

from .verify_run import (command_line, descendants, interruptible, run_verify, running, stop_run,
                         verify_command,
                         wait_for)


def faults_of(result: dict, semantics: str) -> list[dict]:
    return result["results"][semantics]["faults"]


def assert_schedule_played(run, semantics: str, faults: list[str], duration_s: float,
                           label: str | None = None) -> None:
    """The run used the seeded schedule, and injected and healed every fault in it
    (``label``: "all" for a run of several semantics, which share one schedule)."""
    result = run.result
    expected = FaultSchedule.generate(result["seed"], faults, duration_s,
                                      label or semantics.replace("_", "-"))
    assert result["schedule"] == expected.to_dict(), run.explain()
    events = faults_of(result, semantics)
    for fault in expected:
        injected = [e for e in events if e["name"] == fault.name and e["action"] == "inject"
                    and e["detail"]["at_s"] == fault.at_s]
        healed = [e for e in events if e["name"] == fault.name and e["action"] == "heal"
                  and e["detail"]["at_s"] == fault.heal_at_s]
        assert len(injected) == 1 and len(healed) == 1, f"{fault}: {events}\n{run.explain()}"
        # on time, give or take the shift while a target recovered (faults.nemesis)
        detail = injected[0]["detail"]
        assert abs(detail["elapsed_s"] - fault.at_s - detail["delay_s"]) < 1.0, run.explain()


def dropped_acks(result: dict, semantics: str) -> int:
    """Produce responses the run's proxy dropped (drop-acks' heal events)."""
    return sum(e["detail"]["dropped"] for e in faults_of(result, semantics)
               if e["name"] == "drop-acks" and e["action"] == "heal")


def landed(result: dict, semantics: str, name: str) -> list[str]:
    return [e["detail"].get("landed", "") for e in faults_of(result, semantics)
            if e["name"] == name and e["action"] == "inject"]


# -- a short run per semantics, with faults: each contract holds --------------------------

@pytest.mark.slow
def test_at_most_once_run_loses_records_and_never_duplicates(tmp_path):
    faults = ["kill-consumer", "kill-broker"]
    run = run_verify(tmp_path / "out", "--semantics", "at-most-once", "--duration", "16",
                     "--seed", "10", "--faults", ",".join(faults))
    assert run.returncode == 0, run.explain()
    result = run.result["results"]["at_most_once"]
    counts = result["counts"]
    assert result["contract_kept"] and counts["duplicated"] == 0, run.explain()
    assert counts["acknowledged"] > 1000 and counts["delivered"] > 1000, run.explain()
    assert_schedule_played(run, "at_most_once", faults, 16)
    # the consumer died between committing a batch and processing it: that batch is lost
    batches = [re.match(r"committed (\d+) records, not processed", where)
               for where in landed(run.result, "at_most_once", "kill-consumer")]
    assert batches and all(batches), run.explain()
    assert counts["lost"] >= sum(int(batch.group(1)) for batch in batches) > 0, run.explain()
    assert "at-most-once" in run.stdout and "✔" in run.stdout


@pytest.mark.slow
def test_at_least_once_run_loses_nothing_under_faults(tmp_path):
    faults = ["kill-consumer", "kill-broker", "drop-acks"]
    run = run_verify(tmp_path / "out", "--semantics", "at-least-once", "--duration", "20",
                     "--seed", "11", "--faults", ",".join(faults))
    assert run.returncode == 0, run.explain()
    result = run.result["results"]["at_least_once"]
    counts = result["counts"]
    assert result["contract_kept"] and counts["lost"] == 0, run.explain()
    assert counts["acknowledged"] > 1000, run.explain()
    assert_schedule_played(run, "at_least_once", faults, 20)
    # the consumer died between processing a batch and committing it: that batch came again
    batches = [re.match(r"processed (\d+) records, not committed", where)
               for where in landed(run.result, "at_least_once", "kill-consumer")]
    assert batches and all(batches), run.explain()
    assert counts["duplicated"] >= max(int(batch.group(1)) for batch in batches) > 0, \
        run.explain()
    dropped = sum(e["detail"]["dropped"] for e in faults_of(run.result, "at_least_once")
                  if e["name"] == "drop-acks" and e["action"] == "heal")
    assert dropped > 0, run.explain()
    # what each fault did, as result.json and the report's caption tell it
    assert result["verdict"] == "kept" and run.result["verdict"] == "kept", run.explain()
    outcomes = result["fault_outcomes"]
    assert [o["name"] for o in outcomes] == [f.name for f in FaultSchedule.generate(
        11, faults, 20, "at-least-once")], run.explain()
    assert all(o["landed"] for o in outcomes if o["name"] != "drop-acks"), run.explain()
    for outcome in outcomes:
        if outcome["name"] == "drop-acks":
            assert outcome["dropped"] is not None, run.explain()
            continue
        assert outcome["pid"] > 0 and 0 <= outcome["down_s"] < 10, run.explain()
        assert outcome["restarted_pid"] not in (None, outcome["pid"]), run.explain()
    assert sum(o["dropped"] for o in outcomes if o["name"] == "drop-acks") == dropped
    for broker in (o for o in outcomes if o["name"] == "kill-broker"):
        assert broker["down_s"] >= 1.0, run.explain()
        assert broker["clients_saw_restart"] and broker["acknowledged_after_restart"] > 0, \
            run.explain()
    kill = next(o for o in outcomes if o["name"] == "kill-consumer")
    assert f"kill-consumer {kill['elapsed_s']:.1f} s (pid {kill['pid']}, down " in run.stdout
    assert "faults that happened" in run.stdout and "✔" in run.stdout, run.explain()


@pytest.mark.slow
@pytest.mark.timeout(600)  # ~1-2 min; Spark's JVM starts slowly on a machine under load
def test_exactly_once_pipeline_run_neither_loses_nor_duplicates(tmp_path):
    """The Spark copy job is killed right after the sink committed a batch and before
    Spark recorded it, so the restarted query runs that batch again: the TransactionalSink
    must skip it. Meanwhile the broker is killed and acknowledgements are dropped."""
    faults = ["kill-driver", "drop-acks", "kill-broker"]
    run = run_verify(tmp_path / "out", "--semantics", "exactly-once", "--duration", "25",
                     "--seed", "21", "--faults", ",".join(faults), timeout=540)
    assert run.returncode == 0, run.explain()
    result = run.result["results"]["exactly_once"]
    counts = result["counts"]
    assert result["contract_kept"], run.explain()
    assert counts["lost"] == counts["duplicated"] == counts["reordered"] == 0, run.explain()
    assert counts["acknowledged"] > 1000, run.explain()
    assert counts["delivered"] >= counts["acknowledged"], run.explain()
    assert_schedule_played(run, "exactly_once", faults, 25)
    log = (run.out / "logs" / "exactly-once-copy-job.log").read_text()
    # Where each kill landed is read from the checkpoint and the sink after the kill, not
    # assumed from the timing: the dangerous window (the sink committed batch N, Spark's
    # commit log has not) was hit, and the restarted query ran that batch again, which the
    # sink skipped (nothing duplicated).
    kills = [o for o in result["fault_outcomes"] if o["name"] == "kill-driver"]
    assert kills and all(o["landed"] and o["window"] for o in kills), run.explain()
    dangerous = [o["window"] for o in kills
                 if o["window"]["id"] == "after_sink_before_commit_log"]
    assert dangerous, [o["window"] for o in kills]
    for window in dangerous:
        batch = window["batch"]
        assert window["sink_batch"] == batch and (window["spark_commit"] or -1) < batch
        assert window["name"] == "after the sink's transaction, before Spark's commit log"
        runs = re.findall(rf"\] batch {batch} written$", log, re.MULTILINE)
        assert len(runs) >= 2, f"batch {batch} was not run again\n{run.explain()}"
    assert "after the sink's transaction, before Spark's commit log" in run.stdout
    dropped = sum(e["detail"]["dropped"] for e in faults_of(run.result, "exactly_once")
                  if e["name"] == "drop-acks" and e["action"] == "heal")
    assert dropped > 0, run.explain()


@pytest.mark.slow
def test_an_existing_cluster_given_with_bootstrap_is_used_and_left_running(tmp_path,
                                                                           oncelog_cluster):
    """``--bootstrap`` with one broker of a cluster the run did not start: its topic appears
    there with the cluster's own replication factor (3; the verifier gives its own broker's
    topics one replica), drop-acks goes through a proxy in front of *each* broker the cluster
    advertises, and every broker is left running.

    Before: one proxy in front of the broker named by --bootstrap rewrote every broker's
    address to itself, so requests for the other brokers' partitions went to that one; and
    the topics got one replica whatever the cluster's settings."""
    faults = ["kill-consumer", "drop-acks"]
    bootstrap = oncelog_cluster.direct_bootstrap.split(",")[1]
    run = run_verify(tmp_path / "out", "--semantics", "at-least-once", "--duration", "10",
                     "--seed", "12", "--faults", ",".join(faults), "--bootstrap", bootstrap)
    assert run.returncode == 0, run.explain()
    counts = run.result["results"]["at_least_once"]["counts"]
    assert counts["lost"] == 0 and counts["acknowledged"] > 500, run.explain()
    assert_schedule_played(run, "at_least_once", faults, 10)
    assert dropped_acks(run.result, "at_least_once") > 0, run.explain()
    assert not (run.out / "broker").exists(), "the run started a broker of its own"
    pids = oncelog_cluster.pids()
    assert len(pids) == 4 and all(running(pid) for pid in pids), \
        "the run stopped a broker it did not start"
    details = run.result["runs"]["at_least_once"]
    assert details["replication_factor"] == 3, run.explain()
    from confluent_kafka.admin import AdminClient
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    partitions = topics[details["topic"]].partitions.values()
    assert {len(partition.replicas) for partition in partitions} == {3}, run.explain()
    # the partitions are led by all three brokers, and acknowledgements were dropped in
    # front of each: the producers reached every leader through a proxy of its own
    assert {partition.leader for partition in partitions} == set(oncelog_cluster.node_ids)
    by_broker = details["proxy_dropped_by_broker"]
    assert sorted(by_broker) == sorted(oncelog_cluster.direct_bootstrap.split(",")), by_broker
    assert all(count > 0 for count in by_broker.values()), run.explain()


@pytest.mark.slow
@pytest.mark.timeout(600)  # ~2 min: two Spark drivers start; CI once saw 40 s for one
def test_runs_into_postgresql_keep_their_contracts(tmp_path, postgres_url):
    """``--sink postgresql://...``: the at-least-once consumer and the exactly-once Spark
    pipeline deliver into a real PostgreSQL server, a table per semantics; the driver is
    killed after the sink committed a batch, so the replayed batch meets PostgreSQL's
    marker and is skipped (the at-least-once consumer is killed at a random moment). What
    the checker read is what the tables hold.

    Seed 26 schedules one kill: each Spark restart costs 30-40 s on this machine, and the
    next fault waits for the job to be back, so three kills made this a 5-minute test in CI."""
    import psycopg

    run = run_verify(tmp_path / "out", "--semantics", "at-least-once,exactly-once",
                     "--duration", "20", "--seed", "26", "--faults", "kill-driver",
                     "--sink", postgres_url, timeout=540)
    assert [f["name"] for f in run.result["schedule"]["faults"]] == ["kill-driver"]
    assert run.returncode == 0, run.explain()
    with psycopg.connect(postgres_url) as connection:
        for semantics in ("at_least_once", "exactly_once"):
            result = run.result["results"][semantics]
            assert result["contract_kept"], run.explain()
            assert result["counts"]["lost"] == 0, run.explain()
            assert result["counts"]["acknowledged"] > 1000, run.explain()
            rows = connection.execute(
                f"SELECT count(*) FROM oncelog_verify_{semantics}").fetchone()[0]
            assert rows == run.result["runs"][semantics]["sink_rows"] > 0, run.explain()
            assert "table oncelog_verify_" in run.result["runs"][semantics]["sink"]
    exactly_once = run.result["results"]["exactly_once"]["counts"]
    assert exactly_once["duplicated"] == exactly_once["reordered"] == 0, run.explain()
    # the kill of the copy job hit the dangerous window, as read from the checkpoint and the
    # PostgreSQL markers (kill-driver aims at it)
    windows = [o["window"]["id"] for o in run.result["results"]["exactly_once"]["fault_outcomes"]
               if o.get("window")]
    assert "after_sink_before_commit_log" in windows, run.explain()
    assert not list((run.out / "exactly-once").glob("sink.db*")), "wrote a SQLite sink too"


# -- a deliberately broken configuration is caught ----------------------------------------

@pytest.mark.slow
def test_exactly_once_delivered_by_the_at_least_once_consumer_is_caught(tmp_path):
    """``--control duplicated`` (alias: ``--exactly-once-stage at-least-once-consumer``):
    at-least-once consumer settings labelled exactly-once; the consumer is killed after
    processing a batch and before committing it, so the batch is delivered twice. The
    verifier must report the broken exactly-once contract and exit 1."""
    run = run_verify(tmp_path / "out", "--control", "duplicated", "--duration", "12",
                     "--seed", "5")
    assert run.returncode == 1, run.explain()
    result = run.result["results"]["exactly_once"]
    assert not result["contract_kept"] and not run.result["contracts_kept"], run.explain()
    assert result["counts"]["duplicated"] > 0 and result["counts"]["lost"] == 0, run.explain()
    assert any("more than once" in sentence for sentence in result["violations"]), run.explain()
    assert any("deliberately misconfigured" in w for w in result["warnings"]), run.explain()
    assert "✘ exactly-once" in run.stdout, run.explain()
    assert result["control"] == "duplicated" and result["verdict"] == "broken", run.explain()
    assert run.result["scenario"]["faults"] == ["kill-consumer"], run.explain()
    assert "negative control duplicated: caught" in run.stdout, run.explain()


# -- bad input: one sentence, exit 2, before anything runs --------------------------------

def _file_as_out(tmp_path: Path) -> list[str]:
    out = tmp_path / "a-file"
    out.write_text("not a folder")
    return ["--out", str(out)]


def _directory_as_sink(tmp_path: Path) -> list[str]:
    (tmp_path / "out" / "at-least-once" / "sink.db").mkdir(parents=True)
    return ["--semantics", "at-least-once"]


BAD_INPUT = {
    "invalid fault": (lambda tmp: ["--faults", "kill-broker,explode"], "unknown fault 'explode'"),
    "unknown semantics": (lambda tmp: ["--semantics", "maybe-once"], "unknown semantics"),
    "too short": (lambda tmp: ["--duration", "5"], "too short for these faults"),
    "unreachable bootstrap": (lambda tmp: ["--bootstrap", f"127.0.0.1:{free_port()}",
                                           "--faults", "drop-acks"], "cannot reach a broker"),
    "kill-broker of a broker not ours": (
        lambda tmp: ["--bootstrap", f"127.0.0.1:{free_port()}", "--faults", "kill-broker"],
        "cannot be used with --bootstrap"),
    "a cluster fault on a broker not ours": (
        lambda tmp: ["--bootstrap", f"127.0.0.1:{free_port()}", "--faults", "pause-broker"],
        "pause-broker acts on brokers the verifier started itself, so it cannot be used with "
        "--bootstrap (a broker it did not start); the faults that apply there are "
        "kill-consumer, kill-driver, drop-acks"),
    "kill-leader without a cluster": (
        lambda tmp: ["--faults", "kill-leader,kill-consumer"],
        "kill-leader needs a cluster the verifier starts itself; add --brokers 3"),
    "pause-broker on one broker": (
        lambda tmp: ["--faults", "pause-broker", "--brokers", "1"], "needs a cluster"),
    "brokers with bootstrap": (
        lambda tmp: ["--brokers", "3", "--bootstrap", f"127.0.0.1:{free_port()}",
                     "--faults", "kill-consumer"],
        "--brokers starts brokers of the verifier's own and --bootstrap uses an existing one"),
    "read_uncommitted without the transactional run": (
        lambda tmp: ["--semantics", "exactly-once", "--isolation", "read_uncommitted"],
        "--isolation only changes how the transactional run is read"),
    "control for a semantics not run": (
        lambda tmp: ["--control", "lost", "--semantics", "exactly-once"],
        "--control lost is a broken at-least-once run"),
    "abort probability of 1": (
        lambda tmp: ["--semantics", "transactional", "--abort-probability", "1"],
        "--abort-probability must be at least 0 and below 1"),
    "out is a file": (_file_as_out, "is not a directory"),
    "sink cannot be opened": (_directory_as_sink, "cannot open the sink"),
    "sink URL of an unsupported kind": (
        lambda tmp: ["--sink", "mysql://host/db"], "--sink: unsupported database URL"),
    "sink server not there": (
        lambda tmp: ["--semantics", "at-least-once",
                     "--sink", f"postgresql://nobody@127.0.0.1:{free_port()}/db"],
        "cannot open the sink: cannot connect to database"),
}


@pytest.mark.parametrize("case", BAD_INPUT)
def test_bad_input_is_one_sentence_and_exit_2_before_anything_runs(tmp_path, case):
    make_args, message = BAD_INPUT[case]
    args = make_args(tmp_path)
    out = tmp_path / "out"
    if "--out" not in args:
        args = ["--out", str(out), *args]
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "oncelog", "verify", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("oncelog: ") and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""
    assert not (out / "logs").exists(), "a process was started"
    assert time.monotonic() - started < 15


# -- Ctrl-C stops every process the run started -------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("moment", ["pipeline running", "broker killed"])
def test_ctrl_c_stops_every_process_the_run_started(tmp_path, moment):
    """SIGINT while the Spark copy job (driver, JVM, Python workers), the broker and the
    producers all run - or in the middle of a fault, with the broker down and due to be
    restarted: the verifier exits 130 and none of its processes survives it."""
    out = tmp_path / "out"
    if moment == "pipeline running":
        args = ["--semantics", "exactly-once", "--faults", "none", "--duration", "120"]
    else:  # seed 12 kills the broker 4.19 s in, for 1.3 s
        args = ["--semantics", "at-least-once", "--faults", "kill-broker", "--duration", "20",
                "--seed", "12"]
    log = open(tmp_path / "verify.log", "w+")
    tree: list[int] = []
    verify = subprocess.Popen(verify_command(out, *args), stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, preexec_fn=interruptible)
    try:
        if moment == "pipeline running":
            copy_job_log = out / "logs" / "exactly-once-copy-job.log"
            wait_for(lambda: copy_job_log.exists() and " started" in copy_job_log.read_text(),
                      150, "the copy job to start")
            history = out / "history" / "exactly-once" / "producer-0.jsonl"
            wait_for(lambda: history.exists() and history.stat().st_size > 0, 30,
                      "the producers")
        else:
            wait_for(lambda: "kill-broker inject" in Path(log.name).read_text(), 60,
                      "the broker to be killed")
        tree = descendants(verify.pid)
        names = " | ".join(command_line(pid) for pid in tree)
        if moment == "pipeline running":
            assert "java" in names and "oncelog.verify.workloads.producer" in names, names
        verify.send_signal(signal.SIGINT)
        assert verify.wait(30) == 130, Path(log.name).read_text()[-3000:]
        wait_for(lambda: not any(running(pid) for pid in tree), 10,
                  "every process of the run to stop")
        time.sleep(3)  # and nothing restarts the broker the fault had killed
        survivors = [pid for pid in descendants(verify.pid) + tree if running(pid)]
        assert not survivors, [command_line(pid) for pid in survivors]
        assert "interrupted; every process the run started was stopped" in \
            Path(log.name).read_text()
    finally:  # a failing test still leaves nothing running
        stop_run(verify, tree, 30)
        log.close()
