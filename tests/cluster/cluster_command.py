"""``oncelog cluster start`` as a user runs it, for the tests: a subprocess whose output is read
line by line, whose processes (ZooKeeper and the brokers, from the ``(pid N, ...)`` lines it
prints) are known by pid, and which ``close()`` ends with its whole tree, every pid it ever
printed included, even when a test fails half-way.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.process_tree import descendants, kill_tree, run_to_end, running

ONCELOG = [sys.executable, "-m", "oncelog"]


def oncelog(*args: str, cwd: Path | None = None, timeout: float = 60,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return run_to_end([*ONCELOG, *args], timeout=timeout, cwd=cwd, env=env)


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), to tell it from a later process that
    reused its number; None if it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def gone_within(pids: list[int], timeout_s: float) -> list[int]:
    """The pids still running after ``timeout_s`` (none, if all went in time)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = [pid for pid in pids if running(pid)]
        if not left:
            return []
        time.sleep(0.1)
    return [pid for pid in pids if running(pid)]


class ClusterCommand:
    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen([*ONCELOG, "cluster", "start", *args], cwd=cwd,
                                        env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.pids: dict[int, int | None] = {}  # pid -> its start time
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line)
                for pid in map(int, re.findall(r"\(pid (\d+)", line)):
                    self.pids.setdefault(pid, start_time(pid))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def output(self) -> str:
        with self._changed:
            return "".join(self.lines)

    def wait_for_line(self, pattern: str, timeout_s: float = 120.0, after: int = 0) -> str:
        """The first line from index ``after`` on matching ``pattern`` (a regex)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for line in self.lines[after:]:
                    if re.search(pattern, line):
                        return line
                if self.process.poll() is not None and not self._reader.is_alive():
                    raise AssertionError(f"cluster start exited ({self.process.returncode}) "
                                         f"before printing /{pattern}/:\n{self.output}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"no line /{pattern}/ within {timeout_s:g} s:\n"
                                         f"{self.output}")
                self._changed.wait(0.2)

    def bootstrap(self, timeout_s: float = 120.0) -> str:
        return self.wait_for_line(r"^bootstrap servers: ", timeout_s).split(": ", 1)[1].strip()

    def children(self) -> list[int]:
        """The command's live descendants (ZooKeeper, brokers) and every pid it printed that
        is still the process it printed."""
        printed = {pid for pid, started in self.pids.items()
                   if started is not None and start_time(pid) == started}
        return sorted({*descendants(self.process.pid), *printed} - {self.process.pid})

    def interrupt(self, timeout_s: float = 90.0) -> int:
        """Ctrl-C, as in its terminal: SIGINT to the command; its exit status."""
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout_s)
        self._reader.join(10)
        return self.process.returncode

    def close(self) -> None:
        """SIGKILL to whatever is left: the command's tree and every pid it printed."""
        pids = self.children()
        if self.process.poll() is None:
            kill_tree(self.process)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reader.join(10)

    def __enter__(self) -> ClusterCommand:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
