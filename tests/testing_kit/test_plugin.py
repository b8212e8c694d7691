"""The pytest plugin, as a user meets it: generated test files run by pytester in a
subprocess, every fixture and fault control observed from a real confluent-kafka client."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from .conftest import PLUGIN_MODULE, pid_alive

ROOT = Path(__file__).resolve().parents[2]

CLIENT_HELPERS = '''
import os, time
import pytest
from confluent_kafka import Producer, KafkaError

def produce(bootstrap, topic, values, **config):
    """Send values, return the delivery error (or None) of each."""
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 0,
                         **config})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda error, _: errors.append(error))
        producer.flush(30)
    return errors

def values(broker, topic):
    return [record.value for record in broker.read_all(topic)]
'''

FIXTURES = CLIENT_HELPERS + '''
PIDS = []

def test_broker_topic_and_group(oncelog_broker, oncelog_topic, oncelog_group):
    topic = oncelog_topic(partitions=3)
    assert topic.startswith("test_broker_topic_and_group-")
    assert oncelog_topic() != topic
    assert oncelog_group("g") != oncelog_group("g")
    assert produce(oncelog_broker.bootstrap, topic, [b"a", b"b"]) == [None, None]
    assert sorted(values(oncelog_broker, topic)) == [b"a", b"b"]
    PIDS.append(oncelog_broker.pid)

def test_the_broker_is_shared_by_the_session(oncelog_broker, oncelog_topic):
    assert PIDS == [oncelog_broker.pid]
    assert values(oncelog_broker, oncelog_topic()) == []

def test_kill_and_restart_keep_acknowledged_records(oncelog_broker, oncelog_topic):
    topic = oncelog_topic()
    assert produce(oncelog_broker.bootstrap, topic, [b"kept"], acks="all") == [None]
    old_pid = oncelog_broker.pid
    oncelog_broker.kill()
    assert not oncelog_broker.is_running()
    oncelog_broker.restart()
    assert oncelog_broker.pid != old_pid
    assert values(oncelog_broker, topic) == [b"kept"]
    oncelog_broker.kill()  # left killed: the next test must still get a running broker

def test_a_killed_broker_is_back_for_the_next_test(oncelog_broker, oncelog_topic):
    assert oncelog_broker.is_running()
    assert produce(oncelog_broker.bootstrap, oncelog_topic(), [b"x"]) == [None]

def test_pause_holds_requests_until_resume(oncelog_broker, oncelog_topic):
    topic = oncelog_topic()
    oncelog_broker.pause()
    errors = produce(oncelog_broker.bootstrap, topic, [b"late"], **{"message.timeout.ms": 1500})
    assert errors[0].code() == KafkaError._MSG_TIMED_OUT
    oncelog_broker.resume()
    assert produce(oncelog_broker.bootstrap, topic, [b"on time"]) == [None]
'''

WIRE_FAULTS = CLIENT_HELPERS + '''
from oncelog.testing import UnknownName

def test_fail_next_error_code_is_seen(oncelog_broker, oncelog_topic):
    topic = oncelog_topic()
    fault = oncelog_broker.fail_next("Produce", "NOT_ENOUGH_REPLICAS", count=1)
    errors = produce(oncelog_broker.bootstrap, topic, [b"a", b"b"], retries=0)
    assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS and errors[1] is None
    assert fault.applied == 1
    assert values(oncelog_broker, topic) == [b"b"]  # never forwarded: the broker has only b

def test_fail_next_for_one_topic_only(oncelog_broker, oncelog_topic):
    hit, spared = oncelog_topic("hit"), oncelog_topic("spared")
    oncelog_broker.fail_next("Produce", "INVALID_RECORD", count=None, topic=hit)
    assert produce(oncelog_broker.bootstrap, spared, [b"s"], retries=0) == [None]
    [error] = produce(oncelog_broker.bootstrap, hit, [b"h"], retries=0)
    assert error.code() == KafkaError.INVALID_RECORD

def test_retriable_errors_are_retried_through(oncelog_broker, oncelog_topic):
    topic = oncelog_topic()
    fault = oncelog_broker.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER", count=3)
    assert produce(oncelog_broker.bootstrap, topic, [b"a"], acks="all") == [None]
    assert fault.applied == 3 and values(oncelog_broker, topic) == [b"a"]

def test_dropped_produce_response_duplicates_without_idempotence(oncelog_broker, oncelog_topic):
    topic = oncelog_topic()
    produce(oncelog_broker.bootstrap, topic, [b"warm"])  # metadata first, then the fault
    fault = oncelog_broker.drop_response("Produce")
    assert produce(oncelog_broker.bootstrap, topic, [b"m"], **{"enable.idempotence": False}) \\
        == [None]
    assert fault.applied == 1
    assert values(oncelog_broker, topic).count(b"m") == 2

def test_dropped_produce_response_no_duplicate_with_idempotence(oncelog_broker, oncelog_topic):
    topic = oncelog_topic()
    producer_config = {"enable.idempotence": True}
    fault = oncelog_broker.drop_response("Produce")
    assert produce(oncelog_broker.bootstrap, topic, [b"m"], **producer_config) == [None]
    assert fault.applied == 1
    assert values(oncelog_broker, topic) == [b"m"]

def test_delay_holds_responses(oncelog_broker, oncelog_topic):
    topic = oncelog_topic()
    produce(oncelog_broker.bootstrap, topic, [b"warm"])
    oncelog_broker.delay("Produce", ms=400)
    started = time.monotonic()
    assert produce(oncelog_broker.bootstrap, topic, [b"slow"]) == [None]
    assert time.monotonic() - started >= 0.4

def test_disconnect_on_api(oncelog_broker, oncelog_topic):
    topic = oncelog_topic()
    fault = oncelog_broker.disconnect_on("Produce")
    assert produce(oncelog_broker.bootstrap, topic, [b"a"]) == [None]  # reconnects, retries
    assert fault.applied == 1 and values(oncelog_broker, topic) == [b"a"]

def test_blackhole_a_client(oncelog_broker, oncelog_topic):
    topic = oncelog_topic()
    oncelog_broker.blackhole(client_id="lost-client")
    [error] = produce(oncelog_broker.bootstrap, topic, [b"x"], **{
        "client.id": "lost-client", "message.timeout.ms": 1500})
    assert error.code() == KafkaError._MSG_TIMED_OUT
    assert produce(oncelog_broker.bootstrap, topic, [b"y"], **{"client.id": "other"}) == [None]

def test_left_armed_by_this_test(oncelog_broker):
    oncelog_broker.fail_next("Produce", "INVALID_RECORD", count=None)

def test_faults_are_cleared_at_teardown(oncelog_broker, oncelog_topic):
    assert oncelog_broker.faults.armed == []
    assert produce(oncelog_broker.bootstrap, oncelog_topic(), [b"ok"], retries=0) == [None]

def test_unknown_names_list_the_valid_ones(oncelog_broker):
    with pytest.raises(UnknownName, match="unknown Kafka API 'Prodce'; valid names: Produce, "):
        oncelog_broker.fail_next("Prodce")
    with pytest.raises(UnknownName, match="unknown Kafka error 'NOT_A_LEADER'; valid names: "):
        oncelog_broker.fail_next("Produce", "NOT_A_LEADER")
'''


def test_fixtures_and_process_faults(run_user_tests):
    result = run_user_tests(FIXTURES)
    result.assert_outcomes(passed=5)


@pytest.mark.slow
def test_every_wire_fault_seen_by_a_real_client(run_user_tests):
    result = run_user_tests(WIRE_FAULTS)
    result.assert_outcomes(passed=11)


FAILING = '''
import os, signal

def test_fails_mid_fault(oncelog_broker, oncelog_topic, tmp_path_factory):
    oncelog_topic()
    with open(os.environ["PID_FILE"], "w") as file:
        file.write(str(oncelog_broker.pid))
    oncelog_broker.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER", count=None)
    oncelog_broker.pause()
    assert False, "the user's test fails with its broker paused and a fault armed"
'''


def test_a_failing_test_leaves_no_process_behind(run_user_tests, tmp_path, monkeypatch):
    pid_file = tmp_path / "pid"
    monkeypatch.setenv("PID_FILE", str(pid_file))
    result = run_user_tests(FAILING)
    result.assert_outcomes(failed=1)
    pid = int(pid_file.read_text())
    assert not pid_alive(pid), f"broker {pid} outlived its test run"


def test_an_interpreter_exiting_without_teardown_kills_its_broker(pytester):
    """A script that never closes its broker (an interrupted notebook, a forgotten
    ``close()``): the kit's atexit hook kills the broker by pid."""
    script = pytester.makepyfile(leak='''
        from oncelog.testing import Broker
        broker = Broker().start()
        print("PID", broker.pid, flush=True)
        raise SystemExit(3)
    ''')
    result = pytester.run(pytester._getpytestargs()[0], str(script), timeout=60)
    assert result.ret == 3
    pid = int(re.search(r"PID (\d+)", result.stdout.str()).group(1))
    assert not pid_alive(pid)


def test_entry_point_is_declared_in_pyproject():
    """The CI's ``pip install -e .`` registers what pyproject declares; here the plugin is
    loaded with -p because this environment's metadata predates it."""
    import importlib.metadata
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = project["project"]["entry-points"]["pytest11"]
    assert declared == {"oncelog": PLUGIN_MODULE}
    entry_point = importlib.metadata.EntryPoint("oncelog", PLUGIN_MODULE, "pytest11")
    plugin = entry_point.load()
    assert {"oncelog_broker", "oncelog_topic", "oncelog_group", "oncelog_cluster",
            "oncelog_spark"} <= set(vars(plugin))


CLUSTER = CLIENT_HELPERS + '''
def test_kill_the_leader_and_keep_acknowledged_records(oncelog_cluster):
    topic = oncelog_cluster.topic("failover", partitions=1)
    assert produce(oncelog_cluster.bootstrap, topic, [b"before"], acks="all") == [None]
    leader = oncelog_cluster.leader_of(topic, 0)
    oncelog_cluster.kill(leader)
    new_leader = oncelog_cluster.leader_of(topic, 0)
    assert new_leader != leader
    assert produce(oncelog_cluster.bootstrap, topic, [b"after"], acks="all") == [None]
    assert [r.value for r in oncelog_cluster.read_all(topic)] == [b"before", b"after"]
    oncelog_cluster.fail_next("Produce", "NOT_ENOUGH_REPLICAS")
    [error] = produce(oncelog_cluster.bootstrap, topic, [b"x"], acks="all", retries=0)
    assert error.code() == KafkaError.NOT_ENOUGH_REPLICAS
    oncelog_cluster.pause(new_leader)  # left paused: teardown must still stop it
    with open(os.environ["PID_FILE"], "w") as file:
        file.write(" ".join(map(str, oncelog_cluster.pids())))
'''


@pytest.mark.slow
def test_cluster_fixture_fails_over(run_user_tests, tmp_path, monkeypatch):
    pid_file = tmp_path / "pids"
    monkeypatch.setenv("PID_FILE", str(pid_file))
    result = run_user_tests(CLUSTER)
    result.assert_outcomes(passed=1)
    pids = [int(pid) for pid in pid_file.read_text().split()]
    assert len(pids) == 4  # ZooKeeper and 3 brokers, the killed one included
    assert not [pid for pid in pids if pid_alive(pid)]


def test_cluster_fixture_without_java_says_what_to_install(run_user_tests, monkeypatch,
                                                          tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    result = run_user_tests("def test_needs_a_cluster(oncelog_cluster):\n    pass\n")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*needs Java 17+ and Apache ZooKeeper 3.8: on Debian/Ubuntu "
                                 "run `sudo apt-get install default-jre-headless zookeeper`*"])


SPARK = CLIENT_HELPERS + '''
def test_a_spark_job_reads_the_fixture_broker(oncelog_spark, oncelog_broker, oncelog_topic):
    topic = oncelog_topic(partitions=2)
    produce(oncelog_broker.bootstrap, topic, [b"x", b"y", b"z"])
    rows = (oncelog_spark.read.format("oncelog")
            .option("kafka.bootstrap.servers", oncelog_broker.bootstrap)
            .option("subscribe", topic).load().select("value").collect())
    assert sorted(row.value for row in rows) == [b"x", b"y", b"z"]
'''


@pytest.mark.slow
def test_spark_fixture(run_user_tests):
    result = run_user_tests(SPARK)
    result.assert_outcomes(passed=1)
