"""The Connect server launcher's command and errors, and the Connect client fix that
``register`` applies (``oncelog.spark.connect_server``, ``oncelog.spark.connect_client``);
both run for real in tests/spark_connect."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from oncelog.spark.connect_server import (SERVER_CLASS, ConnectServer,
                                          ConnectServerNotInstalled)


def test_the_server_command_binds_loopback_and_runs_the_connect_server_class(tmp_path):
    server = ConnectServer(tmp_path, port=15123, master="spark://10.0.0.1:7077",
                           config={"spark.sql.shuffle.partitions": "8"})
    command = server.command()
    assert command[0].endswith("/bin/spark-submit")
    assert command[command.index("--class") + 1] == SERVER_CLASS
    assert command[command.index("--master") + 1] == "spark://10.0.0.1:7077"
    settings = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    assert "spark.connect.grpc.binding.port=15123" in settings
    assert "spark.connect.grpc.binding.address=127.0.0.1" in settings
    assert "spark.sql.shuffle.partitions=8" in settings         # given config wins
    assert server.url == "sc://127.0.0.1:15123"


def test_a_missing_spark_installation_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    with pytest.raises(ConnectServerNotInstalled) as caught:
        ConnectServer(tmp_path).start()
    assert str(caught.value) == (f"the Spark Connect server cannot run: no bin/spark-submit "
                                 f"in {tmp_path}")
    assert not (tmp_path / "connect-server.log").exists()  # nothing started


class _Stream:
    """What the server sends on one command stream, in the shape the client decodes it to."""

    def __init__(self, responses):
        self.responses = responses

    def _execute_plan_request_with_metadata(self):
        return SimpleNamespace(plan=None)

    def _set_command_in_plan(self, plan, command):
        pass

    def _execute_and_fetch_as_iterator(self, request, observations):
        yield from self.responses


def test_command_streams_skip_metrics_and_still_refuse_anything_else(monkeypatch):
    """PySpark 4.3's client raised UNKNOWN_RESPONSE on the empty profiler accumulators every
    Python data source sends with command results (SPARK-59135): spark-pipelines died after
    its first flow. The fixed stream skips metrics only."""
    from pyspark.errors import PySparkValueError
    from pyspark.sql.connect.client.core import PlanObservedMetrics, SparkConnectClient
    from pyspark.sql.metrics import PlanMetrics

    from oncelog.spark.connect_client import (_raises_on_metrics,
                                              tolerate_metrics_in_command_streams)

    current = SparkConnectClient.execute_command_as_iterator
    original = getattr(current, "__wrapped__", current)  # a Connect test may have fixed it
    monkeypatch.setattr(SparkConnectClient, "execute_command_as_iterator", original)
    metrics = PlanObservedMetrics("__python_accumulator__", [], [])
    stream = _Stream([{"a": 1}, metrics, PlanMetrics("scan", 1, 0, []), {"b": 2}])
    if not _raises_on_metrics(original):
        pytest.skip("this PySpark's client skips metrics itself (SPARK-59135 is in)")
    with pytest.raises(PySparkValueError, match="UNKNOWN_RESPONSE"):
        list(original(stream, None))

    assert tolerate_metrics_in_command_streams() is True
    assert tolerate_metrics_in_command_streams() is False          # once per process
    patched = SparkConnectClient.execute_command_as_iterator
    assert list(patched(stream, None)) == [{"a": 1}, {"b": 2}]
    with pytest.raises(PySparkValueError, match="UNKNOWN_RESPONSE"):
        list(patched(_Stream([{"a": 1}, "something else"]), None))
