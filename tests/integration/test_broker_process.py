"""``BrokerProcess`` on a busy machine: the free port it chose can be taken before the broker
binds it (CI once saw a cluster wait 60 s for a broker that had died on a taken port while
something else answered there)."""

from __future__ import annotations

import os
import socket

import pytest
from confluent_kafka.admin import AdminClient

from oncelog.broker.process import BrokerExited, BrokerProcess, listens_itself


def _listener(port: int) -> socket.socket:
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    return squatter


def test_a_chosen_port_taken_before_the_broker_binds_it_moves_the_broker_elsewhere(tmp_path):
    process = BrokerProcess(tmp_path / "data")
    taken = process.port
    with _listener(taken), process:
        assert process.port != taken
        assert listens_itself(process.pid, process.port)
        metadata = AdminClient({"bootstrap.servers": process.bootstrap}).list_topics(timeout=10)
        assert [b.port for b in metadata.brokers.values()] == [process.port]
    assert "address already in use" in process.log_path.read_text().lower()


def test_a_port_given_by_the_caller_and_taken_is_one_clear_error(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with _listener(port):
        process = BrokerProcess(tmp_path / "data", port=port)
        with pytest.raises(BrokerExited, match=f"cannot listen on 127.0.0.1:{port}"):
            process.start(timeout=30)
    assert process.port == port


def test_something_else_answering_on_the_port_is_not_our_broker(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with _listener(port):
        assert listens_itself(os.getpid(), port)
        process = BrokerProcess(tmp_path / "data")
        with process:
            assert listens_itself(process.pid, port) is False
