"""``oncelog cluster`` commands run exactly as docs/cluster.md shows them, from an empty folder,
with their default (relative) ``--data-dir``: a real ZooKeeper and real brokers, stopped by
Ctrl-C with nothing left behind."""

from __future__ import annotations

import socket

import pytest

from .cluster_command import ClusterCommand, gone_within, oncelog

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

DOCUMENTED_PORTS = (9092, 9093, 9094)


def taken(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def test_the_documented_cluster_start_runs_from_an_empty_folder(tmp_path):
    """``oncelog cluster start --brokers 3``, the first command of docs/cluster.md and of the
    README's cluster section, failed from every folder: ``ZooKeeper exited with status 2``,
    its log saying ``oncelog-cluster/zookeeper/zoo.cfg file is missing``. ZooKeeper runs
    inside its own folder and was handed paths relative to the caller's; every test passed
    an absolute ``--data-dir``, so none saw it. Now paths are made absolute where the user
    types them (and ZooKeeper's own are absolute anyway): the documented command, on the
    documented ports, starts the cluster in ``./oncelog-cluster`` and the next documented
    commands work against it."""
    busy = [port for port in DOCUMENTED_PORTS if taken(port)]
    if busy:
        pytest.skip(f"ports {busy} are in use here; the same start on free ports is "
                    f"test_cluster_start_on_free_ports_with_a_relative_data_dir")
    with ClusterCommand("--brokers", "3", cwd=tmp_path) as command:
        try:
            bootstrap = command.bootstrap()
        except AssertionError:
            if "address already in use" in command.output:
                pytest.skip("a documented port was taken between the check and the start")
            raise
        assert bootstrap == "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
        status = oncelog("cluster", "status", "-b", "127.0.0.1:9092,127.0.0.1:9093",
                         cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        assert all(f"broker {n}\t127.0.0.1:{9091 + n}" in status.stdout for n in (1, 2, 3))
        created = oncelog("topics", "create", "orders", "-p", "6", "-r", "3", "--config",
                          "min.insync.replicas=2", cwd=tmp_path)
        assert created.returncode == 0, created.stderr
        described = oncelog("topics", "describe", "orders", cwd=tmp_path)
        assert described.returncode == 0, described.stderr
        children = command.children()
        assert len(children) == 4, command.output  # ZooKeeper and 3 brokers
        assert command.interrupt() == 0, command.output
        assert gone_within(children, 10) == []
    for folder in ("zookeeper/data", "broker-1/data", "broker-2/data", "broker-3/data"):
        assert (tmp_path / "oncelog-cluster" / folder).is_dir(), folder
    assert "Traceback" not in command.output


def test_cluster_start_on_free_ports_with_a_relative_data_dir(tmp_path):
    """The same bug with any relative ``--data-dir`` (``--port 0``: free ports, so this runs
    whatever else listens on 9092): the cluster starts in the folder named relative to where
    the command runs, and says where with an absolute path."""
    with ClusterCommand("--brokers", "2", "--port", "0", "--data-dir", "runs/c", "--set",
                        "min.insync.replicas=2", cwd=tmp_path) as command:
        bootstrap = command.bootstrap()
        assert f"in {tmp_path / 'runs' / 'c'} ..." in command.output
        status = oncelog("cluster", "status", "-b", bootstrap, cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        assert "broker 1\t" in status.stdout and "broker 2\t" in status.stdout
        children = command.children()
        assert command.interrupt() == 0, command.output
        assert gone_within(children, 10) == []
    assert (tmp_path / "runs" / "c" / "zookeeper" / "zoo.cfg").is_file()
    assert (tmp_path / "runs" / "c" / "broker-2" / "broker.log").is_file()


def test_acks_table_with_a_relative_data_dir_starts_its_cluster(tmp_path):
    """``oncelog cluster acks-table`` (default ``--data-dir acks-table-out``) starts a cluster
    the same way and failed the same way; it now gets as far as its first row (then Ctrl-C
    stops it, with its whole cluster)."""
    import re
    import signal
    import subprocess
    import sys

    from oncelog.cluster.isolation import remove_isolated_networks
    from tests.fault.verify_run import interruptible
    from tests.process_tree import descendants, kill_tree

    # SIGINT back to its default in the child: a suite started in the background inherits it
    # ignored, and the table would never see the Ctrl-C
    command = subprocess.Popen([sys.executable, "-m", "oncelog", "cluster", "acks-table",
                                "--cycles", "1"], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible)
    lines: list[str] = []
    try:
        for line in command.stdout:
            lines.append(line)
            if re.search(r"cluster up: ", line):
                break
        else:
            raise AssertionError("acks-table never said its cluster was up:\n" + "".join(lines))
        children = descendants(command.pid)
        assert len(children) >= 4, children  # ZooKeeper and 3 brokers
        command.send_signal(signal.SIGINT)
        command.wait(90)
        assert gone_within(children, 10) == []
    finally:
        if command.poll() is None:
            kill_tree(command)
        named = re.search(r"named (\w+)-\*", "".join(lines))
        if named is not None:  # as root, its cluster ran in network namespaces: none left
            assert remove_isolated_networks(named.group(1)) == [], "".join(lines)
    assert (tmp_path / "acks-table-out" / "cluster" / "zookeeper" / "zoo.cfg").is_file()
