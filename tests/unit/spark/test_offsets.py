"""Offsets as Spark's checkpoint stores them, and maxOffsetsPerTrigger's split."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from oncelog.spark.offsets import from_json, limit_offsets, to_json


def test_the_same_offsets_always_serialise_to_the_same_json():
    """Spark compares offsets as JSON strings: a different key order would look like new
    data and run an empty batch on every trigger."""
    a = {("b", 10): 1, ("a", 2): 5, ("a", 10): 7}
    b = {("a", 10): 7, ("b", 10): 1, ("a", 2): 5}
    assert json.dumps(to_json(a)) == json.dumps(to_json(b))
    assert json.dumps(to_json(a)) == '{"a": {"2": 5, "10": 7}, "b": {"10": 1}}'
    assert from_json(json.loads(json.dumps(to_json(a)))) == a


def test_limit_shares_records_in_proportion_to_what_waits():
    start = {("t", 0): 0, ("t", 1): 100}
    latest = {("t", 0): 900, ("t", 1): 200}
    end = limit_offsets(start, latest, 500)
    assert end == {("t", 0): 450, ("t", 1): 150}


def test_limit_reads_a_new_partition_from_zero_and_everything_when_under_the_cap():
    assert limit_offsets({}, {("t", 0): 3}, 10) == {("t", 0): 3}
    assert limit_offsets({("t", 0): 5}, {("t", 0): 5, ("t", 1): 4}, 2) == {("t", 0): 5,
                                                                           ("t", 1): 2}


@given(st.dictionaries(st.integers(0, 20), st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
                       min_size=1, max_size=8),
       st.integers(1, 3000))
def test_limit_never_exceeds_the_cap_nor_the_log_and_never_goes_back(partitions, cap):
    start = {("t", p): min(a, b) for p, (a, b) in partitions.items()}
    latest = {("t", p): max(a, b) for p, (a, b) in partitions.items()}
    end = limit_offsets(start, latest, cap)
    assert set(end) == set(latest)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in end)
    taken = sum(end[tp] - start[tp] for tp in end)
    waiting = sum(latest[tp] - start[tp] for tp in end)
    assert taken == min(cap, waiting)
