"""Streaming queries with the ``oncelog`` source on a real Spark standalone cluster.

A Master and two Workers of one core each (``conftest.py``), a broker, and a driver program
(``cluster_job.py``: a 4-partition topic into ``TransactionalSink``) in a process group of its
own. The faults are the ones a cluster has: an executor's JVM killed with SIGKILL while it
reads a batch, a whole Worker (with its executors) killed likewise, the driver killed and
started again from its checkpoint. After each, the sink must hold every produced id once.

Every test also checks **where** the rows were read, so none can pass in local mode by
accident: each row carries the pid chain of the Python worker that read it
(``cluster_job.py``), which must run through one of the application's executor JVMs, as
the Workers report them, and never through the driver (in local mode the Python workers are
children of the driver's JVM, itself a child of the driver).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from .conftest import (ExecutorWatch, new_topic, produce_ids, reading_now, sink_batches,
                       sink_rows, start_job)

PARTITIONS = 4


def assert_every_id_once(rows: list[tuple], total: int) -> None:
    values = sorted(row[0] for row in rows)
    expected = sorted(f"id-{number}" for number in range(total))
    duplicated = len(values) - len(set(values))
    missing = sorted(set(expected) - set(values))
    assert duplicated == 0 and not missing and values == expected, \
        f"{duplicated} duplicated, {len(missing)} missing (e.g. {missing[:5]})"


def assert_read_on_executors(rows: list[tuple], executor_pids: dict[int, str],
                             driver_pid: int, at_least: int = 2) -> set[str]:
    """Every row was read by a Python worker under one of ``executor_pids`` (JVM pid ->
    executor id), whose executor id the worker's own environment confirms, never under the
    driver; rows came from ``at_least`` executors. Returns the executor ids seen."""
    assert executor_pids, "the cluster reported no executor for the application"
    seen = set()
    for value, _partition, _offset, pids, executor, _batch in rows:
        chain = [int(pid) for pid in pids.split()]
        assert driver_pid not in chain, f"{value} was read under the driver (local mode?)"
        under = [executor_pids[pid] for pid in chain if pid in executor_pids]
        assert under, f"{value} was read by pid chain {chain}, under no executor " \
                      f"{executor_pids}"
        assert executor == under[0], f"{value}: SPARK_LOG_URL_STDERR names executor " \
                                     f"{executor!r}, its JVM is executor {under[0]}"
        seen.add(executor)
    assert len(seen) >= at_least, f"rows came from executors {seen} only"
    return seen


def reading_worker(standalone, progress, timeout_s: float = 60.0) -> int:
    """The index of a live Worker under which a task reads now. A row's pid chain can lack
    every Worker (a Python worker orphaned by the executor killed earlier, still finishing
    its row): look at the next row then."""
    deadline = time.monotonic() + timeout_s
    while True:
        chain = reading_now(progress, since=time.time())
        for index, daemon in enumerate(standalone.workers):
            if daemon.alive() and daemon.pid in chain:
                return index
        assert time.monotonic() < deadline, f"no task read under a live Worker: {chain}"


@pytest.mark.slow
def test_an_executor_then_a_worker_killed_mid_batch_leave_every_record_once(
        standalone, cluster_broker, tmp_path):
    """kill -9 of an executor's JVM while it reads batch 1, then of the whole Worker reading
    batch 3 (its executor dies with it): Spark re-runs the lost tasks on the executor that
    is left or on one the Master launches in place of the killed one, and the sink gets
    every record once."""
    total = 1600
    topic = new_topic(cluster_broker.bootstrap, PARTITIONS)
    produce_ids(cluster_broker.bootstrap, topic, range(total), PARTITIONS)
    progress = tmp_path / "progress"
    progress.mkdir()
    # 400 records a batch, 100 per partition, 10 ms each: a task reads for 1 s.
    with ExecutorWatch(standalone) as watch, start_job(
            tmp_path, standalone.master_url, cluster_broker.bootstrap, topic,
            "--max-offsets-per-trigger", "400", "--delay-ms", "10",
            "--progress-dir", str(progress), "--stop-when-idle", "4") as driver:
        app_id = driver.wait_for_line("started", 180).split()[1]
        watch.wait_for(app_id, 2)

        driver.wait_for_line("batch 1 writing", 120)
        chain = reading_now(progress, since=time.time())
        executors = watch.pids(app_id)
        executor_pid = next((pid for pid in chain if pid in executors), None)
        assert executor_pid, f"the reading task's pid chain {chain} holds no executor {executors}"
        os.kill(executor_pid, signal.SIGKILL)

        driver.wait_for_line("batch 3 writing", 180)
        worker = reading_worker(standalone, progress)
        standalone.kill_worker(worker)

        assert driver.wait(240) == 0, f"the driver failed; see {tmp_path / 'driver.log'}"
        watch.look()
        executors = watch.pids(app_id)

    rows = sink_rows(tmp_path)
    assert_every_id_once(rows, total)
    assert sink_batches(tmp_path) == list(range(len(sink_batches(tmp_path))))
    assert "batch 1 written" in driver.lines and "batch 3 written" in driver.lines
    # Executors 0 and 1, and the ones launched after the two kills, all read.
    assert_read_on_executors(rows, executors, driver.pid, at_least=2)


@pytest.mark.slow
@pytest.mark.timeout(600)  # 1-2.5 min; Spark JVMs start slowly on a loaded machine
def test_the_driver_killed_mid_batch_restarts_from_its_checkpoint_with_every_record_once(
        standalone, cluster_broker, tmp_path):
    """SIGKILL to the driver's process group (the Python driver and its JVM) while executors
    read batch 1: the Master ends the application and the Workers its executors. The driver
    started again with the same checkpoint is a new application that re-runs batch 1 with
    the same offsets, from Spark's offset log, and goes on."""
    total = 1200
    topic = new_topic(cluster_broker.bootstrap, PARTITIONS)
    produce_ids(cluster_broker.bootstrap, topic, range(total), PARTITIONS)
    progress = tmp_path / "progress"
    progress.mkdir()
    arguments = ["--max-offsets-per-trigger", "400", "--delay-ms", "5",
                 "--progress-dir", str(progress)]
    with ExecutorWatch(standalone) as watch:
        with start_job(tmp_path, standalone.master_url, cluster_broker.bootstrap, topic,
                       *arguments) as first:
            first_app = first.wait_for_line("started", 180).split()[1]
            first.wait_for_line("batch 1 writing", 120)
            reading_now(progress, since=time.time())
            first.kill()
        assert "batch 1 written" not in first.lines
        with start_job(tmp_path, standalone.master_url, cluster_broker.bootstrap, topic,
                       *arguments, "--stop-when-idle", "4") as second:
            second_app = second.wait_for_line("started", 180).split()[1]
            assert second.wait(240) == 0, f"the restarted driver failed; see " \
                                          f"{tmp_path / 'driver.log'}"
        watch.look()

    assert first_app != second_app
    batch_lines = [line for line in second.lines if line.startswith("batch ")]
    assert batch_lines[0] == "batch 1 writing", batch_lines       # batch 1 again, not 2
    rows = sink_rows(tmp_path)
    assert_every_id_once(rows, total)
    assert sink_batches(tmp_path) == [0, 1, 2]
    first_rows = [row for row in rows if row[5] == 0]
    later_rows = [row for row in rows if row[5] > 0]
    assert_read_on_executors(first_rows, watch.pids(first_app), first.pid, at_least=1)
    assert_read_on_executors(later_rows, watch.pids(second_app), second.pid, at_least=1)


def bare_python(folder: Path) -> Path:
    """A ``PYSPARK_PYTHON`` that lacks oncelog on executors and has it on the driver.

    One machine plays both: the driver's machine, where oncelog is installed, and workers
    where the same Python path has oncelog's dependencies (pyspark, pyarrow, pandas,
    confluent-kafka) but not oncelog. The script tells them apart by ``SPARK_EXECUTOR_DIRS``,
    which a Worker sets for the executors it launches; there it runs a virtualenv whose
    only site-packages entry is a ``.pth`` line naming this venv's site-packages. A plain path
    in a ``.pth`` file is added to ``sys.path`` without processing the ``.pth`` files inside
    it, so oncelog's editable install (``__editable__.oncelog-*.pth``) does not apply; and
    PYTHONPATH entries that hold an ``oncelog`` package are dropped.
    """
    venv = folder / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)],
                   check=True)
    site_packages = Path(subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
         "['purelib'])"], check=True, capture_output=True, text=True).stdout.strip())
    (site_packages / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    script = folder / "python"
    script.write_text(f"""#!/bin/sh
if [ -z "$SPARK_EXECUTOR_DIRS" ]; then exec {sys.executable} "$@"; fi
path=""
IFS=:
for entry in $PYTHONPATH; do
  [ -e "$entry/oncelog/__init__.py" ] && continue
  path="${{path:+$path:}}$entry"
done
unset IFS
PYTHONPATH="$path" exec {venv / 'bin' / 'python'} "$@"
""")
    script.chmod(0o755)
    return script


@pytest.mark.slow
def test_executors_without_oncelog_read_with_the_package_shipped_as_a_zip(
        standalone, cluster_broker, tmp_path):
    """``spark.submit.pyFiles`` with ``python -m oncelog.spark.ship``'s zip is enough for
    executors whose Python has only oncelog's dependencies (confluent-kafka is a C extension
    and cannot come in a zip): Spark puts the zip on their Python workers' path."""
    from oncelog.spark.ship import package_zip

    python = bare_python(tmp_path / "bare")
    executor_env = {**os.environ, "SPARK_EXECUTOR_DIRS": str(tmp_path)}
    probe = "import confluent_kafka, pyarrow, pyspark, pandas\nimport oncelog"
    failed = subprocess.run([str(python), "-c", probe], env=executor_env,
                            capture_output=True, text=True)
    assert "No module named 'oncelog'" in failed.stderr, failed.stderr   # only oncelog lacks
    archive = package_zip(tmp_path / "oncelog.zip")

    total = 800
    topic = new_topic(cluster_broker.bootstrap, PARTITIONS)
    produce_ids(cluster_broker.bootstrap, topic, range(total), PARTITIONS)
    with ExecutorWatch(standalone) as watch, start_job(
            tmp_path, standalone.master_url, cluster_broker.bootstrap, topic,
            "--py-files", str(archive), "--stop-when-idle", "3",
            "--max-offsets-per-trigger", "200",
            env={"PYSPARK_PYTHON": str(python)}) as driver:
        app_id = driver.wait_for_line("started", 180).split()[1]
        assert driver.wait(240) == 0, f"the driver failed; see {tmp_path / 'driver.log'}"
        watch.look()

    rows = sink_rows(tmp_path)
    assert_every_id_once(rows, total)
    assert_read_on_executors(rows, watch.pids(app_id), driver.pid, at_least=1)
    # The executors' Python workers ran the venv without oncelog and imported it from the zip.
    with sqlite3.connect(tmp_path / "sink.db") as connection:
        pythons = {python for (python,) in connection.execute("SELECT python FROM records")}
    assert pythons == {f"{tmp_path / 'bare' / 'venv' / 'bin' / 'python'} oncelog.zip"}, pythons
