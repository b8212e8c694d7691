"""A local SparkSession for a user's tests, with the ``oncelog`` source registered.

``local_spark_session()`` is ``oncelog.spark.session.local_session`` (``local[2]``, web UI
off, the worker Python set to this interpreter, loopback addresses) under a name of its
own; the plugin's ``oncelog_spark`` fixture keeps one for the whole session, because a JVM
takes seconds to start. Point ``kafka.bootstrap.servers`` at ``oncelog_broker.bootstrap``
so wire faults reach the job too.

PySpark comes with the ``spark`` extra (``pip install 'oncelog[spark]'``); without it the
fixture fails with one line saying so.

``SparkDriver(command)`` runs a driver program (your streaming job) as a child process in a
session of its own, so ``kill()`` - SIGKILL to the whole process group - takes the Python
driver and its JVM down at once, as a machine crash would; ``wait_for_line`` waits for a
line the job prints (e.g. a batch it reached), and the process group is killed by pid when
the ``with`` block ends or the interpreter exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .broker import _track, _untrack

__all__ = ["SparkDriver", "SparkUnavailable", "local_spark_session"]


class SparkUnavailable(RuntimeError):
    """PySpark is not installed."""


def local_spark_session(app_name: str = "oncelog-tests", *, cores: int = 2,
                        config: dict[str, str] | None = None):
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise SparkUnavailable("the oncelog_spark fixture needs PySpark: "
                               "pip install 'oncelog[spark]'") from None
    from ..spark.session import local_session
    return local_session(app_name, cores=cores, config=config)


class SparkDriver:
    def __init__(self, command: list[str], *, log_path: Path | str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.command = list(command)
        self.log_path = Path(log_path) if log_path else None
        self.env = env
        self.lines: list[str] = []
        self.process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> SparkDriver:
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"this driver already runs (pid {self.process.pid}); use either "
                               "start() or a with block, not both")
        stderr = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(
                self.command, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL,
                text=True, start_new_session=True,
                env={**os.environ, **self.env} if self.env else None)
        finally:
            if not isinstance(stderr, int):  # a log file, not DEVNULL
                stderr.close()
        _track(self)
        threading.Thread(target=self._read, daemon=True, name="spark-driver-stdout").start()
        return self

    def _started(self) -> subprocess.Popen[str]:
        assert self.process is not None, "start() the driver first"
        return self.process

    def _read(self) -> None:
        for line in self._started().stdout or ():
            self.lines.append(line.rstrip("\n"))

    def wait_for_line(self, wanted: str | Callable[[str], bool],
                      timeout_s: float = 120.0) -> str:
        """The first line the driver printed that starts with ``wanted`` (or satisfies it)."""
        matches = wanted if callable(wanted) else (lambda line: line.startswith(wanted))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if matches(line):
                    return line
            if self._started().poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"the driver never printed the line wanted within {timeout_s:g} s "
                             f"(exit status {self._started().poll()}); it printed: "
                             f"{self.lines[-10:]}")

    def kill(self) -> None:
        """kill -9 of the driver's whole process group (the Python driver and its JVM)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        _untrack(self.pid)

    kill_at_exit = kill

    def wait(self, timeout_s: float = 180.0) -> int:
        """Until the driver exits by itself; its exit status."""
        try:
            return self._started().wait(timeout_s)
        finally:
            self.kill()  # whatever it left in its group

    def __enter__(self) -> SparkDriver:
        """Start the driver unless ``start()`` already did; the block's end kills it."""
        if self.process is not None and self.process.poll() is None:
            return self
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()
