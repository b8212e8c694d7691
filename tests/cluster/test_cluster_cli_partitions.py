"""``oncelog cluster start --isolated``, ``oncelog cluster partition ...`` and ``oncelog cluster
heal`` as a user runs them (issue 31): from a temporary folder, with real processes in real
network namespaces. ``cluster start`` owns the network - its nftables rules and delay relays
live in that process - so the other commands ask it through request files, like
``restart-broker``. Every process is killed by pid and every namespace of the cluster removed
by its prefix afterwards, even when a test fails.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from oncelog.cluster.isolation import missing_prerequisites, remove_isolated_networks

from .cluster_command import ClusterCommand, gone_within, oncelog

needs_namespaces = pytest.mark.skipif(
    bool(missing_prerequisites()), reason="network namespaces need root, ip and nft: "
    + ", ".join(missing_prerequisites()))


def _namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


class IsolatedCommand(ClusterCommand):
    """``cluster start --isolated``, whose namespaces are removed by prefix on close."""

    def prefix(self) -> str:
        return re.match(r"network (\w+):", self.wait_for_line(r"^network \w+: "))[1]

    def close(self) -> None:
        super().close()
        found = re.search(r"^network (\w+):", self.output, re.MULTILINE)
        if found:  # a SIGKILLed cluster start could not destroy its network
            remove_isolated_networks(found[1])


@pytest.fixture
def isolated_cluster(tmp_path) -> Iterator[IsolatedCommand]:
    with IsolatedCommand("--isolated", "--brokers", "3", "--data-dir", "c",
                         "--set", "zookeeper.session.timeout.ms=3000",
                         "--set", "replica.lag.time.max.ms=3000", cwd=tmp_path) as command:
        yield command


def _one_line_failure(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0, result.stdout
    assert result.stdout == "" and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("oncelog: "), result.stderr
    return lines[0]


@needs_namespaces
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_partition_a_running_cluster_from_the_command_line(isolated_cluster, tmp_path):
    """Broker 2 is isolated with ``cluster partition isolate 2`` while an ``acks=all``
    producer keeps writing: its records are acknowledged by the other two brokers (a new
    leader, the ISR shrunk to them). ``partition list``, run from another folder with the
    absolute ``--data-dir``, shows the fault; ``cluster heal`` removes it; ``cluster stop``
    stops the cluster and leaves no namespace."""
    command = isolated_cluster
    bootstrap = command.bootstrap()
    prefix = command.prefix()
    data_dir = tmp_path / "c"
    nodes = command.wait_for_line(r"^nodes: ")
    assert re.fullmatch(r"nodes: zookeeper-1 (\S+), broker-1 (\S+), broker-2 (\S+), "
                        r"broker-3 (\S+)\n", nodes), nodes
    assert all(not host.startswith("127.") for host in re.findall(r"(\d+\.\S+)", nodes))
    assert (f"{prefix}-broker-2" in _namespaces())
    created = oncelog("topics", "create", "orders", "-p", "1", "-r", "3", "--config",
                      "min.insync.replicas=2", "-b", bootstrap)
    assert created.returncode == 0, created.stderr

    acknowledged: list[int] = []
    failed: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                             "enable.idempotence": True, "request.timeout.ms": 5000,
                             "socket.timeout.ms": 5000,
                             "topic.metadata.refresh.interval.ms": 1000})
        n = 0
        while not stop.is_set():
            producer.produce("orders", b"%d" % n, on_delivery=lambda error, message: (
                failed.append(str(error)) if error else
                acknowledged.append(int(message.value()))))
            producer.poll(0.05)
            n += 1
        producer.flush(60)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        deadline = time.monotonic() + 30
        while len(acknowledged) < 20:
            assert time.monotonic() < deadline, failed
            time.sleep(0.1)
        isolated = oncelog("cluster", "partition", "isolate", "2", "--data-dir", "c",
                           cwd=tmp_path)
        assert isolated.returncode == 0, isolated.stderr
        assert isolated.stdout == "isolate broker-2\n"
        isolated_at = len(acknowledged)
        listed = oncelog("cluster", "partition", "list", "--data-dir", str(data_dir), cwd=Path("/"))
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout == "isolate broker-2\n"
        command.wait_for_line(r"^network fault: isolate broker-2 ")

        started = time.monotonic()
        while len(acknowledged) < isolated_at + 50:  # acknowledged by brokers 1 and 3 alone
            assert time.monotonic() - started < 60, (len(acknowledged) - isolated_at, failed)
            time.sleep(0.1)
        print(f"50 acks=all records acknowledged {time.monotonic() - started:.1f} s after "
              f"broker 2 was isolated")
    finally:
        stop.set()
        producer.join(90)
    assert failed == []

    healed = oncelog("cluster", "heal", "--data-dir", "c", cwd=tmp_path)
    assert healed.returncode == 0, healed.stderr
    assert healed.stdout == "healed: isolate broker-2\n"
    listed = oncelog("cluster", "partition", "list", "--data-dir", "c", cwd=tmp_path)
    assert listed.stdout == "no faults: every node reaches every other\n"

    led = oncelog("cluster", "partition", "leader-from-zookeeper", "orders", "0",
                  "--data-dir", "c", cwd=tmp_path)
    assert led.returncode == 0, led.stderr
    assert re.fullmatch(r"orders-0 is led by broker (\d): cut broker-\1 from \{zookeeper-1\}\n",
                        led.stdout), led.stdout

    children = command.children()
    stopped = oncelog("cluster", "stop", "--data-dir", "c", cwd=tmp_path, timeout=150)
    assert stopped.returncode == 0, stopped.stderr
    assert gone_within(children, 10) == []
    assert f"{prefix}-" not in _namespaces()
    assert "Traceback" not in command.output


@needs_namespaces
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bad_partition_requests_are_one_line_and_the_cluster_keeps_running(
        isolated_cluster, tmp_path):
    """An unknown node, a split with a node on both sides (``1`` and ``broker-1`` are one
    node), a cut of a node to itself, slow without a delay or a loss: one line each and a
    non-zero exit; nothing is applied and the cluster keeps running."""
    command = isolated_cluster
    command.bootstrap()

    def partition(*args: str) -> subprocess.CompletedProcess:
        return oncelog("cluster", "partition", *args, "--data-dir", "c", cwd=tmp_path)

    assert _one_line_failure(partition("isolate", "7")) == (
        "oncelog: this cluster has no node 7 (its nodes: zookeeper-1, broker-1, broker-2, "
        "broker-3; a number is a broker id)")
    assert _one_line_failure(partition("isolate", "zookeeper-4")).startswith(
        "oncelog: this cluster has no node zookeeper-4 ")
    assert _one_line_failure(partition("split", "1,2", "3,broker-1")) == (
        "oncelog: broker-1 on both sides of the split: name each node on one side only")
    assert _one_line_failure(partition("cut", "2", "broker-2")) == (
        "oncelog: broker-2 to itself: name two different nodes")
    assert "--delay-ms or --loss-percent" in _one_line_failure(partition("slow", "1"))
    assert command.process.poll() is None
    assert partition("list").stdout == "no faults: every node reaches every other\n"

    slowed = partition("slow", "1", "3", "--delay-ms", "20", "--loss-percent", "1")
    assert slowed.stdout == "slow broker-1 <-> broker-3: 20±0 ms, 1% loss\n", slowed.stderr
    split = partition("split", "1,zookeeper-1", "broker-2,3")
    assert split.stdout == "split {broker-1, zookeeper-1} | {broker-2, broker-3}\n"
    state = (tmp_path / "c" / "cluster.json").read_text()
    assert '"split {broker-1, zookeeper-1} | {broker-2, broker-3}"' in state
    healed = oncelog("cluster", "heal", "--data-dir", "c", cwd=tmp_path)
    assert healed.stdout.splitlines() == [
        "healed: slow broker-1 <-> broker-3: 20±0 ms, 1% loss",
        "healed: split {broker-1, zookeeper-1} | {broker-2, broker-3}"]
    assert command.process.poll() is None


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_partition_of_a_cluster_not_started_isolated_is_one_line(tmp_path):
    """A cluster on loopback has no network to partition: one line saying so, the cluster
    keeps running."""
    with ClusterCommand("--brokers", "1", "--port", "0", "--data-dir", "c",
                        cwd=tmp_path) as command:
        command.bootstrap()
        for args in (("partition", "isolate", "1"), ("partition", "list"), ("heal",),
                     ("partition", "leader-from-zookeeper", "orders")):
            result = oncelog("cluster", *args, "--data-dir", "c", cwd=tmp_path)
            assert _one_line_failure(result) == (
                "oncelog: this cluster was not started with --isolated"), args
        assert command.process.poll() is None
        assert command.interrupt() == 0, command.output


def test_partition_without_a_running_cluster_is_one_line(tmp_path):
    result = oncelog("cluster", "partition", "isolate", "1", "--data-dir", "c", cwd=tmp_path)
    assert _one_line_failure(result) == (
        f"oncelog: no cluster was started in {tmp_path / 'c'} (no cluster.json); start one "
        f"with: oncelog cluster start --isolated --data-dir {tmp_path / 'c'}")


def test_isolated_start_without_ip_and_nft_says_so_and_makes_nothing(tmp_path):
    """Without the ``ip`` and ``nft`` commands (an empty PATH here): one line naming what is
    missing, exit 1 as for a missing ZooKeeper, and nothing made - not even the folder."""
    import os
    empty = tmp_path / "bin"
    empty.mkdir()
    result = oncelog("cluster", "start", "--isolated", "--data-dir", "c", cwd=tmp_path,
                     env={**os.environ, "PATH": str(empty)})
    line = _one_line_failure(result)
    assert result.returncode == 1
    assert line.startswith("oncelog: network partitions need ") and "nft" in line, line
    assert not (tmp_path / "c").exists()


@needs_namespaces
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_killed_isolated_cluster_start_leaves_a_network_the_next_start_removes(tmp_path):
    """``kill -9`` of ``cluster start --isolated`` takes its processes along (parent-death
    signal), not its namespaces, bridge and rules: nothing in the killed process can remove
    them. The next ``cluster start`` in the folder finds their prefix in ``cluster.json``
    and removes them before it starts."""
    import os
    import signal
    with IsolatedCommand("--isolated", "--brokers", "1", "--data-dir", "c",
                         cwd=tmp_path) as first:
        first.bootstrap()
        prefix = first.prefix()
        children = first.children()
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.wait(10)
        assert gone_within(children, 20) == []
        assert f"{prefix}-broker-1" in _namespaces()
        with IsolatedCommand("--isolated", "--brokers", "1", "--data-dir", "c",
                             cwd=tmp_path) as second:
            removed = second.wait_for_line(r"^removed the network ")
            assert removed.strip().endswith(f"named {prefix}*"), removed
            second.bootstrap()
            assert f"{prefix}-" not in _namespaces()
            assert second.prefix() != prefix
            assert second.interrupt() == 0, second.output
