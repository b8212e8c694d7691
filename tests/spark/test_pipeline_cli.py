"""``oncelog pipeline run`` as a user meets it from a shell: the processes it starts die with
it, and a re-run after ``kill -9`` works. Real broker, real Spark, real SQLite."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from oncelog.broker.process import free_port, listens_itself
from tests.process_tree import descendants, running

from .pipeline_command import ONCELOG, Run, command_line, gone_within


@pytest.mark.slow
@pytest.mark.timeout(900)  # two runs with a Spark JVM each on a loaded machine
def test_kill_9_of_a_run_takes_its_processes_along_and_a_rerun_works(tmp_path):
    """``kill -9`` of ``oncelog pipeline run`` (the command alone, as ``kill -9 PID`` from
    another terminal) left its broker running, adopted by init; the next run on the same
    work directory then died with a traceback (``BrokerExited ... data directory ... is in
    use by another broker``). Now the broker is started tied to the command (Linux's
    parent-death signal) and Spark's driver JVM exits when its Python driver's pipe closes:
    within seconds nothing of the killed run is left, and the re-run - from the same folder,
    with the same relative ``--work-dir`` - holds every order once."""
    first = Run("--work-dir", "out", "--records", "3000", "--rate", "300", cwd=tmp_path)
    try:
        broker_pid = int(first.wait_for(
            lambda: re.search(r"broker pid (\d+) on", first.output), "the broker's start")[1])
        assert command_line(broker_pid).find("oncelog broker") >= 0
        assert f"--data-dir {tmp_path / 'out' / 'broker-data'}" in command_line(broker_pid)
        first.wait_for(lambda: [pid for pid in descendants(first.process.pid)
                                if "java" in command_line(pid)], "Spark's JVM start")
        tree = descendants(first.process.pid)
        os.kill(first.process.pid, signal.SIGKILL)
        first.finish(30)
        assert gone_within([broker_pid], 5) == [], "the broker outlived its run"
        assert gone_within(tree, 30) == [], [command_line(p)[:120] for p in tree if running(p)]
    finally:
        first.close()

    second = Run("--work-dir", "out", "--records", "500", "--rate", "1000", cwd=tmp_path)
    try:
        status = second.finish()
    finally:
        second.close()
    assert status == 0, second.output
    assert "Traceback" not in second.output
    assert "exactly once" in " ".join(second.output.split())


def test_a_broker_holding_the_work_dir_is_one_sentence_naming_its_pid(tmp_path):
    """A broker still running on the work directory's data (left by a run killed before this
    fix, or started by hand) made the run end in a traceback. Now it is one sentence naming
    the broker's pid, which the broker that holds the directory wrote beside its lock."""
    work = tmp_path / "work"
    port = free_port()
    holder = subprocess.Popen([*ONCELOG, "broker", "--listen", f"127.0.0.1:{port}",
                               "--data-dir", str(work / "broker-data")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not listens_itself(holder.pid, port):  # it holds the lock by then
            assert time.monotonic() < deadline and holder.poll() is None
            time.sleep(0.1)
        result = subprocess.run([*ONCELOG, "pipeline", "run", "--work-dir", str(work)],
                                capture_output=True, text=True, timeout=120)
    finally:
        holder.terminate()
        holder.wait(30)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        f"oncelog: the run's broker exited with status 1: data directory "
        f"{work / 'broker-data'} is in use by another broker (pid {holder.pid}); see "
        f"{work / 'broker.log'}"]
    assert "Traceback" not in result.stdout
