"""The C allocator's settings for a broker process: reuse freed memory instead of returning it.

A broker allocates and frees request-sized buffers all the time: a 1 MB produce frame is
decoded into a 1 MB record batch, a follower's fetch into another. glibc's malloc serves
blocks that size from the heap only once one such block was freed, and gives the top of the
heap back to the kernel as soon as 2 x that size is free there (its dynamic thresholds). A
broker under a steady stream of 1 MB requests then grows and shrinks its heap by megabytes
per request, and every page it grows into is a fresh page: a page fault, and on a VM whose
free memory goes back to the host (virtio-balloon free page reporting, as on the machines
these figures come from) a fault the host has to serve, about 9 us per 4 KiB page.
The broker's own produce path (1 MiB batches over a raw connection, page cache recycled:
docs/operations.md, "Memory and the page cache") measured 613-679 MB/s with glibc's
dynamic thresholds and 1,147-1,514 MB/s with these fixed ones, in the same minutes; through
confluent-kafka with default settings, 512-598 MB/s before and 688-798 MB/s after, the
broker's CPU per MB halved.

So a broker process fixes them: blocks below ``MMAP_THRESHOLD`` come from the heap, and the
heap keeps up to ``TRIM_THRESHOLD`` of free memory at its top before giving any back. What it
costs: that much RSS may stay after a burst of large requests (the hostile-client tests bound
RSS with it in place). Only the broker command does this (``cli.broker``), never a process
that merely imports oncelog.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 8 * 1024 * 1024  # covers message.max.bytes (1 MB) batches with room to spare
TRIM_THRESHOLD = 32 * 1024 * 1024  # a few dozen request buffers of free heap kept for reuse


def keep_freed_memory() -> bool:
    """Fix glibc's malloc thresholds for this process; False (and nothing done) elsewhere."""
    try:
        # the process's own symbols, libc's among them (find_library would run ldconfig at
        # every broker start)
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):  # not glibc: musl, macOS have no mallopt
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    done = (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
            and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)
    log.debug("malloc thresholds %s: mmap %d, trim %d", "set" if done else "refused",
              MMAP_THRESHOLD, TRIM_THRESHOLD)
    return done
