"""The TransactionalSink's stored offsets are the truth: a lost checkpoint resumes after them,
a checkpoint that disagrees with them is one error (issue 13).

Before, the sink stored each batch's end offsets but only a display read them. A query
whose checkpoint was deleted started again at batch 0 from ``startingOffsets``: the sink
skipped every batch id it had already committed with a warning (records lost), or, under a
new query name, wrote ``earliest`` again (records duplicated). Now the source starts where
the sink stands (``startingOffsetsFromSink``), the sink checks each batch's planned start
against its stored end, and the sink's own batch count goes on past Spark's restarted ids.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3

import pytest

from oncelog.spark.sinks import TransactionalSink
from oncelog.spark.sinks.positions import planned_offsets

from ..sinks.tables import fetch
from .conftest import new_topic, produce


def run(spark, bootstrap: str, topic: str, sink: TransactionalSink, checkpoint, *,
        from_sink: bool = True, per_trigger: int = 7, seen: list | None = None,
        plans: list | None = None):
    """One Trigger.AvailableNow run of topic -> sink; returns the query's exception or None.
    ``plans`` gets the query's plan as ``explain(True)`` prints it (what Spark's UI shows)."""
    reader = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(per_trigger)))
    if from_sink:
        reader = reader.options(**sink.source_options())
    records = reader.load().selectExpr("CAST(value AS STRING) AS value", "topic", "partition",
                                       "offset")
    if plans is not None:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            records.explain(True)
        plans.append(printed.getvalue())

    def write(batch_df, batch_id):
        if seen is not None:
            seen.append((batch_id, planned_offsets(batch_df)))
        sink(batch_df, batch_id)

    query = (records.writeStream.foreachBatch(write)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        try:
            query.awaitTermination(120)
        except Exception:  # a failed query raises here; its exception() says why
            pass
        return query.exception()
    finally:
        query.stop()


def values(url: str) -> list[str]:
    return [value for (value,) in fetch(url, "SELECT value FROM records")]


def ids(first: int, last: int) -> list[str]:
    return [f"id-{number}" for number in range(first, last)]


def test_planned_offsets_are_sparks_start_and_end_of_each_batch(spark, spark_broker, tmp_path):
    """The sink reads what Spark planned for the batch, not what the rows show."""
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, partitions=2)
    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(10)], partition=0)
    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(10, 14)], partition=1)
    sink = TransactionalSink(f"sqlite:///{tmp_path}/sink.db", "records", query_name="q")
    seen: list = []

    assert run(spark, bootstrap, topic, sink, tmp_path / "checkpoint", seen=seen) is None

    assert [batch_id for batch_id, _ in seen] == [0, 1]
    assert seen[0][1] == ({topic: {"0": 0, "1": 0}}, {topic: {"0": 5, "1": 2}})
    assert seen[1][1] == ({topic: {"0": 5, "1": 2}}, {topic: {"0": 10, "1": 4}})
    assert sink.committed_offsets() == {topic: {"0": 10, "1": 4}}
    starts = fetch(sink.url, "SELECT start_offsets FROM oncelog_sink_batches ORDER BY batch_id")
    assert [json.loads(start) for (start,) in starts] == [seen[0][1][0], seen[1][1][0]]


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_deleted_checkpoint_resumes_after_the_sinks_offsets(spark, spark_broker, tmp_path,
                                                             database, request):
    bootstrap = spark_broker.bootstrap
    url = (f"sqlite:///{tmp_path}/sink.db" if database == "sqlite"
           else request.getfixturevalue("postgres_url"))
    topic = new_topic(bootstrap, partitions=3)
    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(40)])
    sink = TransactionalSink(url, "records", query_name="copy")
    checkpoint = tmp_path / "checkpoint"

    assert run(spark, bootstrap, topic, sink, checkpoint) is None
    assert sorted(values(url)) == sorted(ids(0, 40))
    batches_first_run = sink.last_batch_id() + 1
    assert batches_first_run >= 3

    shutil.rmtree(checkpoint)
    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(40, 65)])
    assert run(spark, bootstrap, topic, sink, checkpoint) is None

    stored = values(url)
    assert len(stored) == 65
    assert sorted(stored) == sorted(ids(0, 65))
    markers = fetch(url, "SELECT batch_id, spark_batch_id FROM oncelog_sink_batches "
                         "WHERE query_name = 'copy' ORDER BY batch_id")
    # the sink's count goes on; Spark's ids started at 0 again with the new checkpoint
    assert [batch_id for batch_id, _ in markers] == list(range(len(markers)))
    assert markers[batches_first_run][1] == 0


def test_a_postgresql_sinks_password_reaches_the_database_and_never_the_querys_plan(
        spark, spark_broker, tmp_path, postgres_server, postgres_url):
    """``source_options()`` of a sink whose URL has a password: the URL goes without it and
    the password in ``startingOffsetsFromSinkPassword``, which Spark redacts where it shows a
    query's options. The role logs in with scram-sha-256 only, so the resumed run, which
    reads the sink's offsets in the source, proves the password got there."""
    bootstrap = spark_broker.bootstrap
    password = "s3cret:pass@word/1"
    url = postgres_server.owner_with_password(postgres_url, "oncelog_pw", password)
    sink = TransactionalSink(url, "records", query_name="copy")
    options = sink.source_options()
    assert options["startingOffsetsFromSinkPassword"] == password
    assert options["startingOffsetsFromSink"] == url.replace(":s3cret%3Apass%40word%2F1@", "@")
    topic = new_topic(bootstrap, partitions=2)
    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(30)])
    checkpoint = tmp_path / "checkpoint"
    assert run(spark, bootstrap, topic, sink, checkpoint) is None

    shutil.rmtree(checkpoint)
    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(30, 45)])
    plans: list[str] = []
    assert run(spark, bootstrap, topic, sink, checkpoint, plans=plans) is None

    assert sorted(values(url)) == sorted(ids(0, 45))  # resumed after the sink: none twice
    assert "startingOffsetsFromSinkPassword=*********(redacted)" in plans[0], plans[0]
    assert "s3cret" not in plans[0] and "oncelog_pw@" in plans[0], plans[0]
    wrong = TransactionalSink(url.replace("s3cret", "not-it"), "records", query_name="copy")
    shutil.rmtree(checkpoint)
    error = run(spark, bootstrap, topic, wrong, checkpoint)
    assert error is not None and "password authentication failed" in str(error), error
    assert "not-it" not in str(error)


def test_a_new_checkpoint_starting_elsewhere_is_one_error_and_writes_nothing(
        spark, spark_broker, tmp_path):
    """Without startingOffsetsFromSink the new checkpoint starts at earliest: it would write
    again what the sink holds (before: its batch ids were skipped with a warning, and what it
    read past the old position was lost)."""
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, partitions=1)
    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(20)])
    url = f"sqlite:///{tmp_path}/sink.db"
    sink = TransactionalSink(url, "records", query_name="copy")
    assert run(spark, bootstrap, topic, sink, tmp_path / "first") is None
    before = (sorted(values(url)), fetch(url, "SELECT * FROM oncelog_sink_batches"))

    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(20, 30)])
    error = run(spark, bootstrap, topic, sink, tmp_path / "second", from_sink=False)

    assert error is not None
    message = (f"batch 0 of query 'copy' starts at offsets {topic}-0 0 but the sink holds "
               f"everything up to {topic}-0 20 (batch 2): records it holds would be written "
               f"again in {topic}-0; nothing was written")
    assert message in str(error)
    assert (sorted(values(url)), fetch(url, "SELECT * FROM oncelog_sink_batches")) == before


def test_a_sink_rewound_under_its_checkpoint_is_one_error_and_stays_as_it_is(
        spark, spark_broker, tmp_path):
    """The table restored from an older backup while the checkpoint went on: the next batch
    would start past what the sink holds, and the records between would never reach it."""
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, partitions=1)
    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(14)])
    path = tmp_path / "sink.db"
    url = f"sqlite:///{path}"
    sink = TransactionalSink(url, "records", query_name="copy")
    checkpoint = tmp_path / "checkpoint"
    assert run(spark, bootstrap, topic, sink, checkpoint) is None  # batches [0,7) [7,14)
    with sqlite3.connect(path) as connection:  # rewind: batch 1 and its rows are gone
        connection.execute("DELETE FROM records WHERE \"offset\" >= 7")
        connection.execute("DELETE FROM oncelog_sink_batches WHERE batch_id = 1")
    before = (sorted(values(url)), fetch(url, "SELECT * FROM oncelog_sink_batches"))

    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(14, 20)])
    error = run(spark, bootstrap, topic, sink, checkpoint)

    assert error is not None
    assert (f"batch 2 of query 'copy' starts at offsets {topic}-0 14 but the sink holds "
            f"everything up to {topic}-0 7 (batch 0): records it never received would be "
            f"skipped in {topic}-0; nothing was written") in str(error)
    assert (sorted(values(url)), fetch(url, "SELECT * FROM oncelog_sink_batches")) == before


def test_an_older_copy_of_the_checkpoint_is_one_error(spark, spark_broker, tmp_path):
    """A checkpoint restored from a copy taken before the last batch re-plans that batch id.
    Over the same range it is a replay and skipped; over another range (a new rate limit
    here) it would write part of it again: refused."""
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, partitions=1)
    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(7)])
    url = f"sqlite:///{tmp_path}/sink.db"
    sink = TransactionalSink(url, "records", query_name="copy")
    checkpoint = tmp_path / "checkpoint"
    assert run(spark, bootstrap, topic, sink, checkpoint) is None  # batch 0: [0, 7)
    shutil.copytree(checkpoint, tmp_path / "old")
    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(7, 14)])
    assert run(spark, bootstrap, topic, sink, checkpoint) is None  # batch 1: [7, 14)
    shutil.rmtree(checkpoint)
    shutil.copytree(tmp_path / "old", checkpoint)

    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(14, 18)])
    error = run(spark, bootstrap, topic, sink, checkpoint, per_trigger=10)  # batch 1: [7, 17)

    assert error is not None
    assert (f"batch 1 of query 'copy' starts at offsets {topic}-0 7 but the sink holds "
            f"everything up to {topic}-0 14 (batch 1): records it holds would be written "
            "again") in str(error)
    assert sorted(values(url)) == sorted(ids(0, 14))


@pytest.mark.parametrize("options, message", [
    ({"startingOffsetsFromSink": "mysql://x"}, "must be the URL of a TransactionalSink"),
    ({"startingOffsetsFromSink": "kafka://127.0.0.1:9092"}, "or a KafkaSink's kafka://"),
    ({"sinkQueryName": "q"}, "sinkQueryName needs startingOffsetsFromSink"),
    ({"startingOffsetsFromSink": "sqlite:///x.db", "sinkQueryName": " "}, "must not be empty"),
    ({"startingOffsetsFromSink": "sqlite:///x.db", "startingOffsetsFromSinkPassword": "p"},
     "startingOffsetsFromSinkPassword is for a PostgreSQL sink"),
    ({"startingOffsetsFromSink": "postgresql://u:p@h/db", "startingOffsetsFromSinkPassword": "p"},
     "give it once"),
])
def test_bad_sink_options_are_one_sentence(options, message):
    from oncelog.spark.errors import SourceOptionError
    from oncelog.spark.options import parse_options
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}
    with pytest.raises(SourceOptionError, match=message):
        parse_options({**base, **options}, streaming=True)
    parsed = parse_options({**base, "startingOffsetsFromSink": "sqlite:///x.db"}, streaming=True)
    assert (parsed.starting_from_sink.url, parsed.starting_from_sink.query_name) == (
        "sqlite:///x.db", "default")
    kafka = parse_options({**base, "startingOffsetsFromSink": "kafka://a:1,b:2/out",
                           "sinkQueryName": "q"}, streaming=True)
    assert kafka.starting_from_sink.url == "kafka://a:1,b:2/out"
    with pytest.raises(SourceOptionError, match="streaming queries only"):
        parse_options({**base, "startingOffsetsFromSink": "sqlite:///x.db"}, streaming=False)
    apart = parse_options({**base, "startingOffsetsFromSink": "postgresql://u@h:5/db",
                           "startingOffsetsFromSinkPassword": "p@ss"}, streaming=True)
    inline = parse_options({**base, "startingOffsetsFromSink": "postgresql://u:p%40ss@h:5/db"},
                           streaming=True)
    for parsed in (apart, inline):
        assert parsed.starting_from_sink.url == "postgresql://u@h:5/db"
        assert parsed.starting_from_sink.connect_url == "postgresql://u:p%40ss@h:5/db"
        assert "p@ss" not in repr(parsed)


@pytest.mark.slow
def test_copy_job_with_its_checkpoint_deleted_between_runs_holds_every_record_once(
        spark_broker, tmp_path):
    """``python -m oncelog.spark.copy_job`` twice, the checkpoint folder deleted in between
    and records produced meanwhile: the second run starts where the sink's offsets end."""
    from .test_driver_crash import CopyJob

    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, partitions=3)
    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(300)])
    database = tmp_path / "sink.db"
    checkpoint = tmp_path / "checkpoint"
    args = ["--bootstrap", bootstrap, "--topic", topic, "--sink", f"sqlite:///{database}",
            "--checkpoint", str(checkpoint), "--max-offsets-per-trigger", "100",
            "--query-name", "copy", "--stop-when-idle", "2"]
    log = tmp_path / "copy_job.log"

    assert CopyJob(args, log).finish() == 0, f"the first run failed; see {log}"
    shutil.rmtree(checkpoint)
    produce(bootstrap, topic, [f"id-{n}".encode() for n in range(300, 450)])
    assert CopyJob(args, log).finish() == 0, f"the second run failed; see {log}"

    stored = values(f"sqlite:///{database}")
    assert len(stored) == 450
    assert sorted(stored) == sorted(ids(0, 450))


def test_a_kafka_sink_resumes_after_its_marker_and_refuses_a_disagreeing_checkpoint(
        spark, spark_broker, tmp_path):
    """The same for ``KafkaSink``: its marker (the metadata of a transactional offset commit)
    holds the planned offsets; a deleted checkpoint resumes after them, another is refused."""
    from oncelog.client.reader import read_topic
    from oncelog.spark.sinks import KafkaSink
    from oncelog.spark.sinks.kafka import read_marker

    bootstrap = spark_broker.bootstrap
    source = new_topic(bootstrap, partitions=2)
    out = new_topic(bootstrap, partitions=1, prefix="out")
    produce(bootstrap, source, [f"id-{n}".encode() for n in range(20)])
    sink = KafkaSink(bootstrap, out, sink_id=out)

    def run_kafka(checkpoint, from_sink: bool = True):
        reader = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", source).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", "8"))
        if from_sink:
            reader = reader.options(**sink.source_options())
        query = (reader.load().select("value").writeStream.foreachBatch(sink)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        try:
            try:
                query.awaitTermination(120)
            except Exception:
                pass
            return query.exception()
        finally:
            query.stop()

    def output() -> list[str]:
        return sorted(r.value.decode() for r in read_topic(bootstrap, out,
                                                           isolation_level="read_committed"))

    try:
        assert run_kafka(tmp_path / "checkpoint") is None
        shutil.rmtree(tmp_path / "checkpoint")
        produce(bootstrap, source, [f"id-{n}".encode() for n in range(20, 30)])
        assert run_kafka(tmp_path / "checkpoint") is None
        assert output() == sorted(ids(0, 30))
        marker = read_marker(bootstrap, out, out)
        assert sum(marker["end_offsets"][source].values()) == 30
        assert marker["start_offsets"][source] != marker["end_offsets"][source]

        produce(bootstrap, source, [f"id-{n}".encode() for n in range(30, 34)])
        error = run_kafka(tmp_path / "other", from_sink=False)  # would start at earliest
        assert error is not None
        assert f"batch 0 of sink {out!r} starts at offsets {source}-" in str(error)
        assert "records it holds would be written again" in str(error)
        assert output() == sorted(ids(0, 30))
    finally:
        sink.close()
