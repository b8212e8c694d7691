"""Apache Kafka in the test kit (issue 32): a real Apache Kafka (KRaft JVMs from the pinned
jars in the per-user cache) started by ``oncelog.testing.apache_kafka``, and a user's tests
run against it and oncelog's broker through ``oncelog_any_broker``.

docs/testing.md's "Against Apache Kafka" recipe runs from the document as a user's test
file (pytester, in a subprocess, with the plugin), next to a file that records the pids of
the JVMs its Kafka ran as, so the outer test checks none is left. The 3-node Kafka runs in
this process. The missing-Java and missing-Maven messages go through the real code path: a
``JAVA_HOME`` without ``bin/java``; an empty cache with a ``PATH`` that has java but no mvn.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import ConfigResource, NewTopic

from oncelog.testing import (ApacheKafka, KafkaUnavailable, apache_kafka,
                             assert_delivered)
from oncelog.testing.apache_kafka import KAFKA_VERSION, cache_root, java_command, kafka_jars

from .conftest import pid_alive, plugin_args

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"

PIDS_FILE = '''
import os


def test_record_the_jvm(oncelog_any_broker, oncelog_broker_kind):
    if oncelog_broker_kind == "apache-kafka":
        with open(os.environ["KAFKA_PIDS_FILE"], "a") as pids:
            pids.write(" ".join(map(str, oncelog_any_broker.pids())) + "\\n")
        assert "INFO" in oncelog_any_broker.log_path.read_text()  # log4j2 writes there
'''


def process_state(pid: int | None) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ", 1)[1][0]


def section_recipe() -> str:
    section = DOC.read_text().split("\n## Against Apache Kafka\n", 1)[1].split("\n## ", 1)[0]
    blocks = [block for block in re.findall(r"```python\n(.*?)```", section, flags=re.S)
              if "def test_" in block]
    assert len(blocks) == 1, "docs/testing.md's Apache Kafka section lost its recipe"
    return blocks[0]


@pytest.mark.slow
def test_docs_recipe_runs_against_both_brokers_and_leaves_no_jvm(pytester, tmp_path,
                                                                  monkeypatch):
    pids_file = tmp_path / "pids"
    monkeypatch.setenv("KAFKA_PIDS_FILE", str(pids_file))
    pytester.makepyfile(test_recipe=section_recipe(), test_pids=PIDS_FILE)
    result = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", "-v",
                                           timeout=300)
    result.assert_outcomes(passed=8)
    for name in ("test_every_order_is_consumed_once",
                 "test_a_producer_retries_past_not_leader",
                 "test_without_retries_the_error_reaches_the_application"):
        result.stdout.fnmatch_lines([f"*{name}?oncelog? PASSED*",
                                     f"*{name}?apache-kafka? PASSED*"])
    pids = [int(pid) for pid in pids_file.read_text().split()]
    assert pids, "the Apache Kafka test recorded no pid"
    assert not [pid for pid in pids if pid_alive(pid)], "a Kafka JVM outlived the session"
    assert "KafkaRaftServer" not in result.stdout.str() + result.stderr.str()  # logs in a file


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_three_kafka_brokers_replicate_with_rf3():
    with apache_kafka(brokers=3) as kafka:
        pids = kafka.pids()
        assert len(pids) == 3 and all(pid_alive(pid) for pid in pids)
        topic = kafka.topic("orders", partitions=2)
        described = kafka.admin().list_topics(topic, timeout=10).topics[topic]
        for partition in described.partitions.values():
            assert sorted(partition.replicas) == [1, 2, 3]
            assert sorted(partition.isrs) == [1, 2, 3]

        # default.replication.factor: a topic created without one gets 3 replicas
        name = f"defaults-{os.getpid()}"
        kafka.admin().create_topics([NewTopic(name, 1)])[name].result(30)
        deadline, replicas = time.monotonic() + 30, ([], [])
        while sorted(replicas[1]) != [1, 2, 3] and time.monotonic() < deadline:
            time.sleep(0.2)  # until the new topic's metadata has reached the brokers
            partition = kafka.admin().list_topics(name, timeout=10).topics[name].partitions.get(0)
            if partition is not None:
                replicas = (partition.replicas, partition.isrs)
        assert [sorted(replicas[0]), sorted(replicas[1])] == [[1, 2, 3], [1, 2, 3]]

        # the internal topics' settings, as every broker reports them
        resource = ConfigResource(ConfigResource.Type.BROKER, "2")
        configs = kafka.admin().describe_configs([resource])[resource].result(30)
        expected = {"offsets.topic.replication.factor": "3",
                    "transaction.state.log.replication.factor": "3",
                    "transaction.state.log.min.isr": "2", "min.insync.replicas": "2"}
        found = {key: configs[key].value for key in expected}
        assert found == expected

        # clients behind the proxies: a fault armed once reaches whichever broker leads
        fault = kafka.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER", topic=topic)
        ids = [f"order-{n}" for n in range(60)]
        producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all",
                             "enable.idempotence": True, "log_level": 0})
        for id in ids:
            producer.produce(topic, id.encode())
        assert producer.flush(60) == 0
        assert fault.applied == 1
        assert_delivered(ids, kafka.read_all(topic), semantics="exactly-once")
        directory = kafka.directory
    assert not [pid for pid in pids if pid_alive(pid)]
    assert not directory.exists()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_paused_then_killed_kafka_broker_restarts_with_its_records():
    with apache_kafka() as kafka:
        topic = kafka.topic("kept")
        producer = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all",
                             "log_level": 0})
        producer.produce(topic, b"before")
        assert producer.flush(30) == 0

        # paused: nothing answers, so a short delivery timeout expires; resumed: it serves
        kafka.pause()
        deadline = time.monotonic() + 5
        while process_state(kafka.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.05)  # every thread of the JVM stops, the main one among them
        assert process_state(kafka.pid) == "T"
        errors: list = []
        hurried = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all",
                            "message.timeout.ms": 1500, "log_level": 0})
        hurried.produce(topic, b"lost", on_delivery=lambda error, _: errors.append(error))
        hurried.flush(10)
        assert [error.code() for error in errors] == [KafkaError._MSG_TIMED_OUT]
        kafka.resume()
        first = kafka.pid
        kafka.kill()
        assert first is not None and not pid_alive(first)
        kafka.restart()
        assert kafka.pid != first and kafka.is_running()
        assert [record.value for record in kafka.read_all(topic)] == [b"before"]


def test_without_java_the_fixture_fails_with_one_line(pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    pytester.makepyfile(test_user="""
def test_needs_kafka(oncelog_apache_kafka):
    pass
""")
    result = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", "-q",
                                           timeout=60)
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    lines = [line for line in output.splitlines() if "Apache Kafka needs" in line]
    assert lines and lines[0].strip().startswith(
        "oncelog: Apache Kafka needs Java 17+ and Maven"), output
    assert "no-jdk has no bin/java" in lines[0]
    assert "Traceback" not in output and "subprocess" not in output


def test_without_maven_an_empty_cache_says_so(tmp_path, monkeypatch):
    """Java there, Maven not, nothing cached: ``start()`` raises ``KafkaUnavailable`` naming
    mvn, and leaves neither a JVM nor a folder behind; the fetch command prints the line."""
    only_java = tmp_path / "bin"
    only_java.mkdir()
    (only_java / "java").symlink_to(java_command())
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(only_java))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    kafka = ApacheKafka()
    with pytest.raises(KafkaUnavailable, match=r"^oncelog: Apache Kafka needs Java 17\+ and "
                                               r"Maven .*`mvn` is not on PATH"):
        kafka.start()
    assert not kafka.directory.exists() and not kafka.pids()
    root = tmp_path / "cache" / "oncelog" / "apache-kafka"
    assert [path.name for path in root.iterdir()] == [f"{KAFKA_VERSION}.lock"]  # nothing half

    completed = subprocess.run([sys.executable, "-m", "oncelog.testing.fetch_apache_kafka"],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 1
    assert completed.stderr.count("\n") == 1 and "`mvn` is not on PATH" in completed.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_workers_fetching_at_once_fetch_once(tmp_path, monkeypatch):
    """Two processes fetch into an empty cache at the same moment (as two xdist workers
    would): both get the jars; Maven ran once (one mvn.log); no staging folder is left."""
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    fetches = [subprocess.Popen([sys.executable, "-m", "oncelog.testing.fetch_apache_kafka"],
                                env=environment, stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    outputs = [fetch.communicate(timeout=240)[0] for fetch in fetches]
    assert [fetch.returncode for fetch in fetches] == [0, 0], outputs
    root = tmp_path / "oncelog" / "apache-kafka"
    assert sorted(path.name for path in root.iterdir()) == [KAFKA_VERSION,
                                                            f"{KAFKA_VERSION}.lock"]
    assert len(list(root.rglob("mvn.log"))) == 1
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_root() == root
    jars = [jar.name for jar in kafka_jars()]
    assert f"kafka_2.13-{KAFKA_VERSION}.jar" in jars and "log4j-slf4j-impl-2.24.3.jar" in jars


def test_a_conftest_chooses_the_brokers(run_user_tests, pytester):
    """docs/testing.md's override: ``oncelog_broker_kind`` with ``params=["oncelog"]`` in a
    user's conftest.py runs ``oncelog_any_broker`` tests on oncelog's broker only."""
    section = DOC.read_text().split("\n## Against Apache Kafka\n", 1)[1].split("\n## ", 1)[0]
    override = next(block for block in re.findall(r"```python\n(.*?)```", section, flags=re.S)
                    if "def oncelog_broker_kind" in block)
    pytester.makeconftest(override)
    result = run_user_tests("""
def test_which(oncelog_any_broker, oncelog_broker_kind):
    assert oncelog_broker_kind == "oncelog"
    assert oncelog_any_broker.topic("chosen")
""", "-vv")  # after run_user_tests' -q
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_which?oncelog? PASSED*"])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_port_taken_before_kafka_binds_it_means_new_ports(monkeypatch):
    """``free_port()`` finds a port free; another process may take it before the JVM binds it
    (another test worker). Here one is held on purpose: node 1's first port. Kafka fails to
    bind, and the kit starts again on new ports instead of failing the test."""
    import socket

    module = sys.modules["oncelog.testing.apache_kafka"]  # the package's name is the function
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    ports = iter([held.getsockname()[1]])
    real_free_port = module.free_port
    monkeypatch.setattr(module, "free_port", lambda: next(ports, None) or real_free_port())
    try:
        with apache_kafka() as kafka:
            assert kafka.nodes[1].port != held.getsockname()[1]
            assert kafka.topic("rebound")
    finally:
        held.close()
