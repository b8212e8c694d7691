"""A Spark standalone cluster on this machine, from the PySpark installation: one Master, N Workers.

The pip package ships ``bin/spark-class`` but no ``start-master.sh``/``start-worker.sh``, so
``StandaloneCluster(directory, workers=2).start()`` runs Spark's own classes directly::

    spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port P --webui-port U
    spark-class org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores C --memory M \\
        --work-dir DIR --webui-port 0 spark://127.0.0.1:P

each in a session of its own (``start_new_session``) with its log in ``directory``, waits
until the Master's ``/json`` page lists every worker ``ALIVE``, and ``stop()`` ends them by
process group (SIGTERM, then SIGKILL): a Worker's executors and their Python workers are in
its group, so nothing outlives the cluster. ``master_url`` is what ``--master`` takes.

``executors()`` reads the running applications' executors from the workers' pages (executor
id, worker, pid), which is what the tests and ``oncelog verify --faults kill-executor`` use
to kill one executor with SIGKILL, as a machine losing a process would.

Everything binds to loopback (``SPARK_LOCAL_IP``): Spark otherwise resolves the host name,
which on many machines is not reachable from itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..served_process import free_port
from .process_group import ProcessGroup, spark_environment, spark_home
from .status import get_json

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


class SparkClusterError(RuntimeError):
    """The cluster could not start: one sentence naming the log to read."""


def cluster_environment() -> dict[str, str]:
    """What every Spark process here needs (``spark_environment``), small daemons, a quiet log."""
    environment = spark_environment()
    environment.setdefault("SPARK_HOME", str(spark_home()))
    environment["SPARK_DAEMON_MEMORY"] = environment.get("SPARK_DAEMON_MEMORY", "256m")
    environment["SPARK_DAEMON_JAVA_OPTS"] = " ".join(filter(None, [
        environment.get("SPARK_DAEMON_JAVA_OPTS", ""),
        f"-Dlog4j2.configurationFile={_LOG_CONFIG}", "-XX:TieredStopAtLevel=1"]))
    return environment


@dataclass(frozen=True)
class Executor:
    """One executor a Worker runs for an application."""
    app_id: str
    executor_id: str
    worker_id: str
    pid: int | None


class StandaloneCluster:
    def __init__(self, directory: Path, *, workers: int = 2, cores_per_worker: int = 1,
                 memory_per_worker: str = "1g", host: str = "127.0.0.1") -> None:
        self.directory = Path(directory)
        self.host = host
        self.worker_count = workers
        self.cores_per_worker = cores_per_worker
        self.memory_per_worker = memory_per_worker
        self.port = 0
        self.webui_port = 0
        self.master: ProcessGroup | None = None
        self.workers: list[ProcessGroup] = []

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def master_ui(self) -> str:
        return f"http://{self.host}:{self.webui_port}"

    def _spark_class(self, main: str, *arguments: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), main, *arguments]

    def start(self, timeout_s: float = 60.0) -> StandaloneCluster:
        self.directory.mkdir(parents=True, exist_ok=True)
        environment = cluster_environment()
        self.port, self.webui_port = free_port(self.host), free_port(self.host)
        self.master = ProcessGroup("master", self._spark_class(
            MASTER_CLASS, "--host", self.host, "--port", str(self.port),
            "--webui-port", str(self.webui_port)), self.directory / "master.log")
        try:
            self.master.start(environment, self.directory)
            self._wait(lambda: self.master_state() is not None, timeout_s, "the master")
            for _ in range(self.worker_count):
                self.add_worker(environment)
            self.wait_for_workers(self.worker_count, timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(self, environment: dict[str, str] | None = None) -> ProcessGroup:
        """Start one more Worker (also after a killed one, to give the cluster its cores back)."""
        index = len(self.workers)
        work_dir = self.directory / f"worker-{index}"
        work_dir.mkdir(parents=True, exist_ok=True)
        worker = ProcessGroup(f"worker-{index}", self._spark_class(
            WORKER_CLASS, "--host", self.host, "--cores", str(self.cores_per_worker),
            "--memory", self.memory_per_worker, "--work-dir", str(work_dir),
            "--webui-port", str(free_port(self.host)), self.master_url),
            self.directory / f"worker-{index}.log")
        worker.start(environment or cluster_environment(), work_dir)
        self.workers.append(worker)
        return worker

    def wait_for_workers(self, count: int, timeout_s: float = 60.0) -> None:
        self._wait(lambda: len(self.alive_workers()) >= count, timeout_s,
                   f"{count} worker(s) to register")

    def _wait(self, condition, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.master is None or not self.master.alive():
                raise SparkClusterError(f"the Spark master exited while starting; see "
                                        f"{self.directory / 'master.log'}")
            if condition():
                return
            time.sleep(0.2)
        raise SparkClusterError(f"timed out after {timeout_s:g} s waiting for {what}; see the "
                                f"logs in {self.directory}")

    def master_state(self) -> dict | None:
        """The Master's ``/json/`` page: workers, active and completed applications."""
        return get_json(f"{self.master_ui}/json/")

    def alive_workers(self) -> list[dict]:
        state = self.master_state() or {}
        return [worker for worker in state.get("workers", []) if worker.get("state") == "ALIVE"]

    def executors(self) -> list[Executor]:
        """The executors the Workers run now, with their process ids."""
        pids = local_executor_pids()  # one pass over /proc for them all
        found = []
        for worker in self.alive_workers():
            state = get_json(f"{worker['webuiaddress'].rstrip('/')}/json/") or {}
            for executor in state.get("executors", []):
                app_id, executor_id = str(executor.get("appid", "")), str(executor.get("id"))
                found.append(Executor(app_id=app_id, executor_id=executor_id,
                                      worker_id=worker["id"],
                                      pid=pids.get((app_id, executor_id))))
        return found

    def kill_worker(self, index: int) -> None:
        """SIGKILL a Worker with its executors, as a machine going down."""
        self.workers[index].kill()

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        if self.master is not None:
            self.master.stop()
            self.master = None

    def __enter__(self) -> StandaloneCluster:
        if self.master is None:
            self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def executor_pid(app_id: str, executor_id: str) -> int | None:
    """The pid of application ``app_id``'s executor ``executor_id`` if its JVM runs on this
    machine, else None: an executor on another machine has no pid here."""
    return local_executor_pids().get((app_id, executor_id))


def local_executor_pids() -> dict[tuple[str, str], int]:
    """(application id, executor id) -> pid of every executor JVM on this machine: each a
    ``CoarseGrainedExecutorBackend`` with ``--app-id`` and ``--executor-id`` on its command
    line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (b"org.apache.spark.executor.CoarseGrainedExecutorBackend" not in arguments
                or b"--app-id" not in arguments or b"--executor-id" not in arguments):
            continue
        app_id = arguments[arguments.index(b"--app-id") + 1:][:1]
        executor_id = arguments[arguments.index(b"--executor-id") + 1:][:1]
        if app_id and executor_id:
            found[(app_id[0].decode(), executor_id[0].decode())] = int(entry.name)
    return found
