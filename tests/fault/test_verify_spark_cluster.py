"""``oncelog verify --spark-master standalone --faults kill-executor`` end to end: the
exactly-once stage's copy job runs on a Spark standalone cluster the run starts (a master and
two workers from the PySpark installation), one of its executors is killed with SIGKILL
while a batch is being read, Spark replaces it and runs the lost tasks again, and the sink
still holds every record exactly once. The run must show that its tasks ran on executors
(not in a local-mode driver), and leave no Spark process behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .verify_run import run_verify


def processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.slow
@pytest.mark.timeout(600)  # 1-2.5 min; Spark JVMs start slowly on a loaded machine
def test_an_executor_killed_mid_batch_on_a_standalone_cluster_loses_and_repeats_nothing(
        tmp_path):
    out = tmp_path / "out"
    run = run_verify(out, "--semantics", "exactly-once", "--spark-master", "standalone",
                     "--faults", "kill-executor", "--duration", "16", "--rate", "100",
                     "--seed", "6", timeout=540)   # seed 6: one kill, at 6.7 s
    assert run.returncode == 0, run.explain()
    result = run.result["results"]["exactly_once"]
    counts = result["counts"]
    assert result["verdict"] == "kept", run.explain()
    assert counts["lost"] == counts["duplicated"] == counts["reordered"] == 0, run.explain()
    assert counts["acknowledged"] > 500 and counts["delivered"] == counts["produced"], \
        run.explain()

    # The fault landed: a live executor's JVM was killed during a batch, it is gone, a new
    # executor came up and ran tasks, and a batch was written after the kill.
    kills = [o for o in result["fault_outcomes"] if o["name"] == "kill-executor"]
    assert kills and all(o["landed"] and o["recovered"] for o in kills), run.explain()
    for kill in kills:
        assert kill["batch"] is not None and kill["batch_after"] >= kill["batch"], kill
        assert kill["replaced_by"] and kill["executor_id"] not in kill["replaced_by"], kill
        assert not Path(f"/proc/{kill['pid']}").exists() or \
            b"CoarseGrainedExecutorBackend" not in Path(f"/proc/{kill['pid']}/cmdline") \
            .read_bytes(), f"executor pid {kill['pid']} still runs"
    assert "kill-executor" in run.stdout and "replaced by" in run.stdout, run.explain()

    # The tasks ran on the cluster's executors, the replacements included.
    spark = run.result["runs"]["exactly_once"]["spark"]
    assert spark["master"].startswith("spark://127.0.0.1:"), spark
    assert spark["tasks_on_executors"] > 0 and spark["executors_with_tasks"] >= 2, spark
    (app,) = spark["apps"]
    ran = {executor for executor, status in spark["executors"][app].items() if status["tasks"]}
    assert {replacement for kill in kills for replacement in kill["replaced_by"]} <= ran, spark
    assert run.result["scenario"]["spark_master"] == "standalone"

    # The cluster was the run's own: its logs are in --out, and nothing of it is left.
    assert (out / "spark-cluster" / "master.log").exists()
    assert processes_mentioning(str(out)) == [], "a Spark process outlived the run"
