"""``--spark-master`` and ``kill-executor``: what a run on a Spark cluster accepts, how it
proves its tasks ran on executors, and what a killed executor's landing says.

The real thing (a standalone cluster, a copy job, an executor killed mid-batch) is
``tests/fault/test_verify_spark_cluster.py``; these are the parsing and judging around it.
"""

from __future__ import annotations

import pytest

from oncelog.verify.checker import check
from oncelog.verify.faults import Nemesis
from oncelog.verify.history import History, HistoryWriter
from oncelog.verify.report import render_table
from oncelog.verify.runner import _is_this_machine
from oncelog.verify.scenario import BadInput, Scenario
from oncelog.verify.schedule import FaultSchedule, ScheduledFault
from oncelog.verify.workloads.delivery import executor_evidence

from .histories import Run, clean_run

KILL_EXECUTOR = ScheduledFault(6.0, "kill-executor", {"duration_s": 1.5})


def build(**options) -> Scenario:
    options.setdefault("semantics", "exactly-once")
    options.setdefault("faults", "kill-executor")
    return Scenario.build(duration_s=30, seed=1, **options)


# -- the option -----------------------------------------------------------------------------

@pytest.mark.parametrize("given, kept", [("standalone", "standalone"),
                                         (" Standalone ", "standalone"),
                                         ("spark://127.0.0.1:7077", "spark://127.0.0.1:7077"),
                                         ("spark://a:7077,b:7077", "spark://a:7077,b:7077")])
def test_a_spark_cluster_runs_the_exactly_once_stage_and_allows_kill_executor(given, kept):
    scenario = build(spark_master=given)
    assert scenario.spark_master == kept and scenario.on_spark_cluster
    assert scenario.faults == ("kill-executor",)
    assert scenario.to_dict()["spark_master"] == kept


def test_local_mode_is_the_default_and_local_masters_are_not_a_cluster():
    assert not build(faults="kill-driver").on_spark_cluster
    assert not build(faults="kill-driver", spark_master="local[2]").on_spark_cluster


@pytest.mark.parametrize("options, message", [
    ({"spark_master": None},
     "kill-executor kills an executor of a Spark cluster, and in local mode (the default "
     "local[2]) the driver runs every task itself: there is no executor to kill; add "
     "--spark-master standalone or spark://HOST:PORT"),
    ({"spark_master": "local[4]"}, "there is no executor to kill"),
    ({"spark_master": "standalone", "semantics": "all"},
     "kill-executor faults the Spark pipeline's executors, which only the exactly-once run "
     "has, not at-most-once or at-least-once; add --semantics exactly-once"),
    ({"spark_master": "yarn", "faults": "kill-driver"},
     "--spark-master takes standalone (a cluster the run starts), spark://HOST:PORT or "
     "local[N], not 'yarn'"),
    ({"spark_master": "spark://nohost", "faults": "kill-driver"}, "not 'spark://nohost'"),
    ({"spark_master": "standalone", "faults": "kill-consumer",
      "semantics": "at-least-once"}, "include exactly-once in --semantics"),
    ({"spark_master": "standalone", "faults": "kill-consumer",
      "exactly_once_stage": "transform"}, "without --exactly-once-stage transform"),
])
def test_what_cannot_run_on_a_spark_cluster_is_one_sentence(options, message):
    with pytest.raises(BadInput) as error:
        build(**options)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_kill_executor_needs_workers_on_this_machine():
    assert _is_this_machine("127.0.0.1") and _is_this_machine("localhost")
    assert not _is_this_machine("192.0.2.1")          # TEST-NET-1: nobody's address
    assert not _is_this_machine("no-such-host.invalid")


def test_kill_executor_has_a_seeded_place_in_the_schedule():
    schedule = FaultSchedule.generate(3, ["kill-executor"], 30, "exactly-once")
    assert 1 <= len(schedule) <= 2
    assert all(fault.name == "kill-executor" and fault.params["signal"] == "SIGKILL"
               and 1 <= fault.params["duration_s"] <= 3 for fault in schedule)
    assert schedule == FaultSchedule.generate(3, ["kill-executor"], 30, "exactly-once")


# -- where the tasks ran ----------------------------------------------------------------------

def test_the_evidence_is_the_last_cumulative_line_of_each_application():
    lines = [
        "started",
        "app app-1 ui http://127.0.0.1:4040",
        'batch 0 executors {"0":{"tasks":3,"failed":0,"running":0,"alive":true,"host":"h1"}}',
        "batch 0 writing",
        'batch 1 executors {"0":{"tasks":6,"failed":0,"running":0,"alive":true,"host":"h1"},'
        '"1":{"tasks":2,"failed":0,"running":1,"alive":false,"host":"h2"}}',
        "batch 2 executors {torn",
        # the copy job was killed and started again: a new application, counted anew
        "app app-2 ui http://127.0.0.1:4041",
        'batch 2 executors {"0":{"tasks":0,"failed":0,"running":0,"alive":true,"host":"h3"}}',
        'batch 3 executors {"0":{"tasks":4,"failed":0,"running":0,"alive":true,"host":"h3"}}',
    ]
    evidence = executor_evidence(lines)
    assert evidence["apps"] == ["app-1", "app-2"]
    assert evidence["executors"]["app-1"] == {"0": {"tasks": 6, "failed": 0, "host": "h1"},
                                              "1": {"tasks": 2, "failed": 0, "host": "h2"}}
    assert evidence["tasks_on_executors"] == 12 and evidence["executors_with_tasks"] == 3
    assert evidence["hosts"] == ["h1", "h2", "h3"]


def test_a_job_that_ran_no_task_on_an_executor_has_no_evidence():
    assert executor_evidence(["started", "batch 0 writing", "batch 0 written"]) == {
        "apps": [], "executors": {}, "tasks_on_executors": 0, "executors_with_tasks": 0,
        "hosts": []}
    idle = executor_evidence(["app app-1 ui http://x", 'batch 0 executors {"0":{"tasks":0}}'])
    assert idle["apps"] == ["app-1"] and idle["tasks_on_executors"] == 0


def test_a_cluster_run_whose_tasks_never_reached_an_executor_is_inconclusive():
    run, _ = clean_run({"p0": 10})
    result = check(run.history, "exactly-once", planned=[])
    assert result.verdict == "kept"
    result.run_inconclusive_because = "--spark-master standalone was given, but no task ran"
    assert result.verdict == "inconclusive"
    assert result.to_dict()["inconclusive_because"].startswith("--spark-master standalone")
    # a broken contract is still broken, whatever the stage proved
    run.deliver(run.history.delivered[0].id)
    broken = check(run.history, "exactly-once", planned=[])
    broken.run_inconclusive_because = "no task ran on an executor"
    assert broken.verdict == "broken"


# -- did kill-executor land? ------------------------------------------------------------------

def executor_killed(run: Run, *, pid: int | None = 31337, replaced: bool = True) -> None:
    inject = {"target": "executor 1", "app_id": "app-7", "executor_id": "1", "host": "127.0.0.1",
              "batch": 4, "running_tasks": 2, "signal": "SIGKILL", "pid": pid}
    if pid is None:
        inject.update(running=False, landed="executor 1 of app-7 runs on 10.0.0.9, not on this "
                                            "machine: there is no pid here to kill")
    else:
        inject.update(running=True, killed=True, landed="during batch 4, 2 task(s) running on it")
    run.fault("kill-executor", "inject", at_s=6.0, elapsed_s=6.4, **inject)
    if pid is not None:
        run.fault("kill-executor", "heal", at_s=7.5, elapsed_s=7.9, target="executor 1",
                  app_id="app-7", replaced_by=["2"] if replaced else [],
                  replacement_s=6.5 if replaced else None, lost_tasks=2,
                  batch_after=4 if replaced else None, recover_timeout_s=45.0, waited_s=5.0)


def test_a_killed_executor_that_spark_replaced_landed_and_says_so():
    run, _ = clean_run({"p0": 20})
    executor_killed(run)
    result = check(run.history, "exactly-once", planned=[KILL_EXECUTOR])
    assert result.verdict == "kept"
    (outcome,) = result.fault_outcomes
    assert outcome.landed and outcome.detail["pid"] == 31337
    assert outcome.detail["recovered"] and outcome.detail["replaced_by"] == ["2"]
    assert outcome.detail["batch"] == 4 and outcome.detail["batch_after"] == 4
    assert outcome.effect == (
        "kill -9 of executor 1 of app-7 (pid 31337); during batch 4, 2 task(s) running on it; "
        "executor 2 came up and ran tasks 6.5 s later; 2 task(s) died with it; batch 4 "
        "written after the kill")
    caption = render_table([result]).caption
    assert ("kill-executor 6.4 s (pid 31337, executor 1, batch 4, 2 task(s) running, "
            "replaced by 2 in 6.5 s)") in caption.replace("\n", " ")
    document = result.to_dict()["fault_outcomes"][0]
    assert document["landed"] and document["recovered"] and document["lost_tasks"] == 2


def test_a_kill_spark_did_not_recover_from_still_landed_but_says_not_recovered():
    run, _ = clean_run({"p0": 20})
    executor_killed(run, replaced=False)
    (outcome,) = check(run.history, "exactly-once", planned=[KILL_EXECUTOR]).fault_outcomes
    assert outcome.landed and not outcome.detail["recovered"]
    assert "no new executor ran tasks within 45 s" in outcome.effect
    assert "no batch written after the kill" in outcome.effect


def test_an_executor_on_another_machine_cannot_be_killed_and_proves_nothing():
    run, _ = clean_run({"p0": 20})
    executor_killed(run, pid=None)
    result = check(run.history, "exactly-once", planned=[KILL_EXECUTOR])
    (outcome,) = result.fault_outcomes
    assert not outcome.landed and "not on this machine" in outcome.effect
    assert result.verdict == "inconclusive"
    assert result.inconclusive_because.startswith("no fault landed: kill-executor at 6 s")


# -- a heal that waits shifts what follows ------------------------------------------------------

class WaitingHeal:
    name = "kill-executor"

    def ready(self) -> bool:
        return True

    def inject(self, scheduled: ScheduledFault) -> dict:
        return {"pid": 1, "running": True}

    def heal(self) -> dict:
        return {"replaced_by": ["2"], "waited_s": 9.0, "shift_s": 9.0}


def test_a_heal_that_waited_for_spark_shifts_the_rest_of_the_schedule(tmp_path):
    plan = FaultSchedule(7, 60.0, "exactly-once", ("kill-executor",), (
        ScheduledFault(5.0, "kill-executor", {"duration_s": 1.0}),
        ScheduledFault(10.0, "kill-executor", {"duration_s": 1.0})))
    writer = HistoryWriter(tmp_path / "faults.jsonl", clock=lambda: 1000.0)
    nemesis = Nemesis(plan, {"kill-executor": WaitingHeal()}, writer)
    nemesis.run_due(lambda: 6.0)
    assert nemesis.delay_s == 9.0 and nemesis.next_at_s == 19.0
    writer.close()
    heal = History.load(tmp_path / "faults.jsonl").faults[1]
    assert "shift_s" not in heal.detail and heal.detail["waited_s"] == 9.0
    assert heal.detail["delay_s"] == 9.0
