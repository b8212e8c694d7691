"""The ``oncelog`` format on a real local SparkSession, reading a real broker process.

The tests taking ``any_spark_broker`` run twice: on oncelog's broker and on a real Apache
Kafka (issue 32's swap path: the source reads any Kafka-protocol broker the same way)."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from pyspark.errors import PySparkException
from py4j.protocol import Py4JJavaError

from oncelog.client.reader import read_topic

from .conftest import new_topic, produce


def batch(spark, bootstrap, **options):
    reader = spark.read.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
    return reader.options(**options).load()


def stream(spark, bootstrap, **options):
    reader = spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
    return reader.options(**options).load()


def offsets_of(rows) -> list[tuple[str, int, int]]:
    return sorted((r.topic, r.partition, r.offset) for r in rows)


def run_available_now(df, checkpoint):
    """Run a query to what is available now; return (rows, progress). foreachBatch, unlike
    the memory sink, can restart from a checkpoint."""
    rows = []
    query = (df.writeStream.foreachBatch(lambda batch_df, _: rows.extend(batch_df.collect()))
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    return rows, query.recentProgress


def test_batch_read_has_sparks_kafka_schema_and_every_record(spark, any_spark_broker):
    bootstrap = any_spark_broker.bootstrap
    topic = new_topic(bootstrap, partitions=3)
    now = int(time.time() * 1000) - 60_000   # within retention: old records would be deleted
    for partition in range(3):
        produce(bootstrap, topic, [f"{partition}-{i}".encode() for i in range(50)],
                partition=partition, key=b"k", headers=[("trace", b"abc")],
                timestamp=now + partition)

    df = batch(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>")
    rows = df.collect()
    assert offsets_of(rows) == [(topic, p, o) for p in range(3) for o in range(50)]
    by_place = {(r.partition, r.offset): r for r in rows}
    row = by_place[(2, 7)]
    assert row.value == b"2-7" and row.key == b"k"
    assert row.timestampType == 0
    assert int(row.timestamp.timestamp() * 1000) == now + 2
    assert [(h.key, h.value) for h in row.headers] == [("trace", b"abc")]
    # without includeHeaders the column is absent, as in Spark's source
    assert "headers" not in batch(spark, bootstrap, subscribe=topic).columns


def test_batch_starting_and_ending_offsets(spark, any_spark_broker):
    bootstrap = any_spark_broker.bootstrap
    topic = new_topic(bootstrap, partitions=2)
    for partition in range(2):
        produce(bootstrap, topic, [b"x"] * 100, partition=partition)

    rows = batch(spark, bootstrap, subscribe=topic,
                 startingOffsets=f'{{"{topic}": {{"0": 10, "1": -2}}}}',
                 endingOffsets=f'{{"{topic}": {{"0": 20, "1": -1}}}}').collect()
    assert offsets_of(rows) == ([(topic, 0, o) for o in range(10, 20)]
                                + [(topic, 1, o) for o in range(100)])
    # minPartitions splits one partition's range into several Spark partitions
    df = batch(spark, bootstrap, subscribe=topic, minPartitions="8")
    assert df.rdd.getNumPartitions() >= 8
    assert df.count() == 200


def test_starting_timestamps(spark, any_spark_broker):
    bootstrap = any_spark_broker.bootstrap
    topic = new_topic(bootstrap, partitions=2)
    base = int(time.time() * 1000) - 600_000
    for i in range(20):
        produce(bootstrap, topic, [f"{i}".encode()], partition=i % 2, timestamp=base + i * 1000)

    rows = batch(spark, bootstrap, subscribe=topic, startingTimestamp=str(base + 10_000)).collect()
    assert sorted(int(r.value) for r in rows) == list(range(10, 20))
    rows = batch(spark, bootstrap, subscribe=topic, startingOffsetsByTimestamp=(
        f'{{"{topic}": {{"0": {base + 16_000}, "1": {base}}}}}')).collect()
    assert sorted(int(r.value) for r in rows) == [1, 3, 5, 7, 9, 11, 13, 15, 16, 17, 18, 19]

    late = str(base + 60_000)
    with pytest.raises((PySparkException, Py4JJavaError), match="no record at or after"):
        batch(spark, bootstrap, subscribe=topic, startingTimestamp=late).collect()
    assert batch(spark, bootstrap, subscribe=topic, startingTimestamp=late,
                 startingOffsetsByTimestampStrategy="latest").count() == 0


def test_subscribe_pattern_several_topics_and_assign(spark, any_spark_broker):
    bootstrap = any_spark_broker.bootstrap
    prefix = f"orders{uuid.uuid4().hex[:6]}x"
    first = new_topic(bootstrap, partitions=2, prefix=prefix)
    second = new_topic(bootstrap, partitions=1, prefix=prefix)
    other = new_topic(bootstrap, partitions=1)
    for topic in (first, second, other):
        produce(bootstrap, topic, [topic.encode()] * 10)

    by_pattern = batch(spark, bootstrap, subscribePattern=f"{prefix}.*").collect()
    assert {r.topic for r in by_pattern} == {first, second} and len(by_pattern) == 20
    listed = batch(spark, bootstrap, subscribe=f"{first},{other}").collect()
    assert {r.topic for r in listed} == {first, other} and len(listed) == 20
    assigned = batch(spark, bootstrap, assign=f'{{"{second}": [0], "{other}": [0]}}').collect()
    assert {(r.topic, r.partition) for r in assigned} == {(second, 0), (other, 0)}
    assert len(assigned) == 20


def test_stream_respects_max_offsets_per_trigger_under_available_now(spark, any_spark_broker,
                                                                      tmp_path):
    bootstrap = any_spark_broker.bootstrap
    topic = new_topic(bootstrap, partitions=3)
    produce(bootstrap, topic, [str(i).encode() for i in range(1000)])
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                maxOffsetsPerTrigger="300")

    rows, progress = run_available_now(df, tmp_path / "checkpoint")
    sizes = [p["numInputRows"] for p in progress if p["numInputRows"]]
    assert sum(sizes) == 1000 and max(sizes) <= 300 and len(sizes) >= 4
    assert sorted(int(r.value) for r in rows) == list(range(1000))
    # each batch's progress reports where the topic ended (reportLatestOffset), not the
    # batch's capped end: 1,000 records in all three partitions together
    for report in progress:
        latest = report["sources"][0]["latestOffset"]
        latest = json.loads(latest) if isinstance(latest, str) else latest
        assert sum(latest[topic].values()) == 1000, report

    # A second run on the same checkpoint reads only what came since: nothing twice.
    produce(bootstrap, topic, [str(i).encode() for i in range(1000, 1100)])
    rows, _ = run_available_now(df, tmp_path / "checkpoint")
    assert sorted(int(r.value) for r in rows) == list(range(1000, 1100))


def test_stream_starts_at_latest_by_default_and_reads_new_partitions(spark, any_spark_broker,
                                                                     tmp_path):
    bootstrap = any_spark_broker.bootstrap
    topic = new_topic(bootstrap, partitions=1)
    produce(bootstrap, topic, [b"before"] * 5)
    name = f"q{uuid.uuid4().hex[:8]}"
    query = (stream(spark, bootstrap, subscribe=topic).writeStream.format("memory")
             .queryName(name).option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        query.processAllAvailable()
        produce(bootstrap, topic, [b"after"] * 5)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(15)
        for partition in (1, 2):
            produce(bootstrap, topic, [f"new-{partition}".encode()] * 3, partition=partition)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            query.processAllAvailable()
            rows = spark.table(name).collect()
            if len(rows) >= 11:
                break
            time.sleep(0.5)
    finally:
        query.stop()
    values = sorted(r.value for r in rows)
    assert values == [b"after"] * 5 + [b"new-1"] * 3 + [b"new-2"] * 3


def test_compaction_gaps_are_skipped_not_waited_for(spark, spark_broker):
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, config={"cleanup.policy": "compact", "segment.bytes": "1024"})
    for round_ in range(40):
        produce(bootstrap, topic, [f"{round_}".encode().ljust(100)], key=f"k{round_ % 3}".encode())
    deadline = time.monotonic() + 30
    previous = None
    while time.monotonic() < deadline:
        survivors = [r.offset for r in read_topic(bootstrap, topic)]
        if len(survivors) < 30 and survivors == previous:
            break        # compacted, and no pass has changed it for a second
        previous = survivors
        time.sleep(1)
    assert len(survivors) < 30, "the broker never compacted the topic"
    started = time.monotonic()
    rows = batch(spark, bootstrap, subscribe=topic).collect()
    assert [r.offset for r in sorted(rows, key=lambda r: r.offset)] == survivors
    assert survivors[-1] == 39 and time.monotonic() - started < 30


def test_records_removed_by_retention_follow_fail_on_data_loss(spark, spark_broker):
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, config={"segment.bytes": "2048", "retention.bytes": "4096"})
    for i in range(60):
        produce(bootstrap, topic, [f"{i:04d}".encode() * 50])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        low = min(r.offset for r in read_topic(bootstrap, topic))
        if low > 0:
            break
        time.sleep(0.3)
    assert low > 0
    from_zero = f'{{"{topic}": {{"0": 0}}}}'
    with pytest.raises((PySparkException, Py4JJavaError), match="failOnDataLoss"):
        batch(spark, bootstrap, subscribe=topic, startingOffsets=from_zero).collect()
    rows = batch(spark, bootstrap, subscribe=topic, startingOffsets=from_zero,
                 failOnDataLoss="false").collect()
    offsets = sorted(r.offset for r in rows)
    # retention may have moved on since `low` was seen: what is read is the log as it is now
    assert offsets[0] >= low and offsets == list(range(offsets[0], 60))


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "{topic}", "kafka.bootstrap.servers": ""},
     "option kafka.bootstrap.servers is required"),
    ({"subscribe": "{topic}", "startingOffsets": "{{nope"},
     "option startingOffsets is not valid JSON"),
    ({"subscribe": "{topic}", "startingOffsets": "first"},
     "option startingOffsets must be earliest, latest or JSON"),
    ({"subscribe": "missing-{topic}"}, "topic missing-{topic} does not exist"),
    ({"subscribe": "{topic}", "assign": '{{"{topic}": [0]}}'}, "give exactly one of"),
    ({}, "give exactly one of the options subscribe, subscribePattern or assign"),
    ({"subscribe": "{topic}", "kafka.auto.offset.reset": "earliest"},
     "kafka.auto.offset.reset is not supported"),
    ({"subscribe": "{topic}", "kafka.isolation.level": "dirty"},
     "kafka.isolation.level must be one of"),
    ({"subscribe": "{topic}", "startingOffset": "earliest"}, "unknown option 'startingoffset'"),
    ({"subscribe": "{topic}", "maxOffsetsPerTrigger": "-5"},
     "maxOffsetsPerTrigger must be a positive integer"),
    ({"subscribePattern": "(unclosed"}, "not a valid regular expression"),
    ({"subscribe": "{topic}", "kafka.no.such.setting": "1"}, "not accepted by the client"),
])
def test_bad_options_fail_at_load_with_one_clear_sentence(spark, spark_broker, options, message):
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap)
    options = {name: value.format(topic=topic) for name, value in options.items()}
    options.setdefault("kafka.bootstrap.servers", bootstrap)
    with pytest.raises(PySparkException) as raised:
        spark.readStream.format("oncelog").options(**options).load()
    assert message.format(topic=topic) in str(raised.value)


def test_missing_topic_is_waited_for_when_fail_on_data_loss_is_false(spark, spark_broker,
                                                                     tmp_path):
    """With failOnDataLoss=false a query on a topic that does not exist yet starts, runs
    empty batches without creating the topic, and reads it from offset 0 once it exists."""
    bootstrap = spark_broker.bootstrap
    topic = f"not-yet-{uuid.uuid4().hex[:8]}"
    df = stream(spark, bootstrap, subscribe=topic, failOnDataLoss="false")
    name = f"q{uuid.uuid4().hex[:8]}"
    query = (df.writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        query.processAllAvailable()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert topic not in admin.list_topics(timeout=10).topics   # never auto-created
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
        for partition in (0, 1):
            produce(bootstrap, topic, [f"p{partition}".encode()] * 4, partition=partition)
        deadline = time.monotonic() + 60
        rows = []
        while time.monotonic() < deadline and len(rows) < 8:
            query.processAllAvailable()
            rows = spark.table(name).collect()
            time.sleep(0.5)
        assert query.exception() is None
    finally:
        query.stop()
    assert offsets_of(rows) == [(topic, p, o) for p in (0, 1) for o in range(4)]


def test_unreachable_broker_fails_at_load(spark):
    from oncelog.broker.process import free_port
    started = time.monotonic()
    with pytest.raises(PySparkException, match="cannot reach a broker at 127.0.0.1"):
        stream(spark, f"127.0.0.1:{free_port()}", subscribe="t",
               **{"kafkaConsumer.pollTimeoutMs": "2000"})
    assert time.monotonic() - started < 30
