"""The broker's malloc thresholds: request-sized blocks come from the heap and stay there.

Each case runs in a fresh interpreter (thresholds are process-wide and cannot be undone), and
reads glibc's own accounting (mallinfo2) rather than timing anything.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = r"""
import ctypes, sys
from oncelog.broker.allocator import keep_freed_memory

if sys.argv[1] == "fixed":
    assert keep_freed_memory()

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
blocks = [bytearray(4 << 20) for _ in range(4)]  # four 4 MiB request buffers
mapped = libc.mallinfo2().hblkhd  # bytes in blocks malloc mmapped on their own
del blocks
print(mapped, libc.mallinfo2().fordblks)  # then: free bytes malloc keeps in its heap
"""


def probe(mode: str) -> tuple[int, int]:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    mapped, kept = map(int, done.stdout.split())
    return mapped, kept


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and mallinfo2")
def test_fixed_thresholds_serve_request_buffers_from_the_heap_and_keep_them() -> None:
    mapped, kept = probe("fixed")
    assert mapped < 4 << 20  # none of the four was a separate mapping
    assert kept >= 16 << 20  # freed, and kept for the next requests


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and mallinfo2")
def test_glibcs_defaults_map_and_unmap_each_one() -> None:
    """The behaviour the broker avoids: what makes every request touch fresh pages."""
    mapped, kept = probe("default")
    assert mapped >= 16 << 20
    assert kept < 16 << 20
