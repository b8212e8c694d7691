"""The caption under the verifier's table: which faults happened to each semantics, named by
what they hit, and how long each semantics' workload ran."""

from __future__ import annotations

from rich.console import Console

from oncelog.verify.checker import check
from oncelog.verify.report import print_report, render_table
from oncelog.verify.schedule import FaultSchedule, ScheduledFault

from .histories import clean_run

DRIVER = ScheduledFault(5.0, "kill-driver", {"duration_s": 1.0})
SCHEDULE = FaultSchedule(7, 12.0, "all", ("kill-driver",), (DRIVER,))


def driver_killed(semantics: str, target: str, *, elapsed_s: float = 5.1):
    """A clean run of ``semantics`` whose kill-driver hit ``target`` (as ``KillDelivery``
    records it: the stage's description)."""
    run, _ = clean_run({"p0": 20})
    detail = {"note": "no Spark driver in this stage: kill -9 of the consumer instead"} \
        if target != "Spark copy job" else {}
    run.fault("kill-driver", "inject", at_s=5.0, elapsed_s=elapsed_s, pid=4242,
              target=target, running=True, **detail)
    run.fault("kill-driver", "heal", at_s=6.0, elapsed_s=elapsed_s + 1.1, pid=4343,
              target=target, down_s=1.1)
    return check(run.history, semantics, planned=[DRIVER])


def caption(results, **kwargs) -> str:
    """The table as printed, in one line: the caption wraps at the table's width."""
    console = Console(record=True, width=100, color_system=None)
    console.print(render_table(results, schedule=SCHEDULE, seed=7, **kwargs))
    return " ".join(console.export_text().split())


def test_kill_driver_without_a_spark_driver_says_what_it_killed():
    """The caption said ``kill-driver 5.1 s (pid 4242, ...)`` for at-most-once and
    at-least-once, whose stage is a consumer: no Spark driver was there to kill. Now it
    names what the fault hit; the exactly-once pipeline's kill is still just kill-driver."""
    results = [driver_killed("at-most-once", "at-most-once consumer"),
               driver_killed("at-least-once", "at-least-once consumer"),
               driver_killed("exactly-once", "Spark copy job")]
    text = caption(results)
    assert ("at-most-once: kill-driver (no Spark driver here: the at-most-once consumer) "
            "5.1 s (pid 4242, down 1.1 s)") in text
    assert ("at-least-once: kill-driver (no Spark driver here: the at-least-once consumer) "
            "5.1 s (pid 4242, down 1.1 s)") in text
    assert "exactly-once: kill-driver 5.1 s (pid 4242, down 1.1 s)" in text
    assert results[0].to_dict()["fault_outcomes"][0]["target"] == "at-most-once consumer"


def test_the_caption_gives_each_semantics_its_own_length_not_the_first_ones_as_the_runs():
    """The caption began ``12 s run``: the schedule's duration, which is each semantics'
    planned workload (they run one after another) - and only the first one's real length
    when a later one's schedule shifted while a target recovered (the exactly-once copy
    job's JVM restarts slowly). Now it says what the 12 s are, and a semantics whose
    workload ran longer says how long."""
    results = [driver_killed("at-least-once", "at-least-once consumer"),
               driver_killed("exactly-once", "Spark copy job", elapsed_s=31.4)]
    text = caption(results, workload_s={"at_least_once": 12.0, "exactly_once": 40.3})
    assert "12 s run" not in text
    assert "12 s of workload per semantics; faults that happened: at-least-once:" in text
    assert "at-least-once: kill-driver" in text       # as planned: nothing to add
    assert ("exactly-once (40.3 s: its schedule shifted 28.3 s): kill-driver 31.4 s "
            "(pid 4242, down 1.1 s)") in text
    assert "12 s of workload per semantics" in caption(results)  # lengths unknown


def test_a_plain_run_and_a_planned_schedule_say_the_same_about_length():
    run, _ = clean_run({"p0": 5})
    plain = check(run.history, "at-least-once", planned=[])
    console = Console(record=True, width=100, color_system=None)
    print_report([plain], console=console, schedule=FaultSchedule(7, 12.0, "all", (), ()))
    assert ("12 s of workload per semantics; no faults requested (--faults none): a plain "
            "run") in " ".join(console.export_text().split())
    unjudged = check(run.history, "at-least-once")  # no planned faults given: not judged
    assert "12 s of workload per semantics; faults planned: kill-driver 5-6 s" in caption(
        [unjudged])
