"""TransactionalSink without Spark: batches and their markers commit together, exactly once."""

from __future__ import annotations

import json
import pickle

import pytest

from oncelog.spark.sinks import SinkError, TransactionalSink

from .tables import blob_type, fetch, markers, table_exists


def events_ddl(url: str) -> str:
    return (f"CREATE TABLE IF NOT EXISTS events (id BIGINT PRIMARY KEY, "
            f"payload {blob_type(url)})")


def ids(url: str) -> list[int]:
    return [row[0] for row in fetch(url, "SELECT id FROM events ORDER BY id")]


def test_a_batch_and_its_marker_are_written(db_url):
    sink = TransactionalSink(db_url, "events", query_name="q")
    assert sink.write_batch(["id", "payload"], [(1, b"a"), (2, b"b"), (3, None)], 0,
                            {"orders": {"0": 3}}, ddl=events_ddl(db_url))
    assert fetch(db_url, "SELECT id, payload FROM events ORDER BY id") == [
        (1, b"a"), (2, b"b"), (3, None)]
    assert markers(db_url, "q") == [(0, '{"orders": {"0": 3}}', 3)]
    committed_at = fetch(db_url, "SELECT committed_at FROM oncelog_sink_batches")[0][0]
    assert committed_at is not None


def test_a_replayed_batch_id_is_skipped(db_url):
    sink = TransactionalSink(db_url, "events", query_name="q")
    ddl = events_ddl(db_url)
    assert sink.write_batch(["id"], [(1,), (2,)], 0, ddl=ddl) is True
    # Spark re-runs batch 0 after a driver crash: same id, same offsets - nothing is written,
    # even though the rows would not even collide here
    assert sink.write_batch(["id"], [(10,), (11,)], 0, ddl=ddl) is False
    assert sink.write_batch(["id"], [(3,)], 1, ddl=ddl) is True
    assert sink.write_batch(["id"], [(13,)], 1, ddl=ddl) is False
    # Spark re-runs only its last batch: an older id comes from another checkpoint, and
    # without offsets it cannot be checked - refused (it used to be skipped with a warning)
    with pytest.raises(SinkError, match="batch 0 of query 'q' comes after batch 1") as caught:
        sink.write_batch(["id"], [(12,)], 0, ddl=ddl)
    assert "\n" not in str(caught.value)
    assert ids(db_url) == [1, 2, 3]
    assert [(batch_id, count) for batch_id, _, count in markers(db_url, "q")] == [(0, 2), (1, 1)]
    assert sink.last_batch_id() == 1


def test_query_names_keep_separate_batch_ids(db_url):
    ddl = events_ddl(db_url)
    first = TransactionalSink(db_url, "events", query_name="first")
    second = TransactionalSink(db_url, "events", query_name="second")
    assert first.write_batch(["id"], [(1,)], 0, ddl=ddl)
    assert second.write_batch(["id"], [(2,)], 0, ddl=ddl)
    assert not first.write_batch(["id"], [(3,)], 0, ddl=ddl)
    assert ids(db_url) == [1, 2]
    assert first.last_batch_id() == 0 and second.last_batch_id() == 0


def test_a_constraint_violation_mid_batch_leaves_nothing(db_url):
    sink = TransactionalSink(db_url, "events", query_name="q", chunk_size=2)
    ddl = events_ddl(db_url)
    rows = [(1,), (2,), (3,), (1,)]  # the duplicate key arrives in the second chunk
    with pytest.raises(SinkError, match="batch 0 of query 'q'.*rolled back") as caught:
        sink.write_batch(["id"], rows, 0, {"t": {"0": 4}}, ddl=ddl)
    assert "\n" not in str(caught.value)
    assert not table_exists(db_url, "events") or ids(db_url) == []
    assert markers(db_url, "q") == []
    assert sink.last_batch_id() is None and sink.committed_offsets() is None
    # the batch can be written once the bad row is gone
    assert sink.write_batch(["id"], [(1,), (2,), (3,)], 0, {"t": {"0": 4}}, ddl=ddl)
    assert ids(db_url) == [1, 2, 3]
    assert markers(db_url, "q") == [(0, '{"t": {"0": 4}}', 3)]


def test_an_exception_from_the_rows_mid_batch_leaves_nothing(db_url):
    sink = TransactionalSink(db_url, "events", query_name="q", chunk_size=2)
    ddl = events_ddl(db_url)
    sink.write_batch(["id"], [(100,)], 0, ddl=ddl)

    def rows():
        yield from [(1,), (2,), (3,)]  # one chunk reaches the database before the failure
        raise RuntimeError("the executor died")

    with pytest.raises(RuntimeError, match="the executor died"):
        sink.write_batch(["id"], rows(), 1, ddl=ddl)
    assert ids(db_url) == [100]
    assert sink.last_batch_id() == 0
    assert sink.write_batch(["id"], [(1,), (2,), (3,)], 1, ddl=ddl)
    assert ids(db_url) == [1, 2, 3, 100]


def test_a_missing_table_without_ddl_is_a_sink_error(db_url):
    sink = TransactionalSink(db_url, "events")
    with pytest.raises(SinkError, match="table 'events' does not exist"):
        sink.write_batch(["id"], [(1,)], 0)
    assert markers(db_url) == []


def test_readers_on_an_empty_database(db_url):
    sink = TransactionalSink(db_url, "events")
    assert sink.last_batch_id() is None
    assert sink.committed_offsets() is None


def test_end_offsets_accumulate_like_sparks_offset_log(db_url):
    sink = TransactionalSink(db_url, "events", query_name="q")
    ddl = events_ddl(db_url)
    sink.write_batch(["id"], [(1,)], 0, {"orders": {"0": 5, "1": 3}}, ddl=ddl)
    assert sink.committed_offsets() == {"orders": {"0": 5, "1": 3}}
    # batch 1 saw only partition 1 and a new topic; partition 0's position carries over
    sink.write_batch(["id"], [(2,)], 1, {"orders": {"1": 7}, "audit": {"10": 2, "2": 1}},
                     ddl=ddl)
    offsets = sink.committed_offsets()
    assert offsets == {"audit": {"2": 1, "10": 2}, "orders": {"0": 5, "1": 7}}
    assert list(offsets) == ["audit", "orders"]
    assert list(offsets["audit"]) == ["2", "10"]  # partitions sorted as numbers
    assert json.loads(markers(db_url, "q")[1][1]) == offsets
    assert sink.last_batch_id() == 1


def test_without_offsets_the_marker_has_none(db_url):
    sink = TransactionalSink(db_url, "events")
    sink.write_batch(["id"], [(1,)], 0, ddl=events_ddl(db_url))
    assert markers(db_url) == [(0, None, 1)]
    assert sink.committed_offsets() is None


def test_bytes_round_trip(db_url):
    sink = TransactionalSink(db_url, "events")
    values = [b"", b"\x00\xff\x00", bytearray(b"\x01\x02"), memoryview(b"mv"), bytes(range(256))]
    rows = [(number, value) for number, value in enumerate(values)]
    assert sink.write_batch(["id", "payload"], rows, 0, ddl=events_ddl(db_url))
    stored = fetch(db_url, "SELECT payload FROM events ORDER BY id")
    assert [bytes(row[0]) for row in stored] == [bytes(value) for value in values]


def test_an_empty_batch_still_commits_its_marker(db_url):
    sink = TransactionalSink(db_url, "events")
    assert sink.write_batch(["id"], [], 0, ddl=events_ddl(db_url))
    assert markers(db_url) == [(0, None, 0)]
    assert not sink.write_batch(["id"], [(1,)], 0, ddl=events_ddl(db_url))
    assert ids(db_url) == []


def test_a_sink_pickles_because_it_holds_no_connection(db_url):
    """Spark Connect pickles foreachBatch functions and runs them on the server."""
    sink = TransactionalSink(db_url, "events", query_name="q")
    sink.write_batch(["id"], [(1,)], 0, ddl=events_ddl(db_url))
    copy = pickle.loads(pickle.dumps(sink))
    assert copy.last_batch_id() == 0
    assert not copy.write_batch(["id"], [(2,)], 0)
    assert copy.write_batch(["id"], [(2,)], 1)
    assert ids(db_url) == [1, 2]


def test_a_marker_table_from_before_the_offset_check_gains_its_columns(db_url):
    """Tables written by earlier versions have no spark_batch_id or start_offsets: the next
    batch adds them, and the old markers still say where the query stands."""
    from .tables import is_postgresql
    old_table = ("CREATE TABLE oncelog_sink_batches (query_name TEXT NOT NULL, batch_id BIGINT "
                 "NOT NULL, end_offsets TEXT, row_count BIGINT NOT NULL, committed_at "
                 f"{'TIMESTAMPTZ' if is_postgresql(db_url) else 'TEXT'} NOT NULL, "
                 "PRIMARY KEY (query_name, batch_id))")
    sink = TransactionalSink(db_url, "events", query_name="q")
    ddl = events_ddl(db_url)
    sink.write_batch(["id"], [], 0, ddl=ddl)  # creates events (and today's marker table)
    if is_postgresql(db_url):
        import psycopg
        with psycopg.connect(db_url, autocommit=True) as connection:
            connection.execute("DROP TABLE oncelog_sink_batches")
            connection.execute(old_table)
            connection.execute("INSERT INTO oncelog_sink_batches VALUES "
                               "('q', 4, '{\"t\": {\"0\": 9}}', 9, now())")
    else:
        import sqlite3
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as connection:
            connection.execute("DROP TABLE oncelog_sink_batches")
            connection.execute(old_table)
            connection.execute("INSERT INTO oncelog_sink_batches VALUES "
                               "('q', 4, '{\"t\": {\"0\": 9}}', 9, 'then')")

    assert sink.last_batch_id() == 4 and sink.committed_offsets() == {"t": {"0": 9}}
    # offsets taken from rows: a start past them is no proof of a gap, one before them is
    with pytest.raises(SinkError, match="written again in t-0"):
        sink.write_batch(["id"], [(1,)], 5, {"t": {"0": 12}}, ddl=ddl,
                         start_offsets={"t": {"0": 8}})
    assert sink.write_batch(["id"], [(1,)], 5, {"t": {"0": 12}}, ddl=ddl,
                            start_offsets={"t": {"0": 10}})
    assert fetch(db_url, "SELECT batch_id, spark_batch_id, start_offsets FROM "
                         "oncelog_sink_batches ORDER BY batch_id") == [
        (4, None, None), (5, 5, '{"t": {"0": 10}}')]
    assert ids(db_url) == [1]
