"""The exactly-once consume-transform-produce loop (``oncelog.client.transform``) in real
processes: killed with kill -9 in the middle of a transaction, and two members of one group
with one of them killed mid-run (a rebalance). The output topic, read ``read_committed``,
must hold each input record's output exactly once; read ``read_uncommitted`` it shows the
aborted duplicates, proof that the kills landed inside transactions.

The kill -9 test runs on oncelog's broker and on a real Apache Kafka (issue 32's swap path:
``any_broker``, the kit's session Kafka shared by the worker's tests, hence topic and group
names of their own per test)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.client.reader import read_topic
from oncelog.testing.broker import unique_name

WORKER = Path(__file__).with_name("transform_worker.py")
RECORDS = 1200
PARTITIONS = 3


@dataclass(frozen=True)
class Pipeline:
    """A broker's input and output topics and the transform's consumer group."""

    bootstrap: str
    input: str
    output: str
    group: str


@pytest.fixture
def any_broker(oncelog_broker_kind, request):
    """A fresh oncelog broker (``broker``), or the kit's session Apache Kafka."""
    kind = oncelog_broker_kind
    return request.getfixturevalue("broker" if kind == "oncelog" else "oncelog_apache_kafka")


def prepare(bootstrap: str) -> Pipeline:
    pipeline = Pipeline(bootstrap, unique_name("in"), unique_name("out"), unique_name("enricher"))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(pipeline.input, PARTITIONS, 1),
                                       NewTopic(pipeline.output, PARTITIONS, 1)]).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for number in range(RECORDS):
        producer.produce(pipeline.input, b"id-%04d" % number, partition=number % PARTITIONS)
    assert producer.flush(15) == 0
    return pipeline


def worker(pipeline: Pipeline, *args: str, idle: float = 4.0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(WORKER), pipeline.bootstrap, pipeline.group,
                             pipeline.input, pipeline.output, "--idle", str(idle), *args],
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def finish(process: subprocess.Popen, timeout_s: float = 90.0) -> str:
    try:
        _, err = process.communicate(timeout=timeout_s)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return err


def outputs(pipeline: Pipeline, isolation: str) -> Counter:
    return Counter(r.value for r in read_topic(pipeline.bootstrap, pipeline.output,
                                               isolation_level=isolation))


EXPECTED = Counter(b"ID-%04d" % n for n in range(RECORDS))


def test_kill_9_mid_transaction_leaves_every_output_exactly_once(any_broker):
    pipeline = prepare(any_broker.bootstrap)
    transactional_id = unique_name("w")
    crashed = worker(pipeline, "--crash-in-batch", "4", "--transactional-id", transactional_id)
    finish(crashed)
    assert crashed.returncode == -9
    # the same transactional id: the restarted instance aborts what the dead one left open
    # idle long enough for the dead member's session (6 s) to end and the group to rebalance
    rest = worker(pipeline, "--transactional-id", transactional_id, idle=12.0)
    report = finish(rest)
    assert "done" in report, report
    assert outputs(pipeline, "read_committed") == EXPECTED
    everything = outputs(pipeline, "read_uncommitted")
    assert sum(everything.values()) > RECORDS  # the killed batch's outputs, aborted


def test_a_member_killed_during_a_rebalance_leaves_every_output_exactly_once(broker_factory,
                                                                              tmp_path):
    broker = broker_factory(settings={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    pipeline = prepare(broker.bootstrap)
    trigger = tmp_path / "crash-now"
    victim = worker(pipeline, "--crash-when", str(trigger), "--delay-ms", "10",
                    "--transaction-timeout", "3", idle=20.0)
    assert _ready(victim) != "[]"
    survivor = worker(pipeline, "--delay-ms", "10", idle=12.0)
    assert _ready(survivor) != "[]"  # the group rebalanced: both members hold partitions
    trigger.touch()
    finish(victim)
    assert victim.returncode == -9
    report = finish(survivor)
    assert "done" in report, report
    # the victim's open transaction ends by its timeout (3 s): until then read_committed
    # readers of its output partitions wait at it
    deadline = time.monotonic() + 20
    while outputs(pipeline, "read_committed") != EXPECTED:
        assert time.monotonic() < deadline, "output not exactly once"
        time.sleep(0.5)
    assert sum(outputs(pipeline, "read_uncommitted").values()) > RECORDS


def _ready(process: subprocess.Popen, timeout_s: float = 30.0) -> str:
    """The partitions of the process's first non-empty assignment ("ready [...]")."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if line.startswith("ready ") and line.strip() != "ready []":
            return line.split(" ", 1)[1].strip()
        if not line and process.poll() is not None:
            break
    raise AssertionError("the worker never got partitions")
