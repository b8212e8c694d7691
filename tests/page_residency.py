"""Which bytes of a file are in the OS page cache: mincore(2) on a private mapping of it, the
kernel's own answer rather than a proxy (for ``log.cache.retain.bytes`` tests)."""

from __future__ import annotations

import ctypes
import mmap
from pathlib import Path

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
