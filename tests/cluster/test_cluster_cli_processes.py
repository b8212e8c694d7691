"""The processes of ``oncelog cluster start``: why one could not start, and restarting one
broker of a running cluster."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time

import pytest

from .cluster_command import ONCELOG, ClusterCommand, gone_within, oncelog


def test_a_broker_that_cannot_bind_its_port_says_why(tmp_path):
    """Broker 1's port is taken by a listening socket. The message ended ``see
    .../broker.log:`` with nothing after the colon: the command printed only the first line
    of an error whose reason (the log's tail) followed on the next lines. Now the sentence
    carries the broker's own last error line, and ZooKeeper is stopped."""
    with socket.socket() as occupant:
        occupant.bind(("127.0.0.1", 0))
        occupant.listen()
        port = occupant.getsockname()[1]
        with ClusterCommand("--brokers", "1", "--port", str(port), "--data-dir", "c",
                            cwd=tmp_path) as command:
            status = command.process.wait(90)
            command.close()
            printed = command.children()
    assert status == 1, command.output
    error = command.output.splitlines()[-1]
    assert error.startswith("oncelog: the cluster did not start: broker 1 exited with status "
                            f"1: cannot listen on 127.0.0.1:{port}: "), error
    assert "address already in use" in error
    assert error.endswith(f"; see {tmp_path / 'c' / 'broker-1' / 'broker.log'}")
    assert "Traceback" not in command.output
    assert gone_within(printed, 10) == []


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_restart_broker_brings_a_killed_broker_of_cluster_start_back(tmp_path):
    """There was no way to restart one broker of a ``cluster start``: its command line was
    nowhere, and a broker started by hand would not be the command's (Ctrl-C would leave it
    running). Now ``oncelog cluster restart-broker N``, from another terminal, asks the
    running ``cluster start`` to restart broker N on its address with its data; the command
    says how when a broker exits. Broker 2 is killed with ``kill -9`` and brought back with
    the documented command; the cluster shows it back and in sync: an ``acks=all`` produce
    to a topic with ``min.insync.replicas=3`` succeeds; Ctrl-C stops it with the others."""
    with ClusterCommand("--brokers", "3", "--port", "0", "--set",
                        "zookeeper.session.timeout.ms=6000", cwd=tmp_path) as command:
        bootstrap = command.bootstrap()
        created = oncelog("topics", "create", "orders", "-p", "1", "-r", "3", "--config",
                          "min.insync.replicas=3", "-b", bootstrap)
        assert created.returncode == 0, created.stderr
        line = command.wait_for_line(r"^broker 2: ")
        address, pid = re.match(r"broker 2: (\S+) \(pid (\d+),", line).groups()
        os.kill(int(pid), signal.SIGKILL)
        hint = command.wait_for_line(r"broker 2 exited", timeout_s=30)
        data_dir = tmp_path / "oncelog-cluster"
        assert hint.strip().endswith(
            f"restart it with: oncelog cluster restart-broker 2 --data-dir {data_dir}"), hint

        restarted = oncelog("cluster", "restart-broker", "2", cwd=tmp_path, timeout=150)
        assert restarted.returncode == 0, restarted.stderr
        new_pid = int(re.fullmatch(rf"broker 2 restarted: {address} \(pid (\d+)\)\n",
                                   restarted.stdout)[1])
        assert new_pid != int(pid) and new_pid in command.children()

        deadline = time.monotonic() + 90
        while True:
            status = oncelog("cluster", "status", "-b", bootstrap)
            if status.returncode == 0 and "0 under-replicated, 0 offline" in status.stdout:
                break
            assert time.monotonic() < deadline, status.stdout + status.stderr
            time.sleep(1)
        assert f"broker 2\t{address}" in status.stdout
        produced = subprocess.run([*ONCELOG, "produce", "orders", "--acks", "all", "-b",
                                   bootstrap], input="after the restart\n", timeout=60,
                                  capture_output=True, text=True)
        assert produced.returncode == 0, produced.stderr

        children = command.children()
        assert command.interrupt() == 0, command.output
        assert gone_within(children, 10) == []
    assert "Traceback" not in command.output


def test_restart_broker_without_a_running_cluster_is_one_sentence(tmp_path):
    """No cluster ever started in the folder, or its ``cluster start`` gone: one sentence
    saying which, and how to start it."""
    nothing = oncelog("cluster", "restart-broker", "1", "--data-dir", "c", cwd=tmp_path)
    assert nothing.returncode == 1
    assert nothing.stderr.splitlines() == [
        f"oncelog: no cluster was started in {tmp_path / 'c'} (no cluster.json); start one "
        f"with: oncelog cluster start --data-dir {tmp_path / 'c'}"]
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "cluster.json").write_text('{"owner": {"pid": 999999999}}')
    stale = oncelog("cluster", "restart-broker", "1", "--data-dir", "c", cwd=tmp_path)
    assert stale.returncode == 1
    assert stale.stderr.splitlines() == [
        f"oncelog: the cluster in {tmp_path / 'c'} is not running (its oncelog cluster start "
        f"has exited); start it again with: oncelog cluster start --data-dir {tmp_path / 'c'}"]
