"""A range of a segment file, handed to the network as it is (``os.sendfile``).

A fetch of a megabyte would otherwise be read into a fresh buffer (``os.pread``) and copied
from it into the socket; sending the file's range lets the kernel move page-cache pages
straight to the socket. The region holds its own duplicate of the segment's descriptor, so a
segment closed or deleted by retention meanwhile does not close it: the bytes stay readable
until the region is sent and dropped (a duplicate shares no position that matters here -
every read and send names its offset, and segment writes are ``O_APPEND``). The descriptor is
closed when the region is garbage, so a response that is never sent leaks nothing.
``next_offset`` is the offset after the region's last batch (-1 when unknown): a
``read_committed`` fetch bounds its aborted-transaction list with it without reading.
"""

from __future__ import annotations

import os
import weakref


class FileRegion:
    __slots__ = ("fd", "offset", "size", "next_offset", "__weakref__")

    def __init__(self, fd: int, offset: int, size: int, next_offset: int = -1) -> None:
        self.fd = os.dup(fd)
        self.offset, self.size, self.next_offset = offset, size, next_offset
        weakref.finalize(self, os.close, self.fd)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRegion(fd {self.fd}, {self.size} bytes at {self.offset})"

    def read(self) -> bytes:
        """The bytes themselves (for a response that must be encoded whole)."""
        return os.pread(self.fd, self.size, self.offset)
