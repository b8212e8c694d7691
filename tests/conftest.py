"""Shared fixtures: real broker processes, stopped by process id even when a test fails."""

from __future__ import annotations

import os

import pytest

# Tests drive brokers with kafka-python too. Loaded first through oncelog's codecs, it
# raises none of its 218 schema-loading DeprecationWarnings (protocol/messages.py silences
# exactly those, for users' runs), so a test module's own "import kafka" finds it loaded;
# the project's runs show every other warning, as a user's do (no filterwarnings here).
import oncelog.protocol.messages  # noqa: F401
from oncelog.broker.process import BrokerProcess

# pytester runs generated test files in a subprocess (tests/testing_kit: the pytest plugin)
pytest_plugins = ["pytester"]

# Every Spark driver a test starts (a local session, the copy job, `oncelog pipeline run`,
# Spark Connect) runs for a minute at most, and its JVM's start is most of its cost: 11-21 s
# of CPU with Java's default JIT, half that with the client compiler alone (C1) and the
# serial collector. On 2 cores shared by two test workers that CPU is wall time:
# tests/spark/test_driver_crash.py and test_pipeline.py under `-n 2` took 259 s instead of
# 350 s. SPARK_SUBMIT_OPTS reaches the driver's JVM through spark-submit without the
# "Picked up ..." line JAVA_TOOL_OPTIONS and JDK_JAVA_OPTIONS print on stderr (tests read
# stderr). Tests only: a user's long-running job wants the optimizing compiler.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.fixture
def broker_factory(tmp_path):
    """Start brokers with ``broker_factory(settings={...})``; every one is stopped afterwards."""
    started: list[BrokerProcess] = []

    def start(settings: dict[str, str] | None = None, name: str = "broker",
              **kwargs) -> BrokerProcess:
        process = BrokerProcess(tmp_path / name / "data", settings=settings,
                                log_path=tmp_path / name / "broker.log", **kwargs)
        started.append(process)
        return process.start()

    yield start
    for process in started:
        process.kill()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server (``tests/postgres_server.py``) for the session, stopped by pid."""
    from tests.postgres_server import PostgresServer

    with PostgresServer() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server) -> str:
    """The URL of a fresh, empty database on ``postgres_server``, dropped after the test."""
    url = postgres_server.create_database()
    yield url
    postgres_server.drop_database(url.rsplit("/", 1)[1])


@pytest.fixture(scope="session")
def spark():
    """One real local SparkSession for the whole run (a JVM takes seconds to start); tests
    keep their queries apart by topic names and checkpoint folders of their own."""
    from oncelog.spark.session import local_session
    session = local_session("oncelog-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """A real ZooKeeper (``tests/zookeeper_server.py``) for the session, stopped by pid."""
    from tests.zookeeper_server import start_zookeeper

    server = start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zookeeper_connect(zookeeper) -> str:
    """``zookeeper.connect`` with a fresh chroot, so tests never see each other's znodes."""
    from tests.zookeeper_server import fresh_chroot

    return zookeeper.connect_string + fresh_chroot()
