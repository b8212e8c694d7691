"""log.cache.retain.bytes: a log keeps only its newest bytes in the OS page cache as it writes
(residency read with mincore(2): ``tests.page_residency``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oncelog.protocol.records import make_batch
from oncelog.storage import Log, LogConfig
from tests.fake_clock import FakeClock
from tests.page_residency import MIB, resident_bytes


def write_mib(log: Log, count: int) -> None:
    value = os.urandom(MIB - 100)  # one batch a little under 1 MiB
    for _ in range(count):
        log.append(bytearray(make_batch([value])), leader_epoch=0)


def active_segment(log: Log) -> Path:
    return log.directory / f"{log.active_segment_base_offset:020d}.log"


def test_a_log_drops_what_it_wrote_behind_the_retained_tail(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(cache_retain_bytes=4 * MIB), FakeClock())
    try:
        write_mib(log, 48)
        log.flush()  # written back: what the next drop step re-advises is clean and goes
        write_mib(log, 20)  # one more drop step
        path = active_segment(log)
        size = path.stat().st_size
        assert size > 67 * MIB
        # everything before the last step's range left the cache; the tail stays
        assert resident_bytes(path, 0, 40 * MIB) <= MIB
        assert resident_bytes(path) < size // 2
        assert resident_bytes(path, size - 4 * MIB) >= 3 * MIB
        assert log.read(0, MIB)  # dropped bytes still read back (from disk)
    finally:
        log.close()


def test_by_default_a_log_leaves_the_page_cache_alone(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), FakeClock())
    try:
        write_mib(log, 48)
        log.flush()
        write_mib(log, 20)
        path = active_segment(log)
        assert resident_bytes(path) >= path.stat().st_size * 9 // 10
    finally:
        log.close()


def test_a_negative_retention_other_than_minus_one_is_refused() -> None:
    with pytest.raises(ValueError, match="log.cache.retain.bytes"):
        LogConfig(cache_retain_bytes=-2)
