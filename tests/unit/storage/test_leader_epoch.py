"""The leader-epoch checkpoint: lookups for OffsetForLeaderEpoch, truncation from either end,
and the file surviving a reopen (or being rebuilt when unreadable)."""

from __future__ import annotations

from oncelog.storage.leader_epoch import CHECKPOINT_FILE, LeaderEpochCache


def cache_with(tmp_path, *entries) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def test_end_offset_of_an_epoch_is_the_next_epochs_start_or_the_log_end(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (2, 10), (5, 30))
    assert cache.end_offset_for(0, 50) == (0, 10)
    assert cache.end_offset_for(1, 50) == (0, 10)  # never led in 1: the largest epoch below
    assert cache.end_offset_for(2, 50) == (2, 30)
    assert cache.end_offset_for(5, 50) == (5, 50)
    assert cache.end_offset_for(9, 50) == (5, 50)


def test_an_epoch_older_than_all_we_know_is_undefined(tmp_path):
    assert cache_with(tmp_path, (3, 5)).end_offset_for(2, 9) == (-1, -1)
    assert LeaderEpochCache(tmp_path / "empty").end_offset_for(0, 0) == (-1, -1)


def test_assigning_the_same_epoch_again_keeps_its_first_start(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (0, 7))
    assert cache.entries == [(0, 0)]


def test_truncation_from_the_end_drops_epochs_that_started_after_it(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (1, 10), (2, 20))
    cache.truncate_from_end(10)
    assert cache.entries == [(0, 0)]


def test_truncation_from_the_start_moves_the_first_epoch_start(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (1, 10), (2, 20))
    cache.truncate_from_start(15)
    assert cache.entries == [(1, 15), (2, 20)]


def test_the_checkpoint_survives_a_reopen_in_kafkas_format(tmp_path):
    cache_with(tmp_path, (0, 0), (4, 12))
    assert (tmp_path / CHECKPOINT_FILE).read_text() == "0\n2\n0 0\n4 12\n"
    assert LeaderEpochCache(tmp_path).entries == [(0, 0), (4, 12)]


def test_an_unreadable_checkpoint_is_reported_and_starts_empty(tmp_path, caplog):
    (tmp_path / CHECKPOINT_FILE).write_text("0\n3\n0 0\n")
    assert LeaderEpochCache(tmp_path).entries == []
    assert "unreadable" in caplog.text
