"""A broker process's memory settings, end to end: the ``oncelog broker`` command fixes its
malloc thresholds, and ``log.cache.retain.bytes`` reaches the logs of its partitions."""

from __future__ import annotations

import os

from confluent_kafka import Producer

from oncelog.broker.process import BrokerProcess
from tests.page_residency import MIB, resident_bytes


def produce_mib(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    value = os.urandom(MIB // 2 - 1024)  # under librdkafka's message.max.bytes
    for _ in range(2 * count):
        producer.produce(topic, value, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0


def test_a_broker_keeps_only_the_retained_tail_of_a_partition_in_the_page_cache(tmp_path):
    settings = {"log.cache.retain.bytes": str(4 * MIB), "num.partitions": "1"}
    with BrokerProcess(tmp_path / "data", settings=settings,
                       extra_args=["--log-level", "DEBUG"]) as broker:
        produce_mib(broker.bootstrap, "cached", 48)
        segment = tmp_path / "data" / "cached-0" / f"{0:020d}.log"
        descriptor = os.open(segment, os.O_RDONLY)
        try:
            os.fsync(descriptor)  # written back, so the broker's next drop step takes it
        finally:
            os.close(descriptor)
        produce_mib(broker.bootstrap, "cached", 20)
        size = segment.stat().st_size
        assert size > 67 * MIB
        assert resident_bytes(segment, 0, 40 * MIB) <= MIB
        assert resident_bytes(segment, size - 4 * MIB) >= 3 * MIB
        log_text = broker.log_text()
    assert "malloc thresholds set" in log_text
