"""Spark Connect fixtures: one real Connect server (``oncelog.spark.connect_server``) for the
whole folder, started from the PySpark installation and stopped by process group, a plain
``SparkSession.builder.remote(...)`` client with the ``oncelog`` format registered, and a
broker. Topics and records come from ``tests/spark/conftest.py``'s helpers."""

from __future__ import annotations

import os

import pytest

from tests.broker_process import running_broker
from oncelog.spark.connect_server import ConnectServer


@pytest.fixture(scope="package")
def connect_broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("connect-broker")) as broker:
        yield broker


@pytest.fixture(scope="package")
def connect_server(tmp_path_factory):
    server = ConnectServer(tmp_path_factory.mktemp("connect-server"))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="package")
def connect_spark(connect_server):
    """A Spark Connect client session, as a user makes one: ``SparkSession.builder.remote``.

    That builder refuses while a classic session runs in the process (SESSION_ALREADY_EXIST),
    and the session-wide ``spark`` fixture of tests/spark keeps one when the whole suite runs;
    then the Connect session is built by the class the plain builder would hand it to. PySpark
    marks the process as "connect mode" (``SPARK_CONNECT_MODE_ENABLED``) for a Connect
    session; the mark is taken back at the end, for the classic session's sake."""
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    import oncelog.spark

    was_marked = "SPARK_CONNECT_MODE_ENABLED" in os.environ
    try:
        spark = SparkSession.builder.remote(connect_server.url).getOrCreate()
    except PySparkRuntimeError as error:
        if error.getCondition() != "SESSION_ALREADY_EXIST":
            raise
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
        spark = ConnectSession.builder.remote(connect_server.url).getOrCreate()
    try:
        oncelog.spark.register(spark)
        yield spark
    finally:
        try:
            spark.stop()
        finally:
            if not was_marked:
                os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
