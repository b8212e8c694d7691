"""Spark's own processes run from the PySpark installation, each in a process group of its own.

Used by ``standalone`` (a Master and Workers) and ``connect_server`` (a Connect server).
``spark_home()`` is the installation (``SPARK_HOME`` when set, else the ``pyspark``
package, which holds ``bin/`` and ``jars/``); ``spark_environment()`` is what every Spark
process here needs: Python workers running this interpreter (``PYSPARK_PYTHON``) and
binding to loopback (``SPARK_LOCAL_IP``; ``session.py`` says why).

``ProcessGroup(name, command, log_path).start(environment, cwd)`` starts the command with
``start_new_session``: a Spark launcher script execs a JVM, which starts executors or Python
workers as its children, and they all stay in the group. ``stop()`` sends SIGTERM to the
group, then SIGKILL to whatever is left of it (so nothing outlives the process, even after
its JVM exited first); ``kill()`` is SIGKILL at once, as a crash. A Ctrl-C in the caller's
terminal does not reach the group, so the caller decides the order of shutdown. The leader is
started tied to the caller (``served_process.tied_to_this_process``): if the caller is killed
outright, the kernel kills the leader (a Master, a Worker, whose executors then exit on losing
it; a Connect server).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from ..served_process import tied_to_this_process


class SparkNotInstalled(RuntimeError):
    """PySpark is not installed: one sentence saying how to get it."""


def spark_home() -> Path:
    """The Spark installation: ``SPARK_HOME`` when set, else the installed PySpark."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    try:
        import pyspark
    except ImportError:
        raise SparkNotInstalled("PySpark is not installed: pip install 'oncelog[spark]'") \
            from None
    return Path(pyspark.__file__).parent


def spark_environment() -> dict[str, str]:
    """This process's environment plus what Spark's processes and Python workers need here."""
    environment = dict(os.environ)
    environment.setdefault("PYSPARK_PYTHON", sys.executable)
    environment.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    environment.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return environment


class ProcessGroup:
    """One Spark process and everything it starts, stopped together by process group."""

    def __init__(self, name: str, command: list[str], log_path: Path) -> None:
        self.name = name
        self.command = command
        self.log_path = Path(log_path)
        self.process: subprocess.Popen | None = None

    def start(self, environment: dict[str, str], cwd: Path) -> ProcessGroup:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(tied_to_this_process(self.command), stdout=log,
                                            stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=environment, cwd=cwd,
                                            start_new_session=True)
        return self

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal_group(self, signum: int) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signum)  # the group's id is the leader's pid
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL to the whole group at once (the process and its children: a crash)."""
        self.signal_group(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM to the group, SIGKILL to what is left after ``timeout_s``; then forgotten."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.signal_group(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
        self.signal_group(signal.SIGKILL)  # children left in the group, if any
        if self.process.poll() is None:
            self.process.wait()
        self.process = None
