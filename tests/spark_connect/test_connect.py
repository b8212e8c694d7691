"""The source and the exactly-once sinks through Spark Connect (issue 15): a real Connect
server started from the PySpark installation, a plain ``SparkSession.builder.remote(...)``
client, a real broker.

Over Connect the source and the sinks run on the server: the source's planning in the
server's Python data source workers, ``foreachBatch`` in the server's foreachBatch worker
(a Connect client of its own, with no JVM to look into). So the sinks cannot read the offsets
Spark planned for a batch (``positions.planned_offsets``): they store the rows' offsets
(``start_offsets`` stays empty) and decide from where the rows lie (``positions``, rule 4).
These tests pin that, and that a replayed batch, a new checkpoint and
``startingOffsetsFromSink`` still hold every record once (docs/compatibility.md,
"Spark Connect").
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition

from oncelog.client.reader import read_topic
from oncelog.spark.sinks import KafkaSink, TransactionalSink
from oncelog.spark.sinks.kafka import read_marker

from ..sinks.tables import fetch
from ..spark.conftest import new_topic, produce


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[str, dict[str, int]]:
    """Each partition's high watermark, asked of the broker (not of Spark or the sink)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "connect-tests"})
    try:
        return {topic: {str(partition): consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=10)[1] for partition in range(partitions)}}
    finally:
        consumer.close()


def produce_ids(bootstrap: str, topic: str, first: int, last: int, partitions: int) -> None:
    """``id-first`` .. ``id-(last-1)``, round robin over every partition: the sinks' stored
    offsets name only partitions their rows came from, so a partition left empty (librdkafka's
    sticky partitioner may put a few hundred small records all in one) is not in them."""
    for partition in range(partitions):
        produce(bootstrap, topic, [f"id-{number}".encode()
                                   for number in range(first + partition, last, partitions)],
                partition=partition)


def run(spark, bootstrap: str, topic: str, sink, checkpoint, *, columns=None,
        options: dict | None = None) -> None:
    """One Trigger.AvailableNow run of topic -> sink through Connect; a failed query raises."""
    reader = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "100").options(**(options or {})))
    records = reader.load().selectExpr(*(columns or ["CAST(value AS STRING) AS value",
                                                     "topic", "partition", "offset"]))
    query = start(records.writeStream.foreachBatch(sink)
                  .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True))
    try:
        assert query.awaitTermination(180), "the query did not finish in 180 s"
    finally:
        query.stop()


def start(writer):
    """``writer.start()``, again if the server's foreachBatch worker did not connect back.

    Spark gives a Python worker it starts 10 s to connect back, and Connect's foreachBatch
    worker imports PySpark's Connect client (pandas, pyarrow, grpc) first: on a machine
    running several Spark JVMs on two cores that took longer (seen twice in a row, at load
    17). A start that failed ran no batch, so starting again changes nothing else."""
    for attempt in range(3):
        try:
            return writer.start()
        except Exception as error:
            if "failed to connect back" not in str(error) or attempt == 2:
                raise


def forget_last_commit(checkpoint) -> int:
    """What a driver killed after the sink committed a batch but before Spark's commit log
    recorded it leaves behind: the restarted query runs that batch again, same id, same
    offsets. Returns the batch id."""
    last = max(int(path.name) for path in (checkpoint / "commits").iterdir()
               if path.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    return last


def values(url: str) -> list[str]:
    return sorted(value for (value,) in fetch(url, "SELECT value FROM events"))


def markers(url: str, query_name: str) -> list[tuple]:
    return fetch(url, "SELECT batch_id, spark_batch_id, row_count, end_offsets, start_offsets "
                      f"FROM oncelog_sink_batches WHERE query_name = '{query_name}' "
                      "ORDER BY batch_id")


def ids(first: int, last: int) -> list[str]:
    return sorted(f"id-{number}" for number in range(first, last))


def test_a_batch_read_returns_every_record(connect_spark, connect_broker):
    bootstrap = connect_broker.bootstrap
    topic = new_topic(bootstrap, partitions=3, prefix="connect-read")
    expected = set()
    for partition in range(3):
        values_in = [f"p{partition}-{number}".encode() for number in range(40 + partition)]
        produce(bootstrap, topic, values_in, partition=partition,
                key=f"k{partition}".encode(), headers=[("trace", b"\x01")])
        expected |= {(partition, offset, f"k{partition}".encode(), value)
                     for offset, value in enumerate(values_in)}

    rows = (connect_spark.read.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("includeHeaders", "true").load().collect())

    assert len(rows) == len(expected) == 123
    assert {(row.partition, row.offset, bytes(row.key), bytes(row.value))
            for row in rows} == expected
    assert {row.topic for row in rows} == {topic}
    assert all([(header.key, bytes(header.value)) for header in row.headers]
               == [("trace", b"\x01")] for row in rows)


def test_a_stream_into_the_transactional_sink_and_its_restart_hold_every_record_once(
        connect_spark, connect_broker, tmp_path):
    """Three batches of 100 into SQLite through foreachBatch on the server; then the last
    batch's commit is forgotten (a driver killed between the sink's commit and Spark's) and
    the query restarts from its checkpoint: Spark runs that batch again, the sink skips it,
    and only the 150 records produced meanwhile are added."""
    bootstrap = connect_broker.bootstrap
    topic = new_topic(bootstrap, partitions=3, prefix="connect-stream")
    url = f"sqlite:///{tmp_path / 'sink.db'}"
    checkpoint = tmp_path / "checkpoint"
    sink = TransactionalSink(url, "events", query_name="events")
    produce_ids(bootstrap, topic, 0, 300, 3)

    run(connect_spark, bootstrap, topic, sink, checkpoint)

    assert values(url) == ids(0, 300)
    first = markers(url, "events")
    assert [(batch_id, spark_batch_id, rows) for batch_id, spark_batch_id, rows, _, _ in first] \
        == [(0, 0, 100), (1, 1, 100), (2, 2, 100)]
    assert json.loads(first[-1][3]) == end_offsets(bootstrap, topic, 3)
    # no planned offsets over Connect: the end offsets are the rows' (max(offset) + 1)
    assert [start for *_, start in first] == [None, None, None]

    replayed = forget_last_commit(checkpoint)
    produce_ids(bootstrap, topic, 300, 450, 3)
    run(connect_spark, bootstrap, topic, sink, checkpoint)

    assert (checkpoint / "commits" / str(replayed)).exists()  # Spark did run it again
    assert values(url) == ids(0, 450)
    after = markers(url, "events")
    assert after[:3] == first                       # the replay added no marker
    assert [spark_batch_id for _, spark_batch_id, *_ in after] == list(range(len(after)))
    assert sum(rows for _, _, rows, _, _ in after) == 450
    assert json.loads(after[-1][3]) == end_offsets(bootstrap, topic, 3)


def test_a_new_checkpoint_is_refused_or_resumes_after_the_sinks_offsets(
        connect_spark, connect_broker, tmp_path):
    """Without planned offsets the sink compares where the batch's rows lie with its stored
    offsets. A new checkpoint reading from ``earliest`` again is one SinkError sentence at
    the client, nothing written. Given the sink's ``source_options()`` (read on the server
    by the source's planner) a new checkpoint starts after the stored offsets and adds only
    what is new - also when its batch 0 has the very id of the sink's last batch, which the
    sink, comparing batch ids alone, took for Spark's replay and skipped (records lost)."""
    bootstrap = connect_broker.bootstrap
    topic = new_topic(bootstrap, partitions=2, prefix="connect-resume")
    url = f"sqlite:///{tmp_path / 'sink.db'}"
    sink = TransactionalSink(url, "events", query_name="resume")
    produce_ids(bootstrap, topic, 0, 200, 2)
    run(connect_spark, bootstrap, topic, sink, tmp_path / "first")
    assert [spark_batch_id for _, spark_batch_id, *_ in markers(url, "resume")] == [0, 1]

    with pytest.raises(Exception, match="batch 0 of query 'resume' starts at offsets "
                                        ".*records it holds would be written again"):
        run(connect_spark, bootstrap, topic, sink, tmp_path / "second")
    assert values(url) == ids(0, 200)

    produce_ids(bootstrap, topic, 200, 250, 2)
    run(connect_spark, bootstrap, topic, sink, tmp_path / "third",
        options=sink.source_options())
    assert values(url) == ids(0, 250)
    produce_ids(bootstrap, topic, 250, 280, 2)
    run(connect_spark, bootstrap, topic, sink, tmp_path / "fourth",
        options=sink.source_options())               # batch 0 after the sink's batch 0
    assert values(url) == ids(0, 280)
    stored = markers(url, "resume")
    assert [(batch_id, spark_batch_id) for batch_id, spark_batch_id, *_ in stored] \
        == [(0, 0), (1, 1), (2, 0), (3, 0)]          # the sink's count goes on, Spark's restarts
    assert json.loads(stored[-1][3]) == end_offsets(bootstrap, topic, 2)


def test_a_stream_into_the_kafka_sink_and_its_restart_hold_every_record_once(
        connect_spark, connect_broker, tmp_path):
    """KafkaSink over Connect: its producer lives in the server's foreachBatch worker; each
    batch and its marker commit in one transaction; a replayed batch is skipped."""
    bootstrap = connect_broker.bootstrap
    source = new_topic(bootstrap, partitions=2, prefix="connect-kafka-in")
    out = new_topic(bootstrap, partitions=2, prefix="connect-kafka-out")
    checkpoint = tmp_path / "checkpoint"
    sink = KafkaSink(bootstrap, out, sink_id=out)
    columns = ["value", "topic", "partition", "offset"]  # partition: same on both topics
    produce_ids(bootstrap, source, 0, 200, 2)

    run(connect_spark, bootstrap, source, sink, checkpoint, columns=columns)
    forget_last_commit(checkpoint)
    produce_ids(bootstrap, source, 200, 300, 2)
    run(connect_spark, bootstrap, source, sink, checkpoint, columns=columns)

    written = sorted(record.value.decode() for record in
                     read_topic(bootstrap, out, isolation_level="read_committed"))
    assert written == ids(0, 300)
    marker = read_marker(bootstrap, out, out)
    assert marker["rows"] == 300 and marker["batches"] == marker["batch_id"] + 1 == 3
    assert marker["end_offsets"] == end_offsets(bootstrap, source, 2)
    assert marker.get("start_offsets") is None      # rows' offsets: none planned over Connect
