"""``ZOOKEEPER_HOME``: ZooKeeper from a distribution folder laid out like Apache's release
tarball (``lib/*.jar``, ``conf/``), not only from Debian's paths. The folder here is built
from Debian's jars (symlinks), since no other ZooKeeper is installed on the test machines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oncelog.cluster import zookeeper_process
from oncelog.cluster.zookeeper_process import ZooKeeperNotInstalled, find_classpath

from .cluster_command import ClusterCommand, gone_within, oncelog


@pytest.fixture
def zookeeper_home(tmp_path, monkeypatch) -> Path:
    """``apache-zookeeper-3.8.0-bin/`` with ``lib/`` holding Debian's jars under Apache's
    versioned names, and a ``conf/`` folder."""
    monkeypatch.delenv("ZOOKEEPER_HOME", raising=False)
    debian = [Path(jar).resolve() for jar in find_classpath()]
    home = tmp_path / "apache-zookeeper-3.8.0-bin"
    (home / "lib").mkdir(parents=True)
    (home / "conf").mkdir()
    (home / "conf" / "zoo_sample.cfg").write_text("tickTime=2000\n")
    for jar in debian:
        (home / "lib" / f"{jar.stem}-3.8.0.jar").symlink_to(jar)
    return home


@pytest.mark.slow
def test_cluster_start_runs_zookeeper_from_zookeeper_home(tmp_path, zookeeper_home):
    """ZooKeeper was looked for at Debian's paths only, so a user with Apache's tarball
    (or any other install) could not start a cluster. Now ``ZOOKEEPER_HOME`` is used when
    set: the ZooKeeper that ``cluster start`` runs has that folder's ``lib/`` jars on its
    classpath, and the cluster works."""
    env = {**os.environ, "ZOOKEEPER_HOME": str(zookeeper_home)}
    with ClusterCommand("--brokers", "1", "--port", "0", "--data-dir", "c", cwd=tmp_path,
                        env=env) as command:
        bootstrap = command.bootstrap()
        line = command.wait_for_line(r"^zookeeper\.connect=")
        zookeeper_pid = int(line.split("(pid ")[1].split(",")[0])
        java = Path(f"/proc/{zookeeper_pid}/cmdline").read_bytes().split(b"\0")
        classpath = java[java.index(b"-cp") + 1].decode()
        assert str(zookeeper_home / "lib" / "zookeeper-3.8.0.jar") in classpath.split(":")
        assert classpath.split(":")[0] == str(zookeeper_home / "conf")
        assert "/usr/share/java" not in classpath
        status = oncelog("cluster", "status", "-b", bootstrap)
        assert status.returncode == 0, status.stderr
        children = command.children()
        assert command.interrupt() == 0, command.output
        assert gone_within(children, 10) == []


def test_a_wrong_zookeeper_home_is_one_line_naming_it(tmp_path):
    """A ``ZOOKEEPER_HOME`` that holds no ZooKeeper is said as such, in one line naming the
    folder, before anything starts - not a fallback to other jars, not a Java error."""
    wrong = tmp_path / "not-zookeeper"
    (wrong / "lib").mkdir(parents=True)
    (wrong / "lib" / "zookeeper-jute-3.8.0.jar").write_bytes(b"")
    result = oncelog("cluster", "start", "--brokers", "1", "--port", "0", "--data-dir",
                     str(tmp_path / "c"), env={**os.environ, "ZOOKEEPER_HOME": str(wrong)})
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"oncelog: ZOOKEEPER_HOME={wrong} is not a ZooKeeper distribution: no "
        f"zookeeper-*.jar in {wrong / 'lib'} (Apache's release tarball, "
        f"apache-zookeeper-X.Y.Z-bin, has one)"]
    assert not (tmp_path / "c" / "zookeeper" / "zookeeper.log").exists()


def test_zookeeper_not_installed_names_zookeeper_home(tmp_path, monkeypatch):
    """Without Debian's jars the sentence says both ways out: make setup, or ZOOKEEPER_HOME."""
    monkeypatch.delenv("ZOOKEEPER_HOME", raising=False)
    monkeypatch.setattr(zookeeper_process, "JAR_DIRECTORIES", (tmp_path,))
    with pytest.raises(ZooKeeperNotInstalled, match=r"run make setup, or set ZOOKEEPER_HOME "
                                                     r"to an Apache ZooKeeper release folder"):
        find_classpath()
