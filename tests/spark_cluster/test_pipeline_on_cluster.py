"""``oncelog pipeline run --master spark://...``: the example pipeline on the standalone cluster."""

from __future__ import annotations

import os
import sys

import pytest

from oncelog.testing.spark import SparkDriver

from .conftest import REPOSITORY


@pytest.mark.slow
def test_pipeline_run_on_a_standalone_master_reports_every_record_once(
        standalone, cluster_broker, tmp_path):
    work_dir = tmp_path / "pipeline"
    command = [sys.executable, "-m", "oncelog", "pipeline", "run",
               "--master", standalone.master_url, "--bootstrap", cluster_broker.bootstrap,
               "--topic", "cluster-orders", "--records", "1500", "--rate", "1500",
               "--max-offsets-per-trigger", "1000", "--work-dir", str(work_dir),
               "--timeout", "240"]
    environment = {"PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPOSITORY / "src"), os.environ.get("PYTHONPATH")])),
        "COLUMNS": "120"}
    with SparkDriver(command, log_path=tmp_path / "pipeline.log", env=environment) as run:
        status = run.wait(280)
    output = "\n".join(run.lines)
    assert status == 0, f"{output}\n(see {tmp_path / 'pipeline.log'})"
    assert f"starting Spark ({standalone.master_url})" in output
    assert "every record in the topic is in the sink exactly once" in output
    # The Master ran it as an application of its own: the queries ran on its executors.
    finished = [app["name"] for app in (standalone.master_state() or {}).get("completedapps", [])]
    assert "oncelog-pipeline" in finished, finished
