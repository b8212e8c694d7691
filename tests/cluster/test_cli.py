"""``oncelog cluster start`` / ``cluster status`` / ``topics describe`` as a user runs them:
a real ZooKeeper and brokers started by the command, stopped by Ctrl-C with nothing left."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.process_tree import run_to_end

pytestmark = pytest.mark.slow

ONCELOG = [sys.executable, "-m", "oncelog"]


def run(*args: str) -> subprocess.CompletedProcess:
    return run_to_end([*ONCELOG, *args], timeout=60)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cluster_start_status_describe_and_ctrl_c(tmp_path):
    command = subprocess.Popen([*ONCELOG, "cluster", "start", "--brokers", "2", "--port", "0",
                                "--data-dir", str(tmp_path / "cluster")],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, pids = [], []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = command.stdout.readline()
            assert line, "cluster start exited early:\n" + "".join(lines)
            lines.append(line)
            pids += [int(p) for p in re.findall(r"\(pid (\d+),", line)]
            if line.startswith("bootstrap servers: "):
                bootstrap = line.split(": ", 1)[1].strip()
                break
        else:
            raise AssertionError("no bootstrap servers line:\n" + "".join(lines))
        first = bootstrap.split(",")[0]
        assert run("topics", "create", "orders", "-r", "2", "-p", "2", "-b", first).returncode == 0
        describe = run("topics", "describe", "orders", "-b", first)
        assert describe.returncode == 0, describe.stderr
        rows = [line.split("\t") for line in describe.stdout.splitlines()[2:4]]
        for _index, leader, epoch, replicas, isr, offline, *_ in rows:
            assert int(leader) in (1, 2) and epoch == "0"
            assert sorted(eval(replicas)) == [1, 2] and sorted(eval(isr)) == [1, 2]
            assert offline == "[]"
        status = run("cluster", "status", "-b", bootstrap)
        assert status.returncode == 0, status.stderr
        assert "broker 1\t" in status.stdout and "broker 2\t" in status.stdout
        assert ", 0 under-replicated, 0 offline" in status.stdout
    finally:
        command.send_signal(signal.SIGINT)
        try:
            command.wait(60)
        except subprocess.TimeoutExpired:
            command.kill()
    assert command.returncode == 0
    assert "stopped" in command.stdout.read()
    assert len(pids) == 3 and not [p for p in pids if alive(p)]  # ZooKeeper and 2 brokers
    assert "Traceback" not in "".join(lines)


def test_status_of_a_cluster_nobody_runs_is_one_sentence():
    from oncelog.broker.process import free_port
    result = run("cluster", "status", "-b", f"127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert result.stderr.startswith("oncelog: cannot reach a broker at ")
    assert "Traceback" not in result.stderr
