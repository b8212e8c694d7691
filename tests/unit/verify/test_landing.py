"""Did the faults land? A clean run is ✔ only when its faults took effect; a run whose
faults did nothing, that delivered nothing, or a negative control that showed nothing is
inconclusive, and the report says what each fault did instead of what was planned."""

from __future__ import annotations

from rich.console import Console

from oncelog.verify.checker import check
from oncelog.verify.report import print_report, render_table
from oncelog.verify.schedule import ScheduledFault
from oncelog.verify.workloads.delivery import batch_window, last_batch_file

from .histories import Run, clean_run

KILL = ScheduledFault(5.0, "kill-consumer", {"duration_s": 1.0})
DROP = ScheduledFault(9.0, "drop-acks", {"duration_s": 2.0, "rate": 0.5, "mode": "close"})


def killed(run: Run, *, running: bool = True) -> None:
    landed = "processed 40 records, not committed" if running else "was not running"
    run.fault("kill-consumer", "inject", at_s=5.0, elapsed_s=5.1, pid=4242 if running else None,
              target="at-least-once consumer", landed=landed, running=running)
    run.fault("kill-consumer", "heal", at_s=6.0, elapsed_s=6.2, pid=4343, down_s=1.1)


def dropped(run: Run, count: int) -> None:
    run.fault("drop-acks", "inject", at_s=9.0, elapsed_s=9.0, rate=0.5, mode="close")
    run.fault("drop-acks", "heal", at_s=11.0, elapsed_s=11.0, dropped=count)


def test_a_clean_run_whose_faults_landed_is_kept_and_says_what_each_did():
    run, _ = clean_run({"p0": 20})
    killed(run)
    dropped(run, 7)
    result = check(run.history, "at-least-once", planned=[KILL, DROP])
    assert result.verdict == "kept" and result.inconclusive_because is None
    kill, drop = result.fault_outcomes
    assert kill.landed and kill.detail["pid"] == 4242 and kill.detail["down_s"] == 1.1
    assert "processed 40 records, not committed" in kill.effect
    assert drop.landed and drop.detail["dropped"] == 7
    document = result.to_dict()
    assert document["verdict"] == "kept" and document["faults_landed"] == 2
    assert document["fault_outcomes"][1] == {
        "name": "drop-acks", "at_s": 9.0, "elapsed_s": 9.0, "landed": True,
        "effect": "dropped 7 Produce response(s)", "dropped": 7, "rate": 0.5}


def test_faults_that_did_nothing_make_the_run_inconclusive_not_kept():
    run, _ = clean_run({"p0": 20})
    killed(run, running=False)
    dropped(run, 0)
    result = check(run.history, "at-least-once", planned=[KILL, DROP])
    assert result.contract_kept and result.verdict == "inconclusive"
    assert not any(outcome.landed for outcome in result.fault_outcomes)
    assert result.inconclusive_because.startswith("no fault landed")
    assert "dropped nothing" in result.inconclusive_because
    assert "was not running" in result.inconclusive_because


def test_a_planned_fault_never_injected_did_not_land():
    run, _ = clean_run({"p0": 20})
    result = check(run.history, "at-least-once", planned=[KILL])
    (outcome,) = result.fault_outcomes
    assert not outcome.landed and outcome.elapsed_s is None and "skipped" in outcome.effect
    assert result.verdict == "inconclusive"


def test_some_faults_landing_is_enough_and_the_others_are_reported_as_not_landed():
    run, _ = clean_run({"p0": 20})
    killed(run)
    dropped(run, 0)
    result = check(run.history, "at-least-once", planned=[KILL, DROP])
    assert result.verdict == "kept"
    console = Console(record=True, width=160, color_system=None)
    print_report([result], console=console)
    text = console.export_text()
    assert "at-least-once: kill-consumer 5.1 s (pid 4242, down 1.1 s); did not land:" in text
    assert "drop-acks 9.0 s" in text
    assert "at-least-once: drop-acks at 9.0 s did not land: dropped nothing" in text


def test_no_faults_requested_is_a_plain_run_kept_and_captioned_as_such():
    run, _ = clean_run({"p0": 20})
    result = check(run.history, "at-least-once", planned=[])
    assert result.verdict == "kept" and result.faults_requested is False
    console = Console(record=True, width=120, color_system=None)
    console.print(render_table([result]))
    assert "no faults requested" in console.export_text()


def test_nothing_acknowledged_or_delivered_is_inconclusive_even_with_faults_landed():
    run = Run()
    for _ in range(5):
        run.send("p0")
    killed(run)
    result = check(run.history, "at-least-once", planned=[KILL])
    assert not result.contract_kept  # five acknowledged, none delivered: lost, broken
    unacknowledged = Run()
    ids = [unacknowledged.send("p0", ack=False) for _ in range(5)]
    unacknowledged.deliver(*ids)
    killed(unacknowledged)
    result = check(unacknowledged.history, "at-least-once", planned=[KILL])
    assert result.verdict == "inconclusive"
    assert result.inconclusive_because == "nothing was acknowledged"


def test_a_broker_restart_seen_by_clients_counts_acknowledgements_after_it():
    run = Run()
    for _ in range(3):
        run.send("p0")
    run.fault("kill-broker", "inject", at_s=2.0, elapsed_s=2.0, pid=77, running=True)
    run.fault("kill-broker", "heal", at_s=3.0, elapsed_s=3.0, pid=78, down_s=1.2)
    ids = [run.send("p0") for _ in range(4)]
    run.deliver(*[f"p0-{seq:06d}" for seq in range(3)], *ids)
    result = check(run.history, "at-least-once",
                   planned=[ScheduledFault(2.0, "kill-broker", {"duration_s": 1.0})])
    (outcome,) = result.fault_outcomes
    assert outcome.landed and outcome.detail["clients_saw_restart"]
    assert outcome.detail["acknowledged_after_restart"] == 4
    assert outcome.detail["acknowledged_while_down"] == 0
    assert outcome.detail["restarted_pid"] == 78


def test_a_negative_control_that_shows_its_anomaly_is_broken_one_that_does_not_is_inconclusive():
    caught, ids = clean_run({"p0": 20})
    caught.deliver(ids[3])
    killed(caught)
    result = check(caught.history, "exactly-once", planned=[KILL], control="duplicated")
    assert result.verdict == "broken" and result.to_dict()["control"] == "duplicated"
    missed, _ = clean_run({"p0": 20})
    killed(missed)
    result = check(missed.history, "exactly-once", planned=[KILL], control="duplicated")
    assert result.verdict == "inconclusive"
    assert "negative control showed no duplicated record" in result.inconclusive_because


def test_an_inconclusive_run_prints_no_check_mark_and_its_caption_shows_what_happened():
    run, _ = clean_run({"p0": 20})
    dropped(run, 0)
    result = check(run.history, "at-most-once", planned=[DROP])
    console = Console(record=True, width=120, color_system=None)
    print_report([result], console=console, seed=4)
    text = console.export_text()
    assert "✔" not in text and "inconclusive" in text
    assert "at-most-once: none landed; did not land: drop-acks 9.0 s" in text
    assert "drop-acks at 9.0 s did not land: dropped nothing" in text


def test_the_caption_lists_the_faults_that_landed_with_pid_and_downtime():
    run, _ = clean_run({"p0": 20})
    killed(run)
    result = check(run.history, "at-least-once", planned=[KILL])
    console = Console(record=True, width=120, color_system=None)
    console.print(render_table([result]))
    assert "at-least-once: kill-consumer 5.1 s (pid 4242, down 1.1 s)" in console.export_text()


def test_the_batch_window_a_copy_job_kill_landed_in():
    assert batch_window(7, 6, 6)["id"] == "before_sink"
    assert batch_window(7, None, None)["id"] == "before_sink"
    window = batch_window(7, 7, 6)
    assert window["id"] == "after_sink_before_commit_log"
    assert window["name"] == "after the sink's transaction, before Spark's commit log"
    assert (window["batch"], window["sink_batch"], window["spark_commit"]) == (7, 7, 6)
    assert batch_window(7, 7, 7)["id"] == "after_commit_log"
    assert batch_window(None, None, None)["id"] == "before_first_batch"
    assert batch_window(3, 5, 2)["id"] == "sink_ahead"


def test_last_batch_file_reads_spark_metadata_log_names(tmp_path):
    assert last_batch_file(tmp_path / "missing") is None
    folder = tmp_path / "commits"
    folder.mkdir()
    assert last_batch_file(folder) is None
    for name in ("0", "1", "12", ".13.tmp", "9"):
        (folder / name).write_text("v1\n")
    assert last_batch_file(folder) == 12
