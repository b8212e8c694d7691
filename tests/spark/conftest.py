"""Spark test fixtures: a broker per module, topics and records (``spark`` itself, one real
local SparkSession for the whole run, is in tests/conftest.py); ``any_spark_broker``, that
broker or a real Apache Kafka, for the tests of the swap path (issue 32)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import running_broker

_names = itertools.count()


@pytest.fixture(scope="module")
def spark_broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("spark-broker"),
                        {"log.retention.check.interval.ms": "200"}) as broker:
        yield broker


@dataclass(frozen=True)
class SwapBroker:
    """Where a swap-path test runs: ``kind`` is ``oncelog_broker_kind``'s value."""

    kind: str
    bootstrap: str


@pytest.fixture
def any_spark_broker(oncelog_broker_kind, request) -> SwapBroker:
    """The test once on ``spark_broker`` and once on the session's Apache Kafka (the kit's
    ``oncelog_apache_kafka``: one Kafka per test worker, shared, reset after each test), as
    the kit's ``oncelog_any_broker`` is parametrised (by the kit's ``oncelog_broker_kind``)."""
    fixture = "spark_broker" if oncelog_broker_kind == "oncelog" else "oncelog_apache_kafka"
    return SwapBroker(oncelog_broker_kind, request.getfixturevalue(fixture).bootstrap)


def new_topic(bootstrap: str, partitions: int = 1, config: dict | None = None,
              prefix: str = "t") -> str:
    name = f"{prefix}{next(_names)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)
    return name


def produce(bootstrap: str, topic: str, values, *, partition: int | None = None,
            key=None, headers=None, timestamp: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        kwargs = {"key": key, "headers": headers, "timestamp": timestamp}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, value=value, **kwargs)
    assert producer.flush(15) == 0
