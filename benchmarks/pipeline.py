"""The PySpark pipeline: how fast the ``oncelog`` source reads, and how fast records reach SQLite.

    .venv/bin/python benchmarks/pipeline.py [--runs 3] [--records 500000] [--sink-records 200000]
    .venv/bin/python benchmarks/pipeline.py --bootstrap HOST:PORT      # any Kafka broker

Cases, each on its own freshly filled topic of 100-byte values in 3 partitions:
- ``plain``: a confluent-kafka consumer (assign, from the start, no group) reads the topic:
  the yardstick.
- ``source``: ``spark.read.format("oncelog")`` reads the same topic into Spark's ``noop``
  sink: every row is read, converted and handed to Spark, nothing else. Reported as records/s
  and as the ratio source / plain (target >= 0.5 on a local SparkSession).
- ``sqlite``: a streaming query (Trigger.AvailableNow, maxOffsetsPerTrigger 100000) reads
  ``--sink-records`` records and writes them through ``TransactionalSink`` into SQLite, each
  batch with its offsets in one transaction: records/s end to end.

Times exclude starting the SparkSession (once per invocation) but include planning each
query. The session's first query pays for JVM warm-up (class loading, code generation,
starting Python workers: seen here as 60k instead of 270k records/s), which a long-running
pipeline pays once; so a warm-up read and a warm-up sink run go first, timed and printed
as ``cold`` but left out of the medians. The table shows medians of ``--runs`` runs (min-max); raw runs go to
``benchmarks/results/pipeline-<timestamp>.json``. Nothing passes or fails on a figure.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
VALUE = b"x" * 100
PARTITIONS = 3


def fill_topic(bootstrap: str, records: int) -> str:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = f"bench-pipeline-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1_000_000, "compression.type": "lz4"})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=VALUE, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return topic


def plain_consumer_rate(bootstrap: str, topic: str, records: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-plain",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen = 0
    while seen < records:
        for message in consumer.consume(10_000, timeout=1.0):
            if message.error() is None:
                seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return records / elapsed


def source_rate(spark, bootstrap: str, topic: str, records: int) -> float:
    started = time.perf_counter()
    df = (spark.read.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).load())
    df.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - started
    return records / elapsed


def sqlite_rate(spark, bootstrap: str, topic: str, records: int, folder: Path) -> float:
    from oncelog.spark.sinks import TransactionalSink
    database = folder / f"{topic}.db"
    sink = TransactionalSink(f"sqlite:///{database}", "records", query_name=topic)
    started = time.perf_counter()
    query = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "100000").load()
             .selectExpr("CAST(value AS STRING) AS value", "topic", "partition", "offset")
             .writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(folder / f"{topic}-checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    import sqlite3
    with sqlite3.connect(database) as connection:
        written = connection.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    assert written == records, f"the sink holds {written} rows, not {records}"
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--sink-records", type=int, default=200_000)
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args()

    sys.path.insert(0, str(HERE.parent / "src"))
    from oncelog.broker.process import BrokerProcess
    from oncelog.spark.session import local_session

    folder = Path(tempfile.mkdtemp(prefix="oncelog-bench-pipeline-"))
    broker = None
    if args.bootstrap is None:
        broker = BrokerProcess(folder / "data", log_path=folder / "broker.log").start()
    bootstrap = args.bootstrap or broker.bootstrap
    runs: list[dict] = []
    try:
        spark = local_session("oncelog-bench")
        warm_topic = fill_topic(bootstrap, 50_000)
        cold_source = source_rate(spark, bootstrap, warm_topic, 50_000)
        cold_sqlite = sqlite_rate(spark, bootstrap, warm_topic, 50_000, folder)
        print(f"cold (first queries of the session, 50,000 records): source "
              f"{cold_source:,.0f}/s  source->sqlite {cold_sqlite:,.0f}/s", flush=True)
        for run in range(args.runs):
            topic = fill_topic(bootstrap, args.records)
            plain = plain_consumer_rate(bootstrap, topic, args.records)
            source = source_rate(spark, bootstrap, topic, args.records)
            sink_topic = fill_topic(bootstrap, args.sink_records)
            sqlite = sqlite_rate(spark, bootstrap, sink_topic, args.sink_records, folder)
            runs.append({"plain": plain, "source": source, "ratio": source / plain,
                         "sqlite": sqlite})
            print(f"run {run + 1}: plain {plain:,.0f}/s  source {source:,.0f}/s  "
                  f"ratio {source / plain:.2f}  source->sqlite {sqlite:,.0f}/s", flush=True)
        spark.stop()
    finally:
        if broker:
            broker.stop()

    def summary(key: str, fmt: str) -> str:
        values = [r[key] for r in runs]
        return (f"{format(statistics.median(values), fmt)} "
                f"({format(min(values), fmt)}-{format(max(values), fmt)})")

    print(f"\nmedians of {len(runs)} runs, {args.records:,} records of 100 B "
          f"({args.sink_records:,} into SQLite):")
    print(f"  plain confluent-kafka consumer  {summary('plain', ',.0f')} records/s")
    print(f"  oncelog source (noop sink)      {summary('source', ',.0f')} records/s")
    print(f"  source / plain                  {summary('ratio', '.2f')}   (target >= 0.5)")
    print(f"  source -> SQLite sink           {summary('sqlite', ',.0f')} records/s")
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    out = results / f"pipeline-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"machine": platform.platform(), "args": vars(args),
                               "cold": {"source": cold_source, "sqlite": cold_sqlite},
                               "runs": runs}, indent=2))
    print(f"raw runs: {out}")


if __name__ == "__main__":
    main()
