"""``KafkaSink`` on a real local SparkSession and a real broker: each batch and its batch id in
one Kafka transaction; the output read back with a real ``read_committed`` consumer.

The tests taking ``any_spark_broker`` also run on a real Apache Kafka (issue 32's swap path):
the batch id kept in a transactional offset commit's metadata, read back to skip a replay."""

from __future__ import annotations

import json
import time

import pytest

from oncelog.broker.process import BrokerProcess, free_port
from oncelog.client.reader import read_topic
from oncelog.spark.sinks import KafkaSink, SinkError
from oncelog.spark.sinks.kafka import read_marker

from .conftest import new_topic, produce


def committed(bootstrap: str, topic: str) -> list:
    return list(read_topic(bootstrap, topic, isolation_level="read_committed"))


def uncommitted(bootstrap: str, topic: str) -> list:
    return list(read_topic(bootstrap, topic, isolation_level="read_uncommitted"))


def test_a_batch_and_its_replay_are_written_once(spark, any_spark_broker):
    bootstrap = any_spark_broker.bootstrap
    out = new_topic(bootstrap, partitions=3, prefix="kafka-sink-out")
    rows = [(f"k{i}", f"v{i}".encode(), [("trace", b"\x01")]) for i in range(50)]
    df = spark.createDataFrame(
        rows, "key string, value binary, headers array<struct<key: string, value: binary>>"
    ).repartition(3)
    sink = KafkaSink(bootstrap, out, sink_id=out)
    try:
        assert sink.write_batch(df, 0) is True
        assert sink.write_batch(df, 0) is False   # Spark's re-run of batch 0 after a crash
        later = spark.createDataFrame([("k50", b"v50", [])], df.schema)
        sink(later, 1)
        # an older batch id cannot be Spark's re-run (that is always the last batch): it is
        # from another checkpoint, and without offsets it cannot be checked - refused
        with pytest.raises(SinkError, match="batch 0 of sink .* comes after batch 1"):
            sink(df, 0)
    finally:
        sink.close()

    records = committed(bootstrap, out)
    assert sorted(r.value for r in records) == sorted([f"v{i}".encode() for i in range(51)])
    assert {(r.key, r.value) for r in records if r.value == b"v7"} == {(b"k7", b"v7")}
    assert next(r for r in records if r.value == b"v7").headers == [("trace", b"\x01")]
    assert read_marker(bootstrap, out, out) == {"batch_id": 1, "batches": 2, "rows": 51,
                                                "end_offsets": None}
    assert sink.last_batch_id() == 1


def test_a_stream_through_the_sink_holds_every_record_once(spark, any_spark_broker,
                                                           tmp_path):
    bootstrap = any_spark_broker.bootstrap
    source = new_topic(bootstrap, partitions=2, prefix="kafka-sink-in")
    out = new_topic(bootstrap, partitions=2, prefix="kafka-sink-out")
    produce(bootstrap, source, [f"id-{i}".encode() for i in range(300)])
    sink = KafkaSink(bootstrap, out, sink_id=out)  # Kafka is shared: an id of its own
    query = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "100").load()
             .selectExpr("key", "value", "topic", "offset")
             .writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
        sink.close()

    values = sorted(r.value for r in committed(bootstrap, out))
    assert values == sorted(f"id-{i}".encode() for i in range(300))
    marker = read_marker(bootstrap, out, out)
    assert marker["rows"] == 300 and marker["batches"] == marker["batch_id"] + 1 >= 3
    # the source's topic column is ignored (the sink's topic wins, as in Spark's Kafka sink)


def test_a_row_without_a_value_column_is_written_as_json(spark, spark_broker):
    bootstrap = spark_broker.bootstrap
    out = new_topic(bootstrap, prefix="kafka-sink-json")
    df = spark.createDataFrame(
        [("o-1", "c-1", 3, "orders", 0, 41), ("o-2", "c-2", 1, "orders", 1, 7)],
        "order_id string, customer_id string, quantity int, topic string, partition int, "
        "offset long")
    sink = KafkaSink(bootstrap, out, sink_id=out, key_column="customer_id")
    try:
        sink(df, 0)
    finally:
        sink.close()
    records = sorted(committed(bootstrap, out), key=lambda r: r.key)
    assert [r.key for r in records] == [b"c-1", b"c-2"]
    assert json.loads(records[0].value) == {"order_id": "o-1", "customer_id": "c-1",
                                            "quantity": 3, "topic": "orders", "partition": 0,
                                            "offset": 41}
    assert read_marker(bootstrap, out, out)["end_offsets"] == {"orders": {"0": 42, "1": 8}}


def test_a_batch_that_fails_midway_leaves_nothing_visible(spark, spark_broker):
    """Spark fails while the sink iterates the rows: the open transaction is aborted, so
    what was produced before the failure never reaches a read_committed reader."""
    from pyspark.sql import functions as F
    bootstrap = spark_broker.bootstrap
    out = new_topic(bootstrap, prefix="kafka-sink-fail")
    good = spark.range(0, 20, numPartitions=1).select(F.col("id").cast("string").alias("value"))

    @F.udf("string")
    def slow_failure(number):  # time for the first partition's records to reach the log
        time.sleep(1.5)
        raise RuntimeError("boom")

    bad = spark.range(20, 21, numPartitions=1).select(slow_failure("id").alias("value"))
    sink = KafkaSink(bootstrap, out, sink_id=out)
    try:
        with pytest.raises(Exception, match="boom"):
            sink(good.union(bad), 0)
        sink(good, 0)
    finally:
        sink.close()
    assert len(uncommitted(bootstrap, out)) > 20   # the failed batch's records are in the log
    assert sorted(int(r.value) for r in committed(bootstrap, out)) == list(range(20))


def test_a_second_sink_with_the_same_id_fences_the_first(spark, spark_broker):
    """A zombie driver (same sink id, older producer) cannot commit once a new one started."""
    bootstrap = spark_broker.bootstrap
    out = new_topic(bootstrap, prefix="kafka-sink-fence")
    df = spark.createDataFrame([("a",)], "value string")
    zombie, successor = KafkaSink(bootstrap, out, sink_id=out), KafkaSink(bootstrap, out,
                                                                          sink_id=out)
    try:
        zombie(df, 0)
        successor(df, 1)
        with pytest.raises(SinkError, match="batch 2"):
            zombie(df, 2)
    finally:
        zombie.close()
        successor.close()
    assert [r.value for r in committed(bootstrap, out)] == [b"a", b"a"]


def test_a_missing_column_is_one_sentence(spark, spark_broker):
    out = new_topic(spark_broker.bootstrap, prefix="kafka-sink-bad")
    df = spark.createDataFrame([("a", 1)], "name string, n int")
    with pytest.raises(SinkError, match=r"^the value column 'body' is not in the batch "
                                        r"\(its columns: name, n\)\.$"):
        KafkaSink(spark_broker.bootstrap, out, value_column="body")(df, 0)
    with pytest.raises(SinkError, match="key column 'n' must be string or binary, not int"):
        KafkaSink(spark_broker.bootstrap, out, key_column="n")(df, 0)


def test_an_unreachable_bootstrap_is_one_sentence(spark):
    df = spark.createDataFrame([("a",)], "value string")
    sink = KafkaSink(f"127.0.0.1:{free_port()}", "out", timeout_s=3)
    started = time.monotonic()
    with pytest.raises(SinkError, match=r"^cannot reach the broker at 127\.0\.0\.1:\d+: .*\.$"):
        sink(df, 0)
    assert time.monotonic() - started < 15


@pytest.fixture
def strict_broker(tmp_path):
    """A broker that creates no topic on request and allows transactions of 1 s at most."""
    broker = BrokerProcess(tmp_path / "data", log_path=tmp_path / "broker.log",
                           settings={"transaction.max.timeout.ms": "1000",
                                     "auto.create.topics.enable": "false"})
    try:
        yield broker.start()
    finally:
        broker.kill()


def test_a_missing_topic_is_one_sentence(spark, strict_broker):
    """(Where the broker auto-creates topics, the sink's metadata request creates it, as
    with Spark's own Kafka sink.)"""
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(SinkError, match="^cannot write to topic 'no-such-topic' on the broker "
                                        "at .*: .*\\.$"):
        KafkaSink(strict_broker.bootstrap, "no-such-topic", timeout_s=5)(df, 0)


def test_a_broker_that_refuses_transactions_is_one_sentence(spark, strict_broker):
    """A broker whose ``transaction.max.timeout.ms`` is below the sink's transaction timeout
    answers InitProducerId with INVALID_TRANSACTION_TIMEOUT, as Apache Kafka does."""
    out = new_topic(strict_broker.bootstrap, prefix="kafka-sink-notxn")
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(SinkError, match=r"refused to start transactions for "
                                        r"'oncelog-sink-default'"):
        KafkaSink(strict_broker.bootstrap, out, timeout_s=10)(df, 0)


def test_settings_that_would_change_the_guarantee_are_refused():
    with pytest.raises(SinkError, match="sets transactional.id itself"):
        KafkaSink("127.0.0.1:9092", "out", producer_config={"transactional.id": "mine"})
    with pytest.raises(SinkError, match="sink_id must be a non-empty string"):
        KafkaSink("127.0.0.1:9092", "out", sink_id="")


def test_the_sink_pickles_without_its_clients(spark, spark_broker):
    import pickle
    out = new_topic(spark_broker.bootstrap, prefix="kafka-sink-pickle")
    sink = KafkaSink(spark_broker.bootstrap, out, sink_id=out)
    try:
        sink(spark.createDataFrame([("a",)], "value string"), 0)
        copy = pickle.loads(pickle.dumps(sink))
        assert copy._producer is None and copy.last_batch_id() == 0
    finally:
        sink.close()

