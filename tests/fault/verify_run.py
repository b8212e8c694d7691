"""Running ``oncelog verify`` as a user would (a subprocess), and the process tree it owns.

``run_verify`` returns the finished process and ``result.json`` (None when none was
written); ``descendants(pid)`` (``tests/process_tree.py``) lists a process's whole tree from
/proc, so a test can check that every process a run started is gone afterwards; ``wait_for``
polls a condition.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.process_tree import descendants, run_to_end, running  # noqa: F401 (re-exported)


@dataclass
class VerifyRun:
    returncode: int
    stdout: str
    stderr: str
    out: Path
    result: dict | None
    seconds: float

    def explain(self) -> str:
        """For assertion messages: the seed (replay with --seed), status and output tails."""
        seed = self.result["seed"] if self.result else "?"
        return (f"seed {seed} (replay: oncelog verify --seed {seed} ...), exit "
                f"{self.returncode}, {self.seconds:.0f} s, output in {self.out}\n"
                f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-2000:]}")


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def verify_command(out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "oncelog", "verify", "--out", str(out), *args]


def run_verify(out: Path, *args: str, timeout: float = 240) -> VerifyRun:
    """Run ``oncelog verify`` to its end. A run past ``timeout``, or a test interrupted
    meanwhile (pytest-timeout), is stopped with ``stop_run`` (Ctrl-C, then SIGKILL to the
    tree): its broker and clients never outlive the test."""
    started = time.monotonic()
    done = run_to_end(verify_command(out, *args), timeout,
                      stop=lambda process: stop_run(process, [], wait_s=30),
                      stdin=subprocess.DEVNULL, preexec_fn=interruptible)
    result_path = out / "result.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    return VerifyRun(done.returncode, done.stdout, done.stderr, out, result,
                     time.monotonic() - started)


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "?"


def stop_run(verify: subprocess.Popen, tree: list[int], wait_s: float) -> None:
    """A test's last word on a verify run it interrupted: SIGINT if still running (SIGKILL
    after ``wait_s``), then SIGKILL for every process of ``tree`` still alive, so a failing
    test leaves nothing running - paused brokers included."""
    if verify.poll() is None:
        tree = tree or descendants(verify.pid)
        verify.send_signal(signal.SIGINT)
        try:
            verify.wait(wait_s)
        except subprocess.TimeoutExpired:
            verify.kill()
            verify.wait()
    for pid in tree:
        if running(pid):
            os.kill(pid, signal.SIGKILL)


def interruptible() -> None:
    """``preexec_fn`` for a run a test will interrupt: SIGINT back to its default. A suite
    started in the background by a non-interactive shell inherits SIGINT ignored, and Python
    then installs no KeyboardInterrupt handler - the run would never see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
