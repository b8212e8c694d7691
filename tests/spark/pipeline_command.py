"""``oncelog pipeline run`` as a subprocess for the tests: ``Run`` reads its output line by
line from a pipe (as a log file or CI sees it), with the time each line arrived, remembers
every process it was seen to start, and ``close()`` kills them all by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.process_tree import descendants, running

ONCELOG = [sys.executable, "-m", "oncelog"]


class Run:
    """``oncelog pipeline run ARGS`` in ``cwd``, its output read line by line (with the time
    each line arrived) from a pipe, as a log file or CI would see it."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.process = subprocess.Popen([*ONCELOG, "pipeline", "run", *args], cwd=cwd,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
        self.lines: list[tuple[float, str]] = []
        self.seen: dict[int, int | None] = {}  # every descendant seen -> its start time
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append((time.monotonic(), line))

    @property
    def output(self) -> str:
        return "".join(line for _, line in self.lines)

    def wait_for(self, predicate, what: str, timeout_s: float = 240.0):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for pid in descendants(self.process.pid):
                self.seen.setdefault(pid, start_time(pid))
            found = predicate()
            if found:
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"{what} did not happen:\n{self.output}")

    def finish(self, timeout_s: float = 400.0) -> int:
        self.process.wait(timeout_s)
        self._reader.join(10)
        return self.process.returncode

    def close(self) -> None:
        """SIGKILL to the run and to every process it was seen to start, still alive (and
        still that process, not a later one with its pid)."""
        seen = [pid for pid, started in self.seen.items()
                if started is not None and start_time(pid) == started]
        for pid in [self.process.pid, *descendants(self.process.pid), *seen]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()


def start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def gone_within(pids, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while [pid for pid in pids if running(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if running(pid)]


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
