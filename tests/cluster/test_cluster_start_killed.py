"""``kill -9`` of ``oncelog cluster start``: nothing of the cluster is left behind."""

from __future__ import annotations

import pytest

from .cluster_command import ClusterCommand, gone_within, oncelog


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_kill_9_of_cluster_start_takes_zookeeper_and_the_brokers_along(tmp_path):
    """``kill -9`` of ``oncelog cluster start`` left ZooKeeper and every broker running,
    adopted by init, holding their ports and data directories. Now each is started tied to
    the command (Linux's parent-death signal): they are gone within seconds, and the same
    command brings the same cluster back."""
    with ClusterCommand("--brokers", "2", "--port", "0", "--data-dir", "c",
                        cwd=tmp_path) as command:
        command.bootstrap()
        children = command.children()
        assert len(children) == 3, command.output  # ZooKeeper and 2 brokers
        command.process.kill()
        command.process.wait(10)
        assert gone_within(children, 5) == []
    with ClusterCommand("--brokers", "2", "--port", "0", "--data-dir", "c",
                        cwd=tmp_path) as again:
        bootstrap = again.bootstrap(timeout_s=180)
        status = oncelog("cluster", "status", "-b", bootstrap)
        assert status.returncode == 0 and "broker 2\t" in status.stdout, status.stdout
        assert again.interrupt() == 0, again.output
