"""The verifier's sinks read back as Delivered records: one per row, positions that grow
across the whole run, ids decoded from the record values - on SQLite and on a real
PostgreSQL server - and the progress tally counts only complete history lines."""

from __future__ import annotations

import pytest

from oncelog.spark.sinks import TransactionalSink
from oncelog.verify.checker import check
from oncelog.verify.history import History, HistoryWriter, encode_value
from oncelog.verify.progress import HistoryTally
from oncelog.verify.workloads.sinks import (DeliveriesTable, PipelineTable, ReadTable,
                                            ReadWriter, SinkUnavailable, remove_sink_files,
                                            sqlite_url)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "sink.db")
    return request.getfixturevalue("postgres_url")


def test_the_readers_positions_commit_with_its_rows_and_are_its_ends(tmp_path, db_url):
    """The exactly-once reader's sink: a batch's rows and the positions reached go in one
    transaction; a position may run past the last row (the markers at a partition's end),
    and ends() are the positions, which is what the drain waits for."""
    table = ReadTable(db_url, "oncelog_verify_transactional")
    table.drop()
    table.create()
    writer = ReadWriter(db_url, table.table)
    assert writer.positions() == {}
    writer.write([(encode_value("p0-000000"), "t", 0, 0), (encode_value("p0-000001"), "t", 1, 0)],
                 {0: 1, 1: 1})
    writer.write([], {0: 3})                     # end of partition 0 after two markers
    writer.write([(encode_value("p0-000002"), "t", 0, 3)], {0: 4})
    assert writer.positions() == table.ends() == {0: 4, 1: 1}
    writer.close()
    assert [row[1] for row in table.delivered()] == ["p0-000000", "p0-000001", "p0-000002"]
    table.drop()
    assert table.ends() == {} and table.count() == 0


def test_consumer_sink_rows_become_delivered_records_in_position_order(tmp_path, db_url):
    table = DeliveriesTable(db_url, "oncelog_verify_at_least_once")
    table.create()
    writer = table.writer()
    writer.insert(encode_value("p0-000000"), "t", 0, 0)
    writer.insert(encode_value("p0-000001"), "t", 1, 0)
    writer.insert(encode_value("p0-000000"), "t", 0, 0)  # processed again after a crash
    writer.insert(b"garbage", "t", 2, 7)
    writer.close()
    assert table.count() == 4 and table.ends() == {0: 1, 1: 1, 2: 8}
    with HistoryWriter(tmp_path / "history" / "sink.jsonl") as history:
        assert table.scan(history) == 4
    delivered = History.load(tmp_path / "history").delivered
    assert [(d.id, d.partition, d.position) for d in delivered] == [
        ("p0-000000", 0, 1), ("p0-000001", 1, 2), ("p0-000000", 0, 3),
        ("undecodable@t-2-7", 2, 4)]
    result = check(History.load(tmp_path / "history"), "at-least-once")
    assert result.unexpected["undecodable@t-2-7"] == 1  # never produced: unexpected

    # a new run drops the table: positions and rows start again
    table.drop()
    assert table.count() == 0
    table.create()
    writer = table.writer()
    writer.insert(encode_value("p0-000009"), "t", 0, 9)
    writer.close()
    assert [row[:2] for row in table.delivered()] == [(1, "p0-000009")]


def test_pipeline_sink_reads_what_the_transactional_sink_wrote(db_url):
    """The table is created with its position column before the copy job starts; the
    TransactionalSink then inserts by column name, and a replayed batch adds nothing."""
    table = PipelineTable(db_url, "oncelog_verify_exactly_once")
    table.create()
    sink = TransactionalSink(db_url, table.table, query_name="verify-test")
    columns = ["key", "value", "topic", "partition", "offset"]
    rows = [(None, encode_value(f"p0-{n:06d}").decode(), "t", n % 2, n // 2) for n in range(5)]
    assert sink.write_batch(columns, rows[:3], 0)
    assert not sink.write_batch(columns, rows[:3], 0)     # re-run after a crash: skipped
    assert sink.write_batch(columns, rows[3:], 1)
    assert table.ends() == {0: 3, 1: 2} and table.count() == 5
    assert [row[:2] for row in table.delivered()] == [(n + 1, f"p0-{n:06d}") for n in range(5)]


def test_a_missing_sink_reads_as_empty_and_a_directory_cannot_be_one(tmp_path):
    assert PipelineTable(sqlite_url(tmp_path / "absent.db")).count() == 0
    assert DeliveriesTable(sqlite_url(tmp_path / "absent.db")).ends() == {}
    assert not (tmp_path / "absent.db").exists()         # reading created nothing
    (tmp_path / "sink.db").mkdir()
    with pytest.raises(SinkUnavailable, match="is a directory"):
        remove_sink_files(tmp_path / "sink.db")


def test_sinks_that_cannot_be_opened_are_one_sentence(tmp_path):
    from oncelog.broker.process import free_port
    with pytest.raises(SinkUnavailable, match="unsupported database URL"):
        DeliveriesTable("mysql://host/db")
    with pytest.raises(SinkUnavailable, match="cannot open the sink: cannot connect"):
        PipelineTable(f"postgresql://nobody@127.0.0.1:{free_port()}/x").create()
    (tmp_path / "not-a-db.db").write_bytes(b"this is no SQLite file" * 100)
    with pytest.raises(SinkUnavailable, match="cannot open the sink"):
        DeliveriesTable(sqlite_url(tmp_path / "not-a-db.db")).create()


def test_a_statement_the_database_refuses_is_one_sentence_not_a_traceback(db_url):
    """A run's --sink table name is taken by a view: clearing it fails, as one sentence."""
    from oncelog.spark.sinks import open_database
    with open_database(db_url) as db:
        db.execute("CREATE VIEW oncelog_verify_at_most_once AS SELECT 1 AS one")
    with pytest.raises(SinkUnavailable, match="clearing the sink .* failed"):
        DeliveriesTable(db_url, "oncelog_verify_at_most_once").drop()


def test_history_tally_counts_complete_lines_only_and_reads_each_byte_once(tmp_path):
    path = tmp_path / "producer-0.jsonl"
    tally = HistoryTally([path, tmp_path / "not-yet.jsonl"])
    assert tally.update() == {}
    writer = HistoryWriter(path)
    writer.produced("p0-000000", "p0", 0, 0)
    writer.produced("p0-000001", "p0", 1, 1)
    writer.acknowledged("p0-000000", "t", 0, 0)
    with open(path, "ab") as file:
        file.write(b'{"type":"failed","id":"p0-0')  # a line still being written
    assert tally.update() == {"produced": 2, "acknowledged": 1}
    with open(path, "ab") as file:
        file.write(b'00001","error":"x","time":1.0}\n')
    assert tally.update() == {"produced": 2, "acknowledged": 1, "failed": 1}
    writer.close()
