"""Paths the user types into ``oncelog`` commands, relative to the folder they run it from:
each command makes them absolute at the command line, so a child process in another folder
(ZooKeeper, a Spark executor) reads the same file, and messages name the real place."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from confluent_kafka.admin import AdminClient

from oncelog.broker.process import free_port
from oncelog.cli.common import absolute_sqlite_url

ONCELOG = [sys.executable, "-m", "oncelog"]


def test_broker_takes_a_relative_data_dir_and_config_file(tmp_path):
    """``oncelog broker --data-dir data --config server.properties`` from the folder holding
    them: the config is read, the data lands in ``./data``."""
    (tmp_path / "server.properties").write_text("num.partitions=4\n")
    port = free_port()
    broker = subprocess.Popen([*ONCELOG, "broker", "--listen", f"127.0.0.1:{port}",
                               "--data-dir", "data", "--config", "server.properties"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        deadline = time.monotonic() + 30
        while True:
            try:
                admin.list_topics(timeout=1)
                break
            except Exception:
                assert broker.poll() is None and time.monotonic() < deadline, \
                    broker.stdout.read() if broker.poll() is not None else "no answer"
        created = subprocess.run([*ONCELOG, "topics", "create", "paths", "-b",
                                  f"127.0.0.1:{port}"], capture_output=True, text=True,
                                 timeout=60)
        assert created.returncode == 0, created.stderr
        topic = admin.list_topics(topic="paths", timeout=10).topics["paths"]
        assert len(topic.partitions) == 4  # from the relative --config file
        assert (tmp_path / "data" / ".lock").exists()
        assert sorted(p.name for p in (tmp_path / "data").glob("paths-*")) == [
            f"paths-{n}" for n in range(4)]
    finally:
        broker.send_signal(signal.SIGTERM)
        output, _ = broker.communicate(timeout=30)
    assert broker.returncode == 0, output
    assert "Traceback" not in output


def test_relative_sqlite_urls_are_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert absolute_sqlite_url("sqlite:///out/sink.db") == f"sqlite:///{tmp_path}/out/sink.db"
    assert absolute_sqlite_url("sqlite:////srv/sink.db") == "sqlite:////srv/sink.db"
    assert absolute_sqlite_url("postgresql://u@h:5432/db") == "postgresql://u@h:5432/db"
    assert absolute_sqlite_url(None) is None
