"""log.cache.retain.bytes: a log keeps only its newest bytes in the OS page cache as it writes.

Residency is read with mincore(2) on a private mapping of the segment file: the kernel's own
answer to "is this page in the page cache", not a proxy for it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path

import pytest

from oncelog.protocol.records import make_batch
from oncelog.storage import Log, LogConfig
from tests.fake_clock import FakeClock

MIB = 1 << 20
PAGE = mmap.PAGESIZE


def resident_bytes(path: Path, start: int = 0, end: int | None = None) -> int:
    """Bytes of ``path`` in [start, end) that are in the page cache."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    size = path.stat().st_size
    end = size if end is None else end
    with open(path, "rb") as file:
        mapped = mmap.mmap(file.fileno(), size, access=mmap.ACCESS_COPY)
    try:
        anchor = ctypes.c_char.from_buffer(mapped)
        pages = (size + PAGE - 1) // PAGE
        vector = (ctypes.c_ubyte * pages)()
        if libc.mincore(ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(size),
                        vector) != 0:
            raise OSError(ctypes.get_errno(), "mincore failed")
        del anchor
        return sum(PAGE for page in range(start // PAGE, (end + PAGE - 1) // PAGE)
                   if vector[page] & 1)
    finally:
        mapped.close()


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
