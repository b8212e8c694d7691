"""Producer-state snapshot files: ``<offset>.snapshot`` in a partition's directory.

A snapshot holds the idempotence state of every producer as of ``offset`` (the log end offset
when it was taken). After a restart the partition loads the newest snapshot at or below its
log end offset and replays batch headers from there (Kafka's ProducerStateManager does the
same). Files are JSON, written to a temporary name, fsynced and renamed, so a crash leaves
a whole snapshot or none; a snapshot above the log end offset (the log was truncated by
recovery) is deleted as stale.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

SUFFIX = ".snapshot"
VERSION = 1


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SUFFIX}"


def list_snapshots(directory: Path) -> list[int]:
    offsets = []
    for path in directory.glob(f"*{SUFFIX}"):
        stem = path.name[:-len(SUFFIX)]
        if stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def write_snapshot(directory: Path, offset: int, producers: list[dict]) -> None:
    path = snapshot_path(directory, offset)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w") as handle:
        json.dump({"version": VERSION, "offset": offset, "producers": producers}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def load_latest(directory: Path, max_offset: int) -> tuple[int, list[dict]] | None:
    """The newest readable snapshot at or below ``max_offset``; stale ones above are deleted."""
    for offset in reversed(list_snapshots(directory)):
        path = snapshot_path(directory, offset)
        if offset > max_offset:
            log.info("%s: deleting snapshot above the log end offset %d", path, max_offset)
            path.unlink(missing_ok=True)
            continue
        try:
            document = json.loads(path.read_text())
            if document.get("version") != VERSION or document.get("offset") != offset:
                raise ValueError("unexpected version or offset")
            return offset, list(document["producers"])
        except (OSError, ValueError, KeyError) as error:
            log.warning("%s: unreadable producer snapshot (%s); ignoring it", path, error)
            path.unlink(missing_ok=True)
    return None


def delete_older_than(directory: Path, offset: int, keep: int = 2) -> None:
    """Drop snapshots below ``offset`` except the newest ``keep`` (retention housekeeping)."""
    offsets = list_snapshots(directory)
    for old in offsets[:-keep] if keep else offsets:
        if old < offset:
            snapshot_path(directory, old).unlink(missing_ok=True)
