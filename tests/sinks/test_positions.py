"""The rules that decide whether a batch follows what a sink holds (``sinks.positions``)."""

from __future__ import annotations

import pytest

from oncelog.spark.sinks import SinkError
from oncelog.spark.sinks.positions import Batch, Marker, compare, decide, same_offsets

WHAT = "query 'q'"
STORED = {"orders": {"0": 10, "1": 20}}


def exact(batch_id: int, end: dict = STORED) -> Marker:
    return Marker(batch_id, end, exact=True)


def test_a_first_batch_is_written_whatever_it_starts_at():
    assert decide(None, Batch(5, {"orders": {"0": 99}}, {"orders": {"0": 100}}), what=WHAT)


def test_the_next_batch_starting_at_the_stored_end_is_written():
    batch = Batch(4, {"orders": {"1": 20, "0": 10}}, {"orders": {"0": 15, "1": 20}})
    assert decide(exact(3), batch, what=WHAT) is True


def test_a_replay_of_the_last_batch_is_skipped():
    # Spark re-runs batch 3 over its offsets after a crash: its start is batch 2's end
    assert decide(exact(3), Batch(3, {"orders": {"0": 4, "1": 20}}, STORED), what=WHAT) is False
    # offsets unknown (no Kafka source): the batch id alone decides, as before
    assert decide(Marker(3, None, exact=False), Batch(3), what=WHAT) is False


def test_a_new_checkpoint_continuing_exactly_is_written_though_its_ids_restart():
    batch = Batch(0, STORED, {"orders": {"0": 12, "1": 25}})
    assert decide(exact(7), batch, what=WHAT) is True
    # even with the very id of the last batch: other end offsets, so not a replay
    assert decide(exact(0), batch, what=WHAT) is True


def test_an_overlap_is_one_sentence_naming_both_positions():
    batch = Batch(0, {"orders": {"0": 0, "1": 20}}, {"orders": {"0": 8, "1": 20}})
    with pytest.raises(SinkError) as caught:
        decide(exact(7), batch, what=WHAT)
    assert str(caught.value).startswith(
        "batch 0 of query 'q' starts at offsets orders-0 0 but the sink holds everything up "
        "to orders-0 10 (batch 7): records it holds would be written again in orders-0; "
        "nothing was written")
    assert "\n" not in str(caught.value)


def test_a_gap_is_one_sentence_and_both_together_are_named():
    gap = Batch(8, {"orders": {"0": 10, "1": 25}}, {"orders": {"0": 10, "1": 30}})
    with pytest.raises(SinkError, match="orders-1 25 but the sink holds everything up to "
                                        "orders-1 20 .*never received would be skipped in "
                                        "orders-1"):
        decide(exact(7), gap, what=WHAT)
    both = Batch(8, {"orders": {"0": 3, "1": 25}}, {"orders": {"0": 10, "1": 30}})
    with pytest.raises(SinkError, match="orders-0 3, orders-1 25 .* up to orders-0 10, "
                                        "orders-1 20 .*written again in orders-0 and .*"
                                        "skipped in orders-1"):
        decide(exact(7), both, what=WHAT)


def test_offsets_taken_from_rows_refuse_only_overlaps():
    """Rows end before Spark's end when the last offsets gave no row (a transaction marker,
    a compacted or filtered record): starting past them is no proof of a gap."""
    from_rows = Marker(7, STORED, exact=False)
    assert decide(from_rows, Batch(8, {"orders": {"0": 11, "1": 20}},
                                   {"orders": {"0": 12, "1": 20}}), what=WHAT)
    with pytest.raises(SinkError, match="written again in orders-0"):
        decide(from_rows, Batch(8, {"orders": {"0": 9, "1": 20}},
                                {"orders": {"0": 12, "1": 20}}), what=WHAT)


def test_without_offsets_an_older_batch_id_is_refused():
    marker = Marker(7, None, exact=False)
    assert decide(marker, Batch(8), what=WHAT) is True
    with pytest.raises(SinkError, match="batch 2 of query 'q' comes after batch 7"):
        decide(marker, Batch(2), what=WHAT)


def test_partitions_only_one_side_knows_agree():
    assert compare({"a": {"0": 5}}, {"a": {"0": 5, "1": 0}, "b": {"0": 3}}) == ([], [])
    assert compare({"a": {"0": 5, "2": 1}}, {"a": {"0": 6, "2": 0}}) == (["a-0"], ["a-2"])
    assert same_offsets({"a": {"1": 2, "0": 1}}, {"a": {"0": 1, "1": 2}})
    assert not same_offsets({"a": {"0": 1}}, {"a": {"0": 2}})


def rows(first: dict, end: dict) -> tuple[dict, dict]:
    return {"orders": first}, {"orders": end}


def test_without_planned_offsets_where_the_rows_lie_decides():
    """Spark Connect: no plan to read the batch's start from, so the rows' first and last
    offsets (+1) per partition tell a replay from new records. Before, only batch ids were
    compared there: a query restarted from the sink's offsets with a new checkpoint counts
    from 0 again, and its batch with the last marker's id was skipped as a replay - records
    lost - and any lower id refused although it continued exactly."""
    from_rows = Marker(3, STORED, exact=False)
    replay = rows({"0": 4, "1": 15}, {"0": 10, "1": 20})          # every row is held
    assert decide(from_rows, Batch(3, row_offsets=replay), what=WHAT) is False
    new = rows({"0": 10, "1": 20}, {"0": 14, "1": 21})
    assert decide(from_rows, Batch(3, row_offsets=new), what=WHAT) is True
    assert decide(from_rows, Batch(0, row_offsets=new), what=WHAT) is True
    # a partition the sink never saw is new too; past the stored end is no proof of a gap
    assert decide(from_rows, Batch(4, row_offsets=rows({"0": 12, "2": 0}, {"0": 13, "2": 5})),
                  what=WHAT) is True


def test_without_planned_offsets_rows_the_sink_holds_are_refused_unless_a_replay():
    from_rows = Marker(3, STORED, exact=False)
    with pytest.raises(SinkError, match="batch 0 of query 'q' starts at offsets orders-0 0, "
                                        "orders-1 0 .*written again in orders-0, orders-1"):
        decide(from_rows, Batch(0, row_offsets=rows({"0": 0, "1": 0}, {"0": 10, "1": 20})),
               what=WHAT)
    with pytest.raises(SinkError, match="written again in orders-1;"):   # partly held
        decide(exact(3), Batch(3, row_offsets=rows({"0": 10, "1": 18}, {"0": 12, "1": 25})),
               what=WHAT)
    # no rows: nothing can be written twice; Spark's re-run is still skipped
    assert decide(from_rows, Batch(3, row_offsets=({}, {})), what=WHAT) is False
    assert decide(from_rows, Batch(1, row_offsets=({}, {})), what=WHAT) is True
