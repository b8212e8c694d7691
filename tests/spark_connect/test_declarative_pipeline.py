"""examples/declarative_pipeline run end to end with the real ``spark-pipelines`` command, as
docs/pipeline.md tells a user to (issue 15): a topic into the streaming table ``events`` and
the materialized view ``events_per_key`` over it; and once on the folder's Connect server.

``spark-pipelines`` starts its own local Spark Connect server (``--remote local``, its
default) and runs the example's definitions in a Python client; the run processes what the
topic holds, then ends. The project is copied into the test's directory with its
``storage`` (the streaming table's checkpoint) pointed there; the warehouse
(``spark-warehouse``) and the catalog (Hive's, in Derby's ``metastore_db``) are in the
directory the command runs in, the test's too. Spark's default in-memory catalog forgets
the tables when the run ends, and the next run then refuses to create ``events`` over its
existing folder (LOCATION_ALREADY_EXISTS): hence ``spark.sql.catalogImplementation=hive``
in the documented command.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ..spark.conftest import new_topic, produce

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "declarative_pipeline"


def spark_pipelines() -> str:
    """The command the PySpark package installs next to this interpreter."""
    command = Path(sys.executable).parent / "spark-pipelines"
    if not command.exists():
        pytest.fail(f"spark-pipelines is not installed next to {sys.executable}")
    return str(command)


def copy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    spec = project / "spark-pipeline.yml"
    text, replaced = re.subn(r"(?m)^storage: .*$", f"storage: file://{tmp_path / 'storage'}",
                             spec.read_text())
    assert replaced == 1, "the example's spec has one storage line"
    spec.write_text(text)
    return spec


def run_pipeline(spec: Path, bootstrap: str, topic: str, cwd: Path) -> str:
    """The documented command; its output, or a failure with it."""
    return spark_pipelines_run(
        ["--spec", str(spec), "--conf", "spark.sql.catalogImplementation=hive",
         "--conf", f"spark.oncelog.bootstrap={bootstrap}",
         "--conf", f"spark.oncelog.topic={topic}"], cwd)


def spark_pipelines_run(args: list[str], cwd: Path) -> str:
    """``spark-pipelines run ARGS`` in a process group of its own, killed by it at the end."""
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable,
                   "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    process = subprocess.Popen(
        [spark_pipelines(), "run", *args], cwd=cwd, env=environment, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=300)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the JVM and its Python workers, if left
        except ProcessLookupError:
            pass
        process.wait()
    assert process.returncode == 0, output[-5000:]
    assert "Run is COMPLETED" in output, output[-5000:]
    return output


def streaming_table(directory: Path) -> list[dict]:
    """The rows of a streaming table's files that its metadata log lists (as Spark reads
    it: a file a failed batch left behind is not listed)."""
    log = directory / "_spark_metadata"
    entries = sorted((path for path in log.iterdir() if not path.name.startswith(".")),
                     key=lambda path: int(path.name.split(".")[0]))
    files: set[str] = set()
    for entry in entries:
        if entry.name.endswith(".compact"):
            files.clear()
        for line in entry.read_text().splitlines()[1:]:  # line 1 is the log's version
            files.add(json.loads(line)["path"].removeprefix("file://"))
    return [row for name in sorted(files) for row in pq.read_table(name).to_pylist()]


def materialized_view(directory: Path) -> dict[str, int]:
    return {row["key"]: row["records"] for row in pq.read_table(directory).to_pylist()}


@pytest.mark.slow
@pytest.mark.timeout(600)  # 1-2.5 min; Spark JVMs start slowly on a loaded machine
def test_the_example_pipeline_reads_every_record_once_run_after_run(tmp_path, connect_broker):
    """Two runs: the second reads only what arrived after the first (the streaming table's
    offsets are in the pipeline's storage), and the view counts both."""
    bootstrap = connect_broker.bootstrap
    topic = new_topic(bootstrap, partitions=3, prefix="declarative")
    spec = copy_project(tmp_path)
    for key in ("a", "b", "c"):
        produce(bootstrap, topic, [f"{key}-{number}".encode() for number in range(50)],
                key=key.encode())

    run_pipeline(spec, bootstrap, topic, cwd=tmp_path)

    warehouse = tmp_path / "spark-warehouse"
    rows = streaming_table(warehouse / "events")
    assert sorted(row["value"] for row in rows) == sorted(
        f"{key}-{number}" for key in "abc" for number in range(50))
    assert len({(row["partition"], row["offset"]) for row in rows}) == len(rows) == 150
    assert {row["topic"] for row in rows} == {topic}
    assert all(row["value"].startswith(row["key"] + "-") for row in rows)
    assert materialized_view(warehouse / "events_per_key") == {"a": 50, "b": 50, "c": 50}

    produce(bootstrap, topic, [f"d-{number}".encode() for number in range(30)], key=b"d")
    run_pipeline(spec, bootstrap, topic, cwd=tmp_path)

    rows = streaming_table(warehouse / "events")
    assert sorted(row["value"] for row in rows) == sorted(
        [f"{key}-{number}" for key in "abc" for number in range(50)]
        + [f"d-{number}" for number in range(30)])
    assert len({(row["partition"], row["offset"]) for row in rows}) == len(rows) == 180
    assert materialized_view(warehouse / "events_per_key") == {"a": 50, "b": 50, "c": 50,
                                                                "d": 30}


def test_the_example_pipeline_runs_on_a_running_connect_server(tmp_path, connect_broker,
                                                               connect_server):
    """``--remote sc://...``: the pipeline runs on the folder's Connect server, whose
    warehouse is in its own directory. ``--conf`` does not reach a remote server's session,
    so the broker and topic go in the spec's ``configuration`` (docs/pipeline.md)."""
    bootstrap = connect_broker.bootstrap
    topic = new_topic(bootstrap, partitions=2, prefix="declarative-remote")
    produce(bootstrap, topic, [f"r-{number}".encode() for number in range(40)], key=b"r")
    spec = copy_project(tmp_path)
    spec.write_text(spec.read_text() + "configuration:\n"
                    f"  spark.oncelog.bootstrap: \"{bootstrap}\"\n"
                    f"  spark.oncelog.topic: \"{topic}\"\n")

    spark_pipelines_run(["--remote", connect_server.url, "--spec", str(spec)], tmp_path)

    rows = streaming_table(connect_server.directory / "spark-warehouse" / "events")
    assert sorted(row["value"] for row in rows) == sorted(f"r-{number}" for number in range(40))
    assert len({(row["partition"], row["offset"]) for row in rows}) == 40
