"""Producer snapshots after a power cut: a torn, zero-filled or otherwise unreadable newest
snapshot is skipped (and deleted) for the newest readable one below it, so recovery replays
from there instead of failing to start."""

from __future__ import annotations

import os

import pytest

from oncelog.storage import producer_snapshots as snapshots

PRODUCERS = [{"producer_id": 7, "producer_epoch": 0}]


@pytest.mark.parametrize("damage", ["truncated", "zero-filled", "empty", "not an object"])
def test_an_unreadable_newest_snapshot_falls_back_to_the_one_below(tmp_path, damage):
    snapshots.write_snapshot(tmp_path, 10, PRODUCERS)
    snapshots.write_snapshot(tmp_path, 20, PRODUCERS)
    newest = snapshots.snapshot_path(tmp_path, 20)
    size = newest.stat().st_size
    if damage == "truncated":
        os.truncate(newest, size // 2)
    elif damage == "zero-filled":
        newest.write_bytes(bytes(size))
    elif damage == "empty":
        os.truncate(newest, 0)
    else:
        newest.write_text("[1, 2]")
    assert snapshots.load_latest(tmp_path, 100) == (10, PRODUCERS)
    assert not newest.exists()
