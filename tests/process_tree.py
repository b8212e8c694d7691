"""A test's processes and everything they start, found from /proc and stopped by pid.

``descendants(pid)`` is a process's whole tree; ``running(pid)`` tells a live process from
a zombie; ``run_to_end(command, timeout)`` is ``subprocess.run`` for a command that starts
processes of its own (``oncelog demo``, ``oncelog cluster``): when it overruns, or the test
is interrupted meanwhile, the whole tree gets SIGKILL, not the command alone, so no broker
or ZooKeeper outlives the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path


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


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL to ``process`` and every process below it, by pid; then reap it."""
    for pid in [*descendants(process.pid), process.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()


def run_to_end(command: list[str], timeout: float,
               stop: Callable[[subprocess.Popen], None] = kill_tree,
               **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(command, capture_output=True, text=True, timeout=timeout)``, except
    that an overrun (``AssertionError`` with the output) or an interruption (pytest-timeout)
    ends the tree with ``stop``, by default ``kill_tree``."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, **kwargs)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(process)
        stdout, stderr = process.communicate()
        raise AssertionError(f"{' '.join(command)} did not finish in {timeout:g} s\n"
                             f"--- stdout ---\n{stdout[-3000:]}\n--- stderr ---\n"
                             f"{stderr[-2000:]}") from None
    except BaseException:
        stop(process)
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
