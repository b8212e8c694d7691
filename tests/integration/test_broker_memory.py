"""A broker process's memory settings, end to end: the ``oncelog broker`` command fixes its
malloc thresholds, and ``log.cache.retain.bytes`` reaches the logs of its partitions."""

from __future__ import annotations

from oncelog.broker.process import BrokerProcess
from tests.page_residency import MIB, produce_mib, resident_bytes, write_back


def test_a_broker_keeps_only_the_retained_tail_of_a_partition_in_the_page_cache(tmp_path):
    settings = {"log.cache.retain.bytes": str(4 * MIB), "num.partitions": "1"}
    with BrokerProcess(tmp_path / "data", settings=settings,
                       extra_args=["--log-level", "DEBUG"]) as broker:
        produce_mib(broker.bootstrap, "cached", 48)
        segment = tmp_path / "data" / "cached-0" / f"{0:020d}.log"
        write_back(segment)  # so that the broker's next drop step takes it
        produce_mib(broker.bootstrap, "cached", 20)
        size = segment.stat().st_size
        assert size > 67 * MIB
        assert resident_bytes(segment, 0, 40 * MIB) <= MIB
        assert resident_bytes(segment, size - 4 * MIB) >= 3 * MIB
        log_text = broker.log_text()
    assert "malloc thresholds set" in log_text
