"""Spark Connect fixtures: one real Connect server (``oncelog.spark.connect_server``) for the
whole folder, started from the PySpark installation and stopped by process group, a plain
``SparkSession.builder.remote(...)`` client with the ``oncelog`` format registered, and a
broker. Topics and records come from ``tests/spark/conftest.py``'s helpers."""

from __future__ import annotations

import os

import pytest

from oncelog.broker.process import BrokerProcess
from oncelog.spark.connect_server import ConnectServer


@pytest.fixture(scope="package")
def connect_broker(tmp_path_factory):
    folder = tmp_path_factory.mktemp("connect-broker")
    process = BrokerProcess(folder / "data", log_path=folder / "broker.log")
    try:
        yield process.start()
    finally:
        process.kill()


@pytest.fixture(scope="package")
def connect_server(tmp_path_factory):
    server = ConnectServer(tmp_path_factory.mktemp("connect-server"))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="package")
def connect_spark(connect_server):
    """A Spark Connect client session. PySpark marks the whole process as "connect mode"
    (``SPARK_CONNECT_MODE_ENABLED``) when it creates one; the mark is taken back at the end so
    that tests after these, in the same run, get the classic session they ask for."""
    from pyspark.sql import SparkSession

    import oncelog.spark

    was_marked = "SPARK_CONNECT_MODE_ENABLED" in os.environ
    spark = SparkSession.builder.remote(connect_server.url).getOrCreate()
    try:
        oncelog.spark.register(spark)
        yield spark
    finally:
        try:
            spark.stop()
        finally:
            if not was_marked:
                os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
