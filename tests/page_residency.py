"""Which bytes of a file are in the OS page cache: mincore(2) on a private mapping of it, the
kernel's own answer rather than a proxy (for ``log.cache.retain.bytes`` tests); and the
producing and writing back those tests need."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

from confluent_kafka import Producer

MIB = 1 << 20
PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)


def resident_bytes(path: Path, start: int = 0, end: int | None = None) -> int:
    """Bytes of ``path`` in [start, end) that are in the page cache."""
    size = path.stat().st_size
    end = size if end is None else end
    with open(path, "rb") as file:
        mapped = mmap.mmap(file.fileno(), size, access=mmap.ACCESS_COPY)
    try:
        anchor = ctypes.c_char.from_buffer(mapped)
        pages = (size + PAGE - 1) // PAGE
        vector = (ctypes.c_ubyte * pages)()
        if _libc.mincore(ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(size),
                         vector) != 0:
            raise OSError(ctypes.get_errno(), "mincore failed")
        del anchor
        return sum(PAGE for page in range(start // PAGE, (end + PAGE - 1) // PAGE)
                   if vector[page] & 1)
    finally:
        mapped.close()


def produce_mib(bootstrap: str, topic: str, count: int) -> None:
    """``count`` MiB to partition 0, acks=all, in half-MiB values."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    value = os.urandom(MIB // 2 - 1024)  # under librdkafka's message.max.bytes
    for _ in range(2 * count):
        producer.produce(topic, value, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0


def write_back(path: Path) -> None:
    """fsync ``path``: its dirty pages become clean ones a drop from the cache can take."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
