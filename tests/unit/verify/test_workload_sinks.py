"""The verifier's sinks read back as Delivered records: one per row, positions that grow
across the whole run, ids decoded from the record values; and the progress tally counts
only complete history lines."""

from __future__ import annotations

import sqlite3

import pytest

from oncelog.verify.checker import check
from oncelog.verify.history import History, HistoryWriter, encode_value
from oncelog.verify.progress import HistoryTally
from oncelog.verify.workloads.sinks import (DeliveriesTable, PipelineTable, SinkUnavailable,
                                            remove_sink_files)


def test_consumer_sink_rows_become_delivered_records_in_position_order(tmp_path):
    table = DeliveriesTable(tmp_path / "sink.db")
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


def test_pipeline_sink_reads_the_transactional_sink_table(tmp_path):
    path = tmp_path / "sink.db"
    db = sqlite3.connect(path)
    db.execute('CREATE TABLE "records" ("key" TEXT, "value" TEXT, "topic" TEXT, '
               '"partition" INTEGER, "offset" INTEGER)')
    db.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?)",
                   [(None, encode_value(f"p0-{n:06d}").decode(), "t", n % 2, n // 2)
                    for n in range(5)])
    db.commit()
    db.close()
    table = PipelineTable(path)
    assert table.url == f"sqlite:///{path}"
    assert table.ends() == {0: 3, 1: 2}
    rows = list(table.delivered())
    assert [row[:2] for row in rows] == [(n + 1, f"p0-{n:06d}") for n in range(5)]


def test_a_missing_sink_reads_as_empty_and_a_directory_cannot_be_one(tmp_path):
    assert PipelineTable(tmp_path / "absent.db").count() == 0
    assert DeliveriesTable(tmp_path / "absent.db").ends() == {}
    (tmp_path / "sink.db").mkdir()
    with pytest.raises(SinkUnavailable, match="is a directory"):
        remove_sink_files(tmp_path / "sink.db")


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
