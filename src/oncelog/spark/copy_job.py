"""A streaming job that copies a topic into an exactly-once sink:
``python -m oncelog.spark.copy_job``.

It is the smallest real pipeline — the ``oncelog`` source into one of the sinks — and what
the crash tests and ``oncelog verify`` kill with ``kill -9`` and start again from the same
checkpoint. Each row keeps the record's key, value (as text), topic, partition and offset.

Sinks (``--sink``): ``sqlite:///path.db`` or ``postgresql://...`` (``TransactionalSink``:
rows and the batch's end offsets in one transaction; the source starts from those offsets
when there is no checkpoint, so a deleted checkpoint folder loses and repeats nothing),
``files:///folder`` (Spark's Parquet file sink, exactly-once through its ``_spark_metadata``
log), or ``kafka://TOPIC``
(``KafkaSink`` on the same broker: each batch's key and value and its batch id in one Kafka
transaction, sink id = the query name; its marker's offsets serve as the database's do).

It prints one line per event on stdout, flushed, so a supervisor can time its faults:
``started``, ``batch N writing`` (foreachBatch entered), ``batch N written`` (the sink
committed; Spark has not yet recorded the batch in its commit log) or ``batch N skipped``
(the Kafka sink found the batch committed already), ``idle`` and ``stopped``.
``--pause-ms`` sleeps inside each batch, before and after the write, to widen those windows;
``--hold-transaction-ms`` keeps the Kafka sink's transaction open that long, its records
written, before the commit.

``--master`` connects to a cluster (``spark://HOST:PORT``; the default is ``local[2]``). Then
the driver's web UI is on (a free port) and the job also prints ``app APP_ID ui URL`` before
``started``, and after each batch ``batch N executors {...}``: per executor of the
application (dead ones too, the driver left out; ``spark.status``) the tasks it ran, failed
and is running, and whether it is alive, cumulative since the application started. That is
the evidence that the batches were read on the cluster's executors, not in the driver.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from ..client.security import from_environment


def _say(line: str) -> None:
    print(line, flush=True)


def _say_executors(batch_id: int, ui_url: str | None, app_id: str) -> None:
    """``batch N executors {"0": {"tasks": 12, "failed": 0, "running": 0, "alive": true}}``."""
    from .status import app_executors

    executors = app_executors(ui_url, app_id) if ui_url else None
    if executors is None:
        return  # the UI did not answer this time; the next batch's line is cumulative
    _say(f"batch {batch_id} executors " + json.dumps({
        executor.executor_id: {"tasks": executor.tasks, "failed": executor.failed_tasks,
                               "running": executor.active_tasks, "alive": executor.active,
                               "host": executor.host}
        for executor in executors}, separators=(",", ":")))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m oncelog.spark.copy_job",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="HOST:PORT of a broker")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--sink", required=True,
                        help="sqlite:///path.db, postgresql://user@host:port/db, files:///dir "
                             "or kafka://TOPIC")
    parser.add_argument("--table", default="records", help="table for database sinks")
    parser.add_argument("--checkpoint", required=True, help="Spark checkpoint folder")
    parser.add_argument("--query-name", default="copy")
    parser.add_argument("--master", default=None,
                        help="Spark master URL, e.g. spark://HOST:PORT (default: local[2])")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--trigger-ms", type=int, default=200)
    parser.add_argument("--pause-ms", type=int, default=0,
                        help="sleep this long before and after each batch's write")
    parser.add_argument("--hold-transaction-ms", type=int, default=0,
                        help="kafka:// sink: keep each transaction open this long with its "
                             "records written, before committing it")
    parser.add_argument("--stop-when-idle", type=float, default=None, metavar="SECONDS",
                        help="stop after this long without new records (default: run until killed)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pyspark.sql import functions as F

    from .session import local_session
    from .sinks import KafkaSink, TransactionalSink, write_files

    on_cluster = bool(args.master) and not args.master.startswith("local")
    # On a cluster, the driver's UI (a free port) serves where the tasks ran (spark.status).
    spark = local_session(f"oncelog-copy-{args.query_name}", master=args.master,
                          config={"spark.ui.enabled": "true", "spark.ui.port": "0"}
                          if on_cluster else None)
    app_id, ui_url = spark.sparkContext.applicationId, spark.sparkContext.uiWebUrl
    if on_cluster:
        _say(f"app {app_id} ui {ui_url}")
    # a secured broker (oncelog verify --command-config): the file its parent names
    security = from_environment()
    reader = (spark.readStream.format("oncelog")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .options(**{f"kafka.{name}": value for name, value in security.items()})
              .option("subscribe", args.topic)
              .option("startingOffsets", "earliest"))
    sink_object: KafkaSink | TransactionalSink | None = None
    if args.sink.startswith("kafka://"):
        sink_object = KafkaSink(args.bootstrap, args.sink[len("kafka://"):],
                                sink_id=args.query_name,
                                hold_open_s=args.hold_transaction_ms / 1000, security=security)
    elif not args.sink.startswith("files://"):
        sink_object = TransactionalSink(args.sink, args.table, query_name=args.query_name)
    if sink_object is not None:
        # Without a checkpoint (a new or a lost one), start where the sink's offsets end.
        reader = reader.options(**sink_object.source_options())
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    records = reader.load().select(
        F.col("key").cast("string").alias("key"), F.col("value").cast("string").alias("value"),
        "topic", "partition", "offset")

    if args.sink.startswith("files://"):
        writer = write_files(records, args.sink[len("files://"):], args.checkpoint)
    else:
        sink: Callable[[Any, int], object]
        if args.sink.startswith("kafka://"):
            # Only key and value: a partition column would choose the output partition (the
            # sink reads the batch's offsets from Spark's plan, not from the rows).
            records = records.select("key", "value")
            assert isinstance(sink_object, KafkaSink)
            sink = sink_object.write_batch      # False: a re-run batch, skipped
        else:
            assert sink_object is not None  # a TransactionalSink
            sink = sink_object
        pause = args.pause_ms / 1000

        def write(batch_df, batch_id: int) -> None:
            _say(f"batch {batch_id} writing")
            time.sleep(pause)
            written = sink(batch_df, batch_id)
            _say(f"batch {batch_id} {'skipped' if written is False else 'written'}")
            time.sleep(pause)

        writer = (records.writeStream.foreachBatch(write)
                  .option("checkpointLocation", args.checkpoint))
    query = writer.queryName(args.query_name).trigger(
        processingTime=f"{args.trigger_ms} milliseconds").start()
    _say("started")
    try:
        busy_at, last_batch = None, None     # idle time counts from the first trigger
        reported = None                      # the last batch whose executors were printed
        while query.isActive:
            time.sleep(0.2)
            progress, status = query.lastProgress, query.status
            if progress is None:
                continue
            if on_cluster and progress["batchId"] != reported:
                reported = progress["batchId"]
                _say_executors(reported, ui_url, app_id)
            # Busy while a batch runs or data waits, and when a batch with rows just ended:
            # a long batch is not idleness.
            if (busy_at is None or status["isTriggerActive"] or status["isDataAvailable"]
                    or (progress["batchId"] != last_batch and progress["numInputRows"])):
                busy_at, last_batch = time.monotonic(), progress["batchId"]
            if args.stop_when_idle and time.monotonic() - busy_at > args.stop_when_idle:
                _say("idle")
                break
        if query.exception():
            print(f"copy_job: the query failed: {query.exception()}", file=sys.stderr)
            return 1
    finally:
        query.stop()
        spark.stop()
        _say("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
