"""A broker that cannot join a cluster says why in one sentence and exits; it never prints
a traceback."""

from __future__ import annotations

import time

import pytest

from oncelog.broker.process import BrokerProcess, free_port


def failed_start(process: BrokerProcess, timeout_s: float = 30.0) -> str:
    with pytest.raises(RuntimeError):
        process.start(timeout_s)
    process.kill()
    return process.log_path.read_text()


def test_a_second_broker_with_a_registered_node_id_refuses_to_start(cluster_factory, tmp_path):
    cluster = cluster_factory(1)
    twin = BrokerProcess(tmp_path / "twin", settings={
        "node.id": "1", "zookeeper.connect": cluster.zookeeper_connect})
    output = failed_start(twin)
    assert "node.id 1 is already registered by a live broker at " \
           f"{cluster.broker(1).bootstrap}" in output
    assert "Traceback" not in output
    assert cluster.is_running(1)


def test_zookeeper_unreachable_at_start_is_one_line_per_attempt_then_one_sentence(tmp_path):
    port = free_port()
    broker = BrokerProcess(tmp_path / "lonely", settings={
        "node.id": "1", "zookeeper.connect": f"127.0.0.1:{port}/oncelog",
        "zookeeper.connection.timeout.ms": "7000"})
    started = time.monotonic()
    output = failed_start(broker)
    assert time.monotonic() - started < 20
    retries = [line for line in output.splitlines() if "cannot reach ZooKeeper" in line]
    assert len(retries) >= 2
    assert output.strip().splitlines()[-1].startswith("oncelog: ")
    assert "Traceback" not in output
