"""A simulated power cut: after a process was killed, put every file it wrote back to what it
had made durable, as the journal of ``fsync_journal.c`` (LD_PRELOAD) recorded it.

The model: a regular file keeps the bytes up to its size at its last successful fsync (or
fdatasync); everything written after - appended or beyond that size - is lost, either cut off
(``truncated``: the file system had not yet extended the file) or read back as zeros
(``zero-filled``: the size reached the disk, the data did not - ext4's data=writeback, XFS).
A file never fsynced keeps nothing. A rename carries the durable size to the new name, and a
truncation lowers it. What the model leaves out: a file overwritten in place below its
durable size keeps the new bytes, and names created or renamed since the directory's last
fsync are kept (journaling file systems order them before the data that follows, in
practice). oncelog's logs are append-only and its other files are replaced by rename, so the
loss the model cannot show is small.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("fsync_journal.c")
TAILS = ("truncated", "zero-filled")


def build_library(directory: Path) -> Path:
    """Compile the LD_PRELOAD journal library into ``directory``."""
    library = directory / "fsync_journal.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(library),
                    str(SOURCE), "-ldl"], check=True, capture_output=True, text=True)
    return library


def journal_env(library: Path, journal: Path) -> dict[str, str]:
    return {"LD_PRELOAD": str(library), "POWER_CUT_JOURNAL": str(journal)}


def durable_sizes(journal: Path) -> dict[str, int]:
    """Each file's durable size, by absolute path, from the journal."""
    sizes: dict[str, int] = {}
    text = journal.read_text() if journal.exists() else ""
    for line in text.splitlines():
        kind, size, path = line.split(" ", 2)
        if kind == "F":
            sizes[path] = int(size)
        elif kind == "T" and path in sizes:
            sizes[path] = min(sizes[path], int(size))
        elif kind == "R":
            old, new = path.split("\t")
            sizes[new] = sizes.pop(old, 0)
    return sizes


def cut_power(data_dir: Path, journal: Path, tail: str) -> dict[str, int]:
    """Make ``data_dir`` what a power cut would have left; returns the bytes lost per file
    (relative paths)."""
    if tail not in TAILS:
        raise ValueError(f"tail must be one of {TAILS}")
    sizes = durable_sizes(journal)
    lost = {}
    for path in sorted(Path(data_dir).rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        actual = path.stat().st_size
        durable = min(sizes.get(os.path.realpath(path), 0), actual)
        if actual == durable:
            continue
        lost[str(path.relative_to(data_dir))] = actual - durable
        if tail == "truncated":
            os.truncate(path, durable)
        else:
            with open(path, "r+b") as file:
                file.seek(durable)
                file.write(bytes(actual - durable))
    return lost
