"""Producer-state snapshot files: ``<offset>.snapshot`` in a partition's directory.

A snapshot holds the state of every producer as of ``offset`` - what the batches below it
left: epochs, sequences, coordinator epochs and open transactions' first offsets. After a
restart the partition loads the newest snapshot at or below the offset it must replay from
and replays batch headers from there (Kafka's ProducerStateManager does the same). Files are
JSON, written to a temporary name, fsynced and renamed, so a crash leaves a whole snapshot or
none; snapshots above the log end offset (the log was truncated, by recovery or by
replication) are stale and deleted by ``delete_above``.

Which are kept (``delete_unneeded``): the newest at or below the active segment's base
offset (the partition takes one at every roll, so recovery, which rebuilds the active
segment's aborted-transaction index, replays that segment only) and the newest two overall.

Versions: 2 added ``coordinator_epoch`` and ``current_txn_first_offset`` to each producer;
version 1 files are still read (no transaction was ever open when they were written).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from . import files

log = logging.getLogger(__name__)

SUFFIX = ".snapshot"
VERSION = 2
READABLE_VERSIONS = (1, 2)


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SUFFIX}"


def list_snapshots(directory: Path) -> list[int]:
    offsets = []
    for path in directory.glob(f"*{SUFFIX}"):
        stem = path.name[:-len(SUFFIX)]
        if stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def write_snapshot(directory: Path, offset: int, producers: list[dict[str, Any]]) -> None:
    files.replace(snapshot_path(directory, offset),
                  json.dumps({"version": VERSION, "offset": offset, "producers": producers}),
                  fsync=True)


def delete_above(directory: Path, max_offset: int) -> None:
    """Delete snapshots above ``max_offset`` (the log end offset): they are stale."""
    for offset in list_snapshots(directory):
        if offset > max_offset:
            path = snapshot_path(directory, offset)
            log.info("%s: deleting snapshot above the log end offset %d", path, max_offset)
            path.unlink(missing_ok=True)


def load_latest(directory: Path, max_offset: int) -> tuple[int, list[dict[str, Any]]] | None:
    """The newest readable snapshot at or below ``max_offset``; unreadable ones are deleted,
    newer ones left alone (see ``delete_above``)."""
    for offset in reversed(list_snapshots(directory)):
        if offset > max_offset:
            continue
        path = snapshot_path(directory, offset)
        try:
            document = json.loads(path.read_text())
            if (not isinstance(document, dict)
                    or document.get("version") not in READABLE_VERSIONS
                    or document.get("offset") != offset):
                raise ValueError("unexpected version or offset")
            return offset, list(document["producers"])
        except (OSError, ValueError, KeyError) as error:
            log.warning("%s: unreadable producer snapshot (%s); ignoring it", path, error)
            path.unlink(missing_ok=True)
    return None


def delete_unneeded(directory: Path, active_segment_base_offset: int, keep: int = 2) -> None:
    """Keep the newest snapshot at or below ``active_segment_base_offset`` and the newest
    ``keep``; delete the rest (see the module docstring)."""
    offsets = list_snapshots(directory)
    needed = set(offsets[-keep:] if keep else [])
    at_or_below = [offset for offset in offsets if offset <= active_segment_base_offset]
    if at_or_below:
        needed.add(at_or_below[-1])
    for offset in offsets:
        if offset not in needed:
            snapshot_path(directory, offset).unlink(missing_ok=True)
