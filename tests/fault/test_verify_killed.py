"""``kill -9`` of ``oncelog verify`` itself: nothing it started is left running."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from .verify_run import command_line, descendants, running, stop_run, wait_for


@pytest.mark.slow
def test_kill_9_of_verify_leaves_nothing_running(tmp_path):
    """Its workers already asked the kernel to kill them with the verifier, but the broker it
    started did not, and outlived a ``kill -9`` of the verifier (parent pid 1), holding
    ``--out``'s data. Now the broker is started tied to the verifier too: within seconds of
    the kill, no process of the run is left. The run is started from an empty folder with
    the default, relative ``--out``."""
    verify = subprocess.Popen([sys.executable, "-m", "oncelog", "verify", "--semantics",
                               "at-least-once", "--faults", "none", "--duration", "60",
                               "--seed", "7"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tree: list[int] = []
    try:
        def workload_running() -> bool:
            tree[:] = descendants(verify.pid)
            lines = [command_line(pid) for pid in tree]
            return (any("oncelog broker" in line for line in lines)
                    and any("workloads.producer" in line for line in lines))
        wait_for(workload_running, 120, "the broker and the producers")
        time.sleep(1)
        tree[:] = descendants(verify.pid)
        verify.kill()
        verify.wait(10)
        deadline = time.monotonic() + 10
        while [pid for pid in tree if running(pid)] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [command_line(pid) for pid in tree if running(pid)] == []
        assert (tmp_path / "verify-out" / "broker" / "data").is_dir()
    finally:
        stop_run(verify, tree, wait_s=5)
