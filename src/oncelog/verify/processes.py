"""The child processes of a verify run, and how every one of them is stopped.

Each child (a producer, a consumer, the Spark copy job) starts in **its own session**
(``start_new_session=True``), which gives it its own process group:

- a Ctrl-C typed at the terminal reaches only the verifier, which then stops its children
  itself, in order, instead of every process dying at once half-way through a write;
- ``kill -9`` of a child is ``killpg``: the Spark copy job's driver dies together with its
  JVM and Python workers, which is what a crashed driver looks like.

``Children`` remembers every process started, so ``stop_all()`` (called from the runner's
``finally``) kills whatever is still alive, each group by its id, even mid-fault. A worker
that is our own code (``oncelog.verify.workloads.*``) also calls ``die_with_parent()``: on
Linux it asks the kernel to SIGKILL it when the verifier dies, so even a verifier killed
with ``kill -9`` leaves nothing behind. The kernel ties that to the *thread* that forked the
child, so children are started from the runner's main thread only.

A child may have its stdout watched (``watch=True``): a thread copies each line, with a
timestamp, to the child's log and keeps it, so the runner can wait for a line (the copy
job's ``batch N written``, a consumer's ``ready``) with ``wait_for_line``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ChildProcess", "Children", "Line", "PARENT_ENV", "die_with_parent"]

PARENT_ENV = "ONCELOG_VERIFY_PARENT"
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a worker: be SIGKILLed when the verifier that started us dies (Linux only).

    If the verifier died before we got here, exit at once."""
    expected = os.environ.get(PARENT_ENV)
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if expected is not None and os.getppid() != int(expected):
        os._exit(1)


@dataclass(frozen=True)
class Line:
    time: float      # time.monotonic() when it was read
    text: str


class ChildProcess:
    """One child process in its own session; stopped and killed as a process group."""

    def __init__(self, name: str, argv: list[str], log_path: Path, *,
                 watch: bool = False, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.watch = watch
        self.env = env
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self.lines: list[Line] = []
        self._lines_changed = threading.Condition()
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def start(self) -> ChildProcess:
        if self.alive:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **(self.env or {}), PARENT_ENV: str(os.getpid())}
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stderr=log, env=env,
                stdout=subprocess.PIPE if self.watch else log, start_new_session=True)
        finally:
            log.close()
        self.starts += 1
        if self.watch:
            self._reader = threading.Thread(target=self._read_lines, args=(self.process,),
                                            name=f"{self.name}-stdout", daemon=True)
            self._reader.start()
        return self

    def _read_lines(self, process: subprocess.Popen[bytes]) -> None:
        stdout = process.stdout
        assert stdout is not None  # started with stdout=PIPE
        with open(self.log_path, "ab", buffering=0) as log:
            for raw in stdout:
                line = Line(time.monotonic(), raw.decode(errors="replace").rstrip("\n"))
                log.write(f"[{time.strftime('%H:%M:%S')}] {line.text}\n".encode())
                with self._lines_changed:
                    self.lines.append(line)
                    self._lines_changed.notify_all()
        stdout.close()
        with self._lines_changed:
            self._lines_changed.notify_all()  # EOF: whoever waits for a line has them all

    def wait_for_line(self, predicate: Callable[[str], bool], *, after: float,
                      timeout: float) -> Line | None:
        """The first line read after ``after`` (monotonic) that matches, or None on timeout
        or when the child exited and every line it wrote has been read (a child's last line,
        written just before it died, may still be in the pipe when it has exited)."""
        deadline = time.monotonic() + timeout
        with self._lines_changed:
            while True:
                found = next((line for line in self.lines
                              if line.time > after and predicate(line.text)), None)
                if found is not None:
                    return found
                remaining = deadline - time.monotonic()
                reading = self._reader is not None and self._reader.is_alive()
                if remaining <= 0 or not (self.alive or reading):
                    return None
                self._lines_changed.wait(min(remaining, 0.2))

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the child process itself (not its group)."""
        if self.alive and self.process is not None:
            try:
                os.kill(self.process.pid, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> int | None:
        """``kill -9`` of the whole process group; returns the pid that was killed."""
        if self.process is None:
            return None
        pid = self.process.pid
        self._killpg(signal.SIGKILL)
        self.process.wait()
        self._join_reader()
        return pid

    def wait_exit(self, timeout: float) -> bool:
        if self.process is None:
            return True
        try:
            self.process.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the group, then SIGKILL to whatever is left after ``timeout``."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self._killpg(signal.SIGTERM)
            if not self.wait_exit(timeout):
                self._killpg(signal.SIGKILL)
                self.process.wait()
        self._killpg(signal.SIGKILL)  # the leader is gone; take anything it left behind
        self._join_reader()

    def _killpg(self, signum: int) -> None:
        if self.process is None:
            return  # never started: no group to signal
        try:
            os.killpg(self.process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(5)
            self._reader = None


class Children:
    """Every process a run started (and a broker or a whole ``LocalCluster``, if it started
    one); ``stop_all`` stops them all, last started first."""

    def __init__(self) -> None:
        self._children: list[ChildProcess] = []
        self._brokers: list = []
        self._clusters: list = []
        self._spark_clusters: list = []

    def add(self, child: ChildProcess) -> ChildProcess:
        self._children.append(child)
        return child

    def add_broker(self, broker) -> None:
        self._brokers.append(broker)

    def add_cluster(self, cluster) -> None:
        """A ``LocalCluster``: its brokers, then its ZooKeeper, are stopped last."""
        self._clusters.append(cluster)

    def add_spark_cluster(self, cluster) -> None:
        """A ``spark.standalone.StandaloneCluster``: stopped (by process group: its Workers
        take their executors along) after the children, before the brokers."""
        self._spark_clusters.append(cluster)

    def stop_all(self, *, graceful: bool = True) -> int:
        """Stop every child (SIGTERM then SIGKILL, or SIGKILL at once); return how many
        were still running."""
        running = 0
        for child in reversed(self._children):
            if child.alive:
                running += 1
            if graceful:
                child.stop(timeout=5.0)
            else:
                child.kill()
        for spark_cluster in reversed(self._spark_clusters):
            running += sum(1 for worker in spark_cluster.workers if worker.alive())
            spark_cluster.stop()
        for broker in reversed(self._brokers):
            if broker.process is not None and broker.process.poll() is None:
                running += 1
                broker.stop(timeout=10.0) if graceful else broker.kill()
        for cluster in reversed(self._clusters):
            running += sum(1 for node in cluster.brokers if cluster.is_running(node))
            if not graceful:  # kill -9 (SIGKILL ends a stopped process too); then ZooKeeper
                for node in cluster.brokers:
                    cluster.kill(node)
            cluster.stop()  # resumes paused brokers, stops the rest by pid, then ZooKeeper
        return running
