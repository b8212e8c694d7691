"""The processes of ``oncelog cluster start``: why one could not start, restarting one broker
of a running cluster, and nothing left behind when the command itself is killed."""

from __future__ import annotations

import socket

import pytest

from .cluster_command import ClusterCommand, gone_within, oncelog


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
    assert error.endswith(f"(see {tmp_path / 'c' / 'broker-1' / 'broker.log'})")
    assert "Traceback" not in command.output
    assert gone_within(printed, 10) == []
