"""kill -9 of the Spark driver, restart from the checkpoint: every record lands exactly once.

The driver is ``python -m oncelog.spark.copy_job`` (the ``oncelog`` source into one sink) in
a process group of its own, so ``kill -9`` takes the Python driver and its JVM down at once,
as a machine crash would. Two kills per run, at the two moments that matter:

1. mid-batch, before the sink wrote anything: the restarted query re-plans the batch from
   Spark's offset log (same id, same offsets) and writes it;
2. after the sink committed the batch but before Spark recorded it in its commit log: the
   restarted query runs that batch id again and the sink must skip it.

Records keep arriving between the crashes. The sink must then hold every produced id once.

Each test runs on oncelog's broker and on a real Apache Kafka (``any_spark_broker``, issue
32's swap path): the same contract, with a shorter workload on Kafka (``WORKLOADS``): fewer
records and one kill, the second moment above: the restarted query reads the batch again
from the broker at the offsets of Spark's offset log, and the sink skips it.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import new_topic, produce


class CopyJob:
    """One run of the copy job whose stdout lines can be waited for."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "oncelog.spark.copy_job", *args],
            stdout=subprocess.PIPE, stderr=open(log, "ab"), text=True,
            start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.strip())

    def wait_for(self, predicate, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if predicate(line):
                    return line
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"copy job never printed the line wanted; it printed {self.lines}")

    def kill(self) -> None:
        """kill -9 the whole process group: the Python driver and its JVM."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(30)

    def finish(self, timeout: float = 180) -> int:
        try:
            return self.process.wait(timeout)
        finally:
            self.kill()


def batch_line(kind: str, at_least: int):
    def matches(line: str) -> bool:
        parts = line.split()
        return len(parts) == 3 and parts[0] == "batch" and parts[2] == kind \
            and int(parts[1]) >= at_least
    return matches


@dataclass(frozen=True)
class Workload:
    """Records before the first run, records produced after the first kill, the batch size
    (``maxOffsetsPerTrigger``) and the kill points: a line the job prints (a database sink)
    and the number of files written (the file sink), one run killed at each."""

    first: int
    second: int
    per_batch: int
    kills: tuple[tuple, ...]

    @property
    def total(self) -> int:
        return self.first + self.second


# 1: inside batch >= 1, before its write; 2: just after batch >= 3 committed in the sink,
# before Spark's commit log has it. (The file sink has no such lines: kill once files of a
# few batches exist, while the next batches run.)
WORKLOADS = {
    "oncelog": Workload(3000, 1000, 700, ((batch_line("writing", 1), 2),
                                          (batch_line("written", 3), 5))),
    "apache-kafka": Workload(300, 150, 150, ((batch_line("written", 1), 2),)),
}


def run_with_crashes(bootstrap: str, topic: str, sink: str, tmp_path: Path,
                     workload: Workload, files: bool = False) -> list[CopyJob]:
    checkpoint = tmp_path / "checkpoint"
    args = ["--bootstrap", bootstrap, "--topic", topic, "--sink", sink,
            "--checkpoint", str(checkpoint),
            "--max-offsets-per-trigger", str(workload.per_batch), "--query-name", "crash-test"]
    log = tmp_path / "copy_job.log"
    jobs = []

    output = Path(sink[len("files://"):]) if files else None
    for number, (line, files_wanted) in enumerate(workload.kills):
        job = CopyJob(args + ["--pause-ms", "500"], log)
        jobs.append(job)
        try:
            if files:
                wait_for_files(output, files_wanted)
                time.sleep(0.3)
            else:
                job.wait_for(line)
        finally:
            job.kill()
        if number == 0:
            produce(bootstrap, topic, [f"id-{i}".encode() for i in
                                       range(workload.first, workload.total)])

    last = CopyJob(args + ["--stop-when-idle", "4"], log)
    jobs.append(last)
    assert last.finish() == 0, f"the last run failed; see {log}"
    return jobs


def wait_for_files(folder: Path, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(list(folder.glob("*.parquet"))) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"the file sink never wrote {count} files in {folder}")


def expected_ids(workload: Workload) -> list[str]:
    return sorted(f"id-{i}" for i in range(workload.total))


def assert_replayed_batch_was_skipped(jobs: list[CopyJob]) -> None:
    """The batch the sink committed just before the last kill ran again after it."""
    committed = max(int(line.split()[1]) for line in jobs[-2].lines
                    if batch_line("written", 0)(line))
    rerun = [line for line in jobs[-1].lines if line == f"batch {committed} writing"]
    assert rerun, f"batch {committed} was not re-run after the crash: {jobs[-1].lines[:5]}"


def crashed_copy(broker, tmp_path: Path, sink: str, files: bool = False) -> list[CopyJob]:
    """A 3-partition topic of ``workload.first`` ids copied into ``sink`` by runs killed at
    the workload's points, the rest of the ids produced after the first kill."""
    workload = WORKLOADS[broker.kind]
    topic = new_topic(broker.bootstrap, partitions=3)
    produce(broker.bootstrap, topic, [f"id-{i}".encode() for i in range(workload.first)])
    return run_with_crashes(broker.bootstrap, topic, sink, tmp_path, workload, files=files)


@pytest.mark.slow
@pytest.mark.timeout(600)  # 1-2.5 min (1 min on Kafka); Spark JVMs start slowly when loaded
def test_sqlite_sink_is_exactly_once_across_driver_crashes(any_spark_broker, tmp_path):
    database = tmp_path / "sink.db"

    jobs = crashed_copy(any_spark_broker, tmp_path, f"sqlite:///{database}")

    with sqlite3.connect(database) as connection:
        values = sorted(v for (v,) in connection.execute("SELECT value FROM records"))
        markers = connection.execute("SELECT batch_id FROM oncelog_sink_batches").fetchall()
    workload = WORKLOADS[any_spark_broker.kind]
    assert len(values) == workload.total
    assert values == expected_ids(workload)
    assert sorted(b for (b,) in markers) == list(range(len(markers)))
    assert_replayed_batch_was_skipped(jobs)


@pytest.mark.slow
@pytest.mark.timeout(600)  # 1-2.5 min (1 min on Kafka); Spark JVMs start slowly when loaded
def test_postgresql_sink_is_exactly_once_across_driver_crashes(any_spark_broker, postgres_url,
                                                               tmp_path):
    import psycopg

    jobs = crashed_copy(any_spark_broker, tmp_path, postgres_url)

    with psycopg.connect(postgres_url) as connection:
        values = sorted(v for (v,) in connection.execute("SELECT value FROM records"))
    workload = WORKLOADS[any_spark_broker.kind]
    assert len(values) == workload.total
    assert values == expected_ids(workload)
    assert_replayed_batch_was_skipped(jobs)


@pytest.mark.slow
@pytest.mark.timeout(600)  # 1-2.5 min (1 min on Kafka); Spark JVMs start slowly when loaded
def test_file_sink_read_through_spark_is_exactly_once_across_driver_crashes(
        spark, any_spark_broker, tmp_path):
    from oncelog.spark.sinks import read_files
    output = tmp_path / "output"

    crashed_copy(any_spark_broker, tmp_path, f"files://{output}", files=True)

    values = sorted(r.value for r in read_files(spark, output).select("value").collect())
    workload = WORKLOADS[any_spark_broker.kind]
    assert len(values) == workload.total
    assert values == expected_ids(workload)
