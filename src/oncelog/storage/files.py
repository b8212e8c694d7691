"""Small files written whole, and fsyncs by name: what every checkpoint, snapshot and index
beside the log needs.

``replace`` writes a temporary file beside the target (its name plus ``.tmp``) and renames it
over the target, so a reader - or a broker starting after a crash - finds the old content
or the new, never part of either. ``fsync=True`` puts the data on disk before the rename (a
power loss then leaves one whole version); ``sync_directory=True`` also fsyncs the
directory, so that the rename itself survives one. ``fsync_path`` fsyncs a file or a
directory by its path.
"""

from __future__ import annotations

import os
from pathlib import Path


def replace(path: Path, data: bytes | str, *, fsync: bool = False,
            sync_directory: bool = False) -> None:
    temporary = f"{path}.tmp"  # beside it (a descriptor, not a buffered file: these are small)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        view = memoryview(data.encode() if isinstance(data, str) else data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    if sync_directory:
        fsync_path(path.parent)


def fsync_path(path: Path, missing_ok: bool = False) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
