"""The two sparse indexes: Kafka's file layouts and the lookup rules the log relies on."""

from __future__ import annotations

import struct

from oncelog.storage.index import OffsetIndex, TimeIndex


def test_offset_index_file_is_kafkas_layout_and_round_trips():
    index = OffsetIndex(base_offset=1000)
    for last_offset, position in [(1002, 0), (1010, 4096), (1030, 8300)]:
        index.append(last_offset, position)
    data = index.to_bytes()
    assert data == struct.pack(">iiiiii", 2, 0, 10, 4096, 30, 8300)
    loaded = OffsetIndex.from_bytes(1000, data)
    assert list(loaded.relative_offsets) == [2, 10, 30]
    assert list(loaded.positions) == [0, 4096, 8300]


def test_offset_index_lookup_starts_at_a_batch_before_the_target():
    index = OffsetIndex(base_offset=100)
    index.append(104, 0)  # batch 100..104 at 0
    index.append(120, 500)  # batch ..120 at 500
    assert index.lookup(100) == 0
    assert index.lookup(119) == 0  # 119 may be in a batch before position 500
    assert index.lookup(120) == 500
    assert index.lookup(10**9) == 500
    index.truncate_to_position(500)
    assert list(index.positions) == [0]


def test_time_index_file_is_kafkas_layout_and_round_trips():
    index = TimeIndex(base_offset=50)
    index.maybe_append(1_700_000_000_000, 52)
    index.maybe_append(1_700_000_000_000, 60)  # not a new maximum: no entry
    index.maybe_append(1_700_000_000_500, 61)
    data = index.to_bytes()
    assert data == struct.pack(">qiqi", 1_700_000_000_000, 2, 1_700_000_000_500, 11)
    loaded = TimeIndex.from_bytes(50, data)
    assert list(loaded.timestamps) == [1_700_000_000_000, 1_700_000_000_500]
    assert list(loaded.relative_offsets) == [2, 11]


def test_time_index_lookup_gives_the_last_offset_known_older():
    index = TimeIndex(base_offset=0)
    index.maybe_append(100, 3)
    index.maybe_append(200, 7)
    assert index.lookup(100) is None  # offsets <= 3 may hold a record at exactly 100
    assert index.lookup(101) == 3
    assert index.lookup(201) == 7
    index.truncate_to_offset(7)
    assert index.last_timestamp == 100
