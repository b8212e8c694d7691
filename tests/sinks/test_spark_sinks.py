"""The database sinks as foreachBatch functions of a real local SparkSession."""

from __future__ import annotations

import datetime
import json
import os
import time
from decimal import Decimal

import pytest

from oncelog.spark.sinks import SinkError, TransactionalSink, UpsertSink

from .tables import fetch, is_postgresql, markers

UTC = datetime.UTC
KAFKA_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
                "timestamp timestamp, timestampType int, "
                "headers array<struct<key: string, value: binary>>")


@pytest.fixture
def driver_in_kolkata(monkeypatch):
    """PySpark returns timestamps as naive datetimes in the driver's local zone; a zone that
    is not UTC makes a sink that stored them as they come write the wrong instant."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def kafka_rows(topic: str, partition: int, offsets, when: datetime.datetime) -> list[tuple]:
    return [(f"k{offset}".encode(), bytes([offset % 256, 0, 255]), topic, partition, offset,
             when, 0, [("trace", b"\x00\x01")]) for offset in offsets]


def test_transactional_sink_writes_a_kafka_batch_once(spark, db_url, driver_in_kolkata):
    when = datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    rows = (kafka_rows("orders", 0, [0, 1, 2], when) + kafka_rows("orders", 1, [10], when)
            + kafka_rows("audit", 0, [4], when))
    df = spark.createDataFrame(rows, KAFKA_SCHEMA).repartition(2)
    sink = TransactionalSink(db_url, "events", query_name="kafka")

    sink(df, 0)
    sink(df, 0)  # the re-run of batch 0 after a crash
    stored = fetch(db_url, 'SELECT topic, "partition", "offset", key, value, "timestamp", '
                           '"timestampType", headers FROM events '
                           'ORDER BY topic, "partition", "offset"')
    assert [(topic, partition, offset) for topic, partition, offset, *_ in stored] == [
        ("audit", 0, 4), ("orders", 0, 0), ("orders", 0, 1), ("orders", 0, 2), ("orders", 1, 10)]
    topic, partition, offset, key, value, timestamp, timestamp_type, headers = stored[1]
    assert (key, value, timestamp_type) == (b"k0", b"\x00\x00\xff", 0)
    if is_postgresql(db_url):
        assert timestamp == when  # TIMESTAMPTZ: the same instant
        assert headers == [{"key": "trace", "value": "AAE="}]  # JSONB, bytes as base64
    else:
        assert timestamp == "2024-01-02T03:04:05.123456+00:00"
        assert json.loads(headers) == [{"key": "trace", "value": "AAE="}]
    expected_offsets = {"audit": {"0": 5}, "orders": {"0": 3, "1": 11}}
    assert sink.committed_offsets() == expected_offsets
    assert [(batch_id, count) for batch_id, _, count in markers(db_url, "kafka")] == [(0, 5)]

    later = spark.createDataFrame(kafka_rows("orders", 0, [3, 4], when), KAFKA_SCHEMA)
    sink(later, 1)
    assert fetch(db_url, "SELECT count(*) FROM events")[0][0] == 7
    assert sink.last_batch_id() == 1
    assert sink.committed_offsets() == {"audit": {"0": 5}, "orders": {"0": 5, "1": 11}}


def test_spark_types_become_sql_types(spark, db_url):
    schema = ("s string, b binary, tiny byte, small short, i int, l long, f float, d double, "
              "flag boolean, ts timestamp, ntz timestamp_ntz, day date, money decimal(10, 2), "
              "numbers array<int>, counts map<string, int>, point struct<x: int, tag: binary>")
    ts = datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    ntz = datetime.datetime(2024, 5, 6, 7, 8, 9)
    row = ("text", b"\x00\xff", 7, 300, 70000, 2**40, 1.5, 2.25, True, ts, ntz,
           datetime.date(2024, 5, 6), Decimal("12.34"), [1, 2], {"a": 1}, (3, b"\x01"))
    nulls = tuple([None] * len(row))
    df = spark.createDataFrame([row, nulls], schema)
    TransactionalSink(db_url, "typed")(df, 0)

    stored = fetch(db_url, "SELECT * FROM typed ORDER BY s NULLS LAST" if is_postgresql(db_url)
                   else "SELECT * FROM typed ORDER BY s IS NULL, s")
    assert stored[1] == nulls
    first = stored[0]
    assert first[:9] == ("text", b"\x00\xff", 7, 300, 70000, 2**40, 1.5, 2.25, True)
    if is_postgresql(db_url):
        assert first[9:] == (ts, ntz, datetime.date(2024, 5, 6), Decimal("12.34"), [1, 2],
                             {"a": 1}, {"x": 3, "tag": "AQ=="})
        types = dict(fetch(db_url, "SELECT column_name, data_type FROM information_schema.columns "
                                   "WHERE table_name = 'typed'"))
        assert (types["l"], types["ts"], types["ntz"], types["money"], types["numbers"]) == (
            "bigint", "timestamp with time zone", "timestamp without time zone", "numeric",
            "jsonb")
    else:
        assert first[9:] == ("2024-05-06T07:08:09+00:00", "2024-05-06T07:08:09", "2024-05-06",
                             "12.34", "[1,2]", '{"a":1}', '{"x":3,"tag":"AQ=="}')


def test_a_spark_failure_mid_batch_leaves_nothing(spark, db_url):
    from pyspark.sql import functions as F

    ids = spark.range(0, 2000, numPartitions=2)
    # partition 0 (ids 0..999) reaches the database in chunks before partition 1 fails
    failing = ids.select(F.when(F.col("id") == 1500, F.raise_error(F.lit("row 1500 is bad")))
                         .otherwise(F.col("id")).alias("id"))
    sink = TransactionalSink(db_url, "numbers", query_name="q", chunk_size=100)
    with pytest.raises(Exception, match="row 1500 is bad") as caught:
        sink(failing, 0)
    assert not isinstance(caught.value, SinkError)
    assert markers(db_url, "q") == []
    tables = fetch(db_url, "SELECT count(*) FROM information_schema.tables WHERE table_name = "
                           "'numbers'" if is_postgresql(db_url) else
                   "SELECT count(*) FROM sqlite_master WHERE name = 'numbers'")
    assert tables == [(0,)]  # even the CREATE TABLE of the failed batch was rolled back

    sink(ids, 0)
    assert fetch(db_url, "SELECT count(*), min(id), max(id) FROM numbers") == [(2000, 0, 1999)]
    assert markers(db_url, "q") == [(0, None, 2000)]


def test_upsert_sink_replays_to_the_same_table(spark, db_url):
    rows = [("eu", 1, 10, b"a"), ("eu", 2, 20, None), ("eu", 1, 11, b"b"), ("us", 1, 30, None)]
    df = spark.createDataFrame(rows, "region string, id long, balance long, note binary")
    sink = UpsertSink(db_url, "accounts", ["region", "id"])
    sink(df.coalesce(1), 0)  # one partition: rows reach the sink in this order
    sink(df.coalesce(1), 0)
    expected = [("eu", 1, 11, b"b"), ("eu", 2, 20, None), ("us", 1, 30, None)]
    sql = "SELECT region, id, balance, note FROM accounts ORDER BY region, id"
    assert fetch(db_url, sql) == expected
    sink(spark.createDataFrame([("us", 1, 31, b"c")], df.schema), 1)
    assert fetch(db_url, sql)[-1] == ("us", 1, 31, b"c")


def test_upsert_sink_needs_its_keys_in_the_dataframe(spark, tmp_path):
    df = spark.createDataFrame([(1,)], "other long")
    with pytest.raises(SinkError, match="'id'"):
        UpsertSink(f"sqlite:///{tmp_path}/x.db", "accounts", ["id"])(df, 0)


def test_columns_spark_names_badly_are_refused(spark, tmp_path):
    df = spark.range(3).selectExpr("count(id)")
    with pytest.raises(SinkError, match="not a simple SQL identifier"):
        TransactionalSink(f"sqlite:///{tmp_path}/x.db", "counts")(df, 0)


def drop_commit(checkpoint, batch_id: int) -> None:
    """Forget that Spark finished ``batch_id``: as if the driver died before committing it."""
    for name in (str(batch_id), f".{batch_id}.crc"):
        os.remove(os.path.join(checkpoint, "commits", name))


@pytest.mark.slow
def test_a_streaming_query_replays_a_batch_and_the_sink_skips_it(spark, db_url, tmp_path):
    sink = TransactionalSink(db_url, "ticks", query_name="rate")
    calls: list[int] = []

    def write(batch_df, batch_id):
        calls.append(batch_id)
        sink(batch_df, batch_id)

    checkpoint = str(tmp_path / "checkpoint")

    def run_available_now() -> None:
        stream = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5)
                  .option("numPartitions", 2).load())
        query = (stream.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        try:
            assert query.awaitTermination(60)
            assert query.exception() is None
        finally:
            query.stop()

    run_available_now()  # batch 0: values 0-4
    run_available_now()  # batch 1: values 5-9
    drop_commit(checkpoint, 1)
    # Spark re-runs batch 1 over the same offsets (the sink skips it), then goes on: batch 2
    run_available_now()
    assert calls == [0, 1, 1, 2]
    values = [row[0] for row in fetch(db_url, "SELECT value FROM ticks ORDER BY value")]
    assert values == list(range(15))
    assert [(batch_id, count) for batch_id, _, count in markers(db_url, "rate")] == [
        (0, 5), (1, 5), (2, 5)]
    assert sink.last_batch_id() == 2
    assert sink.committed_offsets() is None  # the rate source has no Kafka columns
