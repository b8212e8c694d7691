"""Running ``oncelog verify`` as a user would (a subprocess), and the process tree it owns.

``run_verify`` returns the finished process and ``result.json`` (None when none was
written); ``descendants(pid)`` lists a process's whole tree from /proc, so a test can check
that every process a run started is gone afterwards; ``wait_for`` polls a condition.
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
    meanwhile (pytest-timeout), is stopped with ``stop_run``: its broker and clients never
    outlive the test."""
    started = time.monotonic()
    process = subprocess.Popen(verify_command(out, *args), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                               preexec_fn=interruptible)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_run(process, [], wait_s=30)
        stdout, stderr = process.communicate()
        raise AssertionError(f"oncelog verify did not finish in {timeout:g} s; output in {out}"
                             f"\n--- stdout ---\n{stdout[-4000:]}\n--- stderr ---\n"
                             f"{stderr[-2000:]}") from None
    except BaseException:
        stop_run(process, [], wait_s=30)
        raise
    result_path = out / "result.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    return VerifyRun(process.returncode, stdout, stderr, out, result,
                     time.monotonic() - started)


def _parents() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(pid: int) -> list[int]:
    tree, todo, found = _parents(), [pid], []
    while todo:
        kids = tree.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


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
