"""A Spark standalone cluster (one Master, two Workers of one core) and a broker for this folder.

Both are package-scoped: a Master and two Workers are three JVMs and ~10 s to start, so every
test here shares them (each test's driver is an application of its own, with a topic, a sink
and a checkpoint of its own). A test that kills a Worker leaves the cluster short of one;
``standalone`` gives the next test two live workers again. Everything is stopped by process
group in the fixtures' ``finally``, even when a test fails.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import running_broker
from oncelog.spark.standalone import StandaloneCluster
from oncelog.testing.spark import SparkDriver

REPOSITORY = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("cluster_job.py")
_names = itertools.count()


@pytest.fixture(scope="package")
def cluster_broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("cluster-broker")) as broker:
        yield broker


@pytest.fixture(scope="package")
def spark_cluster(tmp_path_factory):
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2,
                                cores_per_worker=1, memory_per_worker="1g")
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture
def standalone(spark_cluster):
    """The cluster with two live workers and no application left running from a test before."""
    missing = 2 - len(spark_cluster.alive_workers())
    for _ in range(max(0, missing)):
        spark_cluster.add_worker()
    spark_cluster.wait_for_workers(2)
    deadline = time.monotonic() + 60
    while (spark_cluster.master_state() or {}).get("activeapps"):
        assert time.monotonic() < deadline, "an application of an earlier test is still running"
        time.sleep(0.2)
    return spark_cluster


def new_topic(bootstrap: str, partitions: int) -> str:
    name = f"cluster{next(_names)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def produce_ids(bootstrap: str, topic: str, ids: range, partitions: int) -> None:
    """``id-N`` for every N in ``ids``, round robin over the partitions (each gets its share)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "enable.idempotence": True})
    for number in ids:
        producer.produce(topic, value=f"id-{number}".encode(), partition=number % partitions)
    assert producer.flush(15) == 0


def start_job(tmp_path: Path, master: str, bootstrap: str, topic: str, *extra: str,
              env: dict[str, str] | None = None) -> SparkDriver:
    """The driver (``cluster_job.py``), to start with ``with``: in a process group of its own,
    killed by the ``with`` block's end; its stderr in ``driver.log``."""
    command = [sys.executable, str(JOB), "--master", master, "--bootstrap", bootstrap,
               "--topic", topic, "--sink", f"sqlite:///{tmp_path / 'sink.db'}",
               "--checkpoint", str(tmp_path / "checkpoint"), *extra]
    environment = {"PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPOSITORY / "src"), os.environ.get("PYTHONPATH")]))}
    environment.update(env or {})
    return SparkDriver(command, log_path=tmp_path / "driver.log", env=environment)


def sink_rows(tmp_path: Path) -> list[tuple]:
    """(value, partition, offset, pids, executor, batch) of every row in the sink."""
    with sqlite3.connect(tmp_path / "sink.db") as connection:
        return connection.execute(
            "SELECT value, partition, \"offset\", pids, executor, batch FROM records").fetchall()


def sink_batches(tmp_path: Path) -> list[int]:
    with sqlite3.connect(tmp_path / "sink.db") as connection:
        return sorted(batch for (batch,) in connection.execute(
            "SELECT batch_id FROM oncelog_sink_batches WHERE query_name = 'cluster'"))


class ExecutorWatch:
    """Every executor the cluster ran while watched, with its JVM pid: executors die with the
    faults a test injects and are relaunched, so one look at the end would miss some."""

    def __init__(self, cluster: StandaloneCluster) -> None:
        self.cluster = cluster
        self.seen: dict[tuple[str, str], int] = {}   # (app id, executor id) -> JVM pid
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="executor-watch")

    def __enter__(self) -> ExecutorWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.look()
            self._stop.wait(0.3)

    def look(self) -> None:
        for executor in self.cluster.executors():
            if executor.pid is not None:
                self.seen.setdefault((executor.app_id, executor.executor_id), executor.pid)

    def pids(self, app_id: str | None = None) -> dict[int, str]:
        """JVM pid -> executor id (of one application)."""
        return {pid: executor_id for (app, executor_id), pid in self.seen.items()
                if app_id is None or app == app_id}

    def wait_for(self, app_id: str, count: int, timeout_s: float = 60.0) -> dict[int, str]:
        deadline = time.monotonic() + timeout_s
        while len(self.pids(app_id)) < count:
            assert time.monotonic() < deadline, \
                f"the cluster never ran {count} executors for {app_id}: {self.seen}"
            time.sleep(0.2)
        return self.pids(app_id)


def reading_now(progress_dir: Path, since: float, timeout_s: float = 60.0) -> list[int]:
    """The pid chain of a Python worker that read a row after ``since`` (a time.time()):
    proof that a task of the running batch is in flight there now."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for entry in progress_dir.iterdir():
            if entry.suffix == ".part":
                continue            # being written; renamed into place when whole
            try:
                if entry.stat().st_mtime > since:
                    chain = [int(pid) for pid in entry.read_text().split()]
                    if chain:
                        return chain
            except (OSError, ValueError):
                continue            # replaced or removed meanwhile: look again
        time.sleep(0.02)
    raise AssertionError(f"no task read a row within {timeout_s:g} s")
