"""The PySpark pipeline: how fast the ``oncelog`` source reads, and how fast records reach SQLite.

    .venv/bin/python benchmarks/pipeline.py [--runs 3] [--records 500000] [--sink-records 200000]
    .venv/bin/python benchmarks/pipeline.py --executors 1,2,4 [--runs 3] [--sink-records 200000]
    .venv/bin/python benchmarks/pipeline.py --bootstrap HOST:PORT      # any Kafka broker

**Local cases** (the default; Spark ``local[2]``), each on its own freshly filled topic of
100-byte values in 3 partitions:
- ``plain``: a confluent-kafka consumer (assign, from the start, no group) reads the topic:
  the yardstick.
- ``source``: ``spark.read.format("oncelog")`` reads the same topic into Spark's ``noop``
  sink: every row is read, converted and handed to Spark, nothing else. Reported as records/s
  and as the ratio source / plain (target >= 0.5 on a local SparkSession).
- ``sqlite``: a streaming query (Trigger.AvailableNow, ``--max-offsets-per-trigger``, 100,000
  here by default) reads ``--sink-records`` records and writes them through
  ``TransactionalSink`` into SQLite, each batch with its offsets in one transaction: records/s
  end to end.

**Cluster cases** (``--executors 1,2,4``, issue 15): one topic of ``--partitions`` (8)
partitions is filled with ``--sink-records`` records, and a Spark standalone cluster
(``oncelog.spark.standalone``) is started with one Worker of 1 core per executor of the
largest count. For each executor count N a SparkSession is started on it with
``spark.executor.cores=1`` and ``spark.cores.max=N``: the Master then grants N cores, one per
executor, spread over N Workers (``spark.deploy.spreadOut``), so the application has exactly
N executor JVMs, as N machines would give it; the benchmark waits until N have registered
(and records their pids) before timing anything. Limiting cores on one cluster, instead of a
cluster per N, keeps the machine's other load the same for every N. Then per run, back to
back so that all see the same load: the plain consumer reads the whole topic, the source
reads it into Spark's ``noop`` sink (a batch read: the 8 partitions' tasks run on the N
executors at once), and a streaming query (Trigger.AvailableNow,
``--max-offsets-per-trigger``, 25,000 here by default) reads it from the start into
``TransactionalSink`` (SQLite, a fresh database and checkpoint per run). Reported: records/s
of each, and sink / plain per run. Rows reach the sink through the driver
(``toLocalIterator`` runs one job per Spark partition, one after the other), so executors
cannot make the sink itself parallel; the noop read shows what the source does with them. On
the 2-core machine 4 executors cannot beat 2 either: the figure shows how far the sink is
from the plain read, and how it scales (or does not) with executors.

**Per-batch overhead of the source** (both modes, from the streaming sink queries), taken
from Spark's own progress reports (``query.recentProgress``, ``durationMs`` per batch), so
the source runs unchanged:
- *planning* = ``latestOffset`` + ``getBatch`` + ``queryPlanning``: the source's
  ``latestOffset(start, limit)`` on the driver (a metadata and a ListOffsets request to the
  broker, through Spark's Python worker for data sources; ``reportLatestOffset()`` reuses them),
  Spark's offset bookkeeping for the batch, and its planning of the batch's query.
  The source's ``partitions(start, end)`` is **not** in there: Spark calls it lazily when the
  batch's RDD is built, inside ``addBatch`` (checked with a source that sleeps in each method).
  So it is timed apart, as ``partitions()``: the same method called in this process on the
  start and end offsets of every batch, read back from the query's offset log.
- *commit* = ``walCommit`` + ``commitOffsets``: writing the batch's offsets to the checkpoint's
  offset log (with the source's ``commit()`` of the previous batch, a no-op here, and Spark's
  purge of old log entries), and writing the batch to the commit log once the sink is done.
  (The sink's own database commit is part of ``addBatch``, not of this.)
- *share* = (planning + commit) / ``triggerExecution``, the batch's whole time.
Each is the median over every batch of the timed runs of a case (cold runs excluded).

Times exclude starting the SparkSession (and, on the cluster, waiting for its executors) but
include planning each query. The session's first query pays for JVM warm-up (class loading,
code generation, starting Python workers: seen here as 60k instead of 270k records/s), which
a long-running pipeline pays once; so a warm-up read and a warm-up sink run go first (on the
cluster: one sink run per session, since each session brings new executors), timed and
printed as ``cold`` but left out of the medians. The table shows medians of ``--runs`` runs
(min-max); raw runs, with every batch's ``durationMs``, go to
``benchmarks/results/pipeline-<timestamp>.json``. Nothing passes or fails on a figure.
The broker, the cluster's Master and Workers (with their executors) are stopped by pid and
process group at the end, also on failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
VALUE = b"x" * 100
PARTITIONS = 3
LOCAL_MAX_OFFSETS_PER_TRIGGER = 100_000
CLUSTER_MAX_OFFSETS_PER_TRIGGER = 25_000
CLUSTER_START_TIMEOUT_S = 180   # JVMs start slowly on a shared 2-core machine
PLANNING_PARTS = ("latestOffset", "getBatch", "queryPlanning")
COMMIT_PARTS = ("walCommit", "commitOffsets")


def fill_topic(bootstrap: str, records: int, partitions: int = PARTITIONS) -> str:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = f"bench-pipeline-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1_000_000, "compression.type": "lz4"})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=VALUE, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return topic


def plain_consumer_rate(bootstrap: str, topic: str, records: int,
                        partitions: int = PARTITIONS) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-plain",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    seen = 0
    while seen < records:
        # never ask for more than is left: consume() waits its whole timeout for a full batch
        for message in consumer.consume(min(10_000, records - seen), timeout=1.0):
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


def sink_run(spark, bootstrap: str, topic: str, records: int, folder: Path,
             max_offsets_per_trigger: int) -> dict:
    """One streaming query from the start of ``topic`` into a fresh SQLite TransactionalSink:
    records/s end to end, and every batch's ``durationMs`` with its overhead (see above)."""
    from oncelog.spark.sinks import TransactionalSink
    name = f"{topic}-{uuid.uuid4().hex[:6]}"
    database = folder / f"{name}.db"
    checkpoint = folder / f"{name}-checkpoint"
    sink = TransactionalSink(f"sqlite:///{database}", "records", query_name=name)
    started = time.perf_counter()
    query = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger)).load()
             .selectExpr("CAST(value AS STRING) AS value", "topic", "partition", "offset")
             .writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    with sqlite3.connect(database) as connection:
        written = connection.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    assert written == records, f"the sink holds {written} rows, not {records}"
    batches = [batch_overhead(progress) for progress in query.recentProgress
               if progress["numInputRows"] > 0]
    for batch, partitions_s in zip(batches, time_partitions(checkpoint, bootstrap, topic)):
        batch["partitions_us"] = partitions_s * 1e6
    return {"rate": records / elapsed, "seconds": elapsed, "batches": batches}


def batch_overhead(progress: dict) -> dict:
    """A batch's ``durationMs`` (ms), with planning, commit and their share of the batch."""
    durations = {name: int(value) for name, value in progress["durationMs"].items()}
    planning = sum(durations.get(part, 0) for part in PLANNING_PARTS)
    commit = sum(durations.get(part, 0) for part in COMMIT_PARTS)
    trigger = durations.get("triggerExecution", 0)
    return {"batch_id": progress["batchId"], "rows": progress["numInputRows"],
            "duration_ms": durations, "planning_ms": planning, "commit_ms": commit,
            "share": (planning + commit) / trigger if trigger else None}


def time_partitions(checkpoint: Path, bootstrap: str, topic: str) -> list[float]:
    """Seconds the source's ``partitions(start, end)`` takes for each batch of a finished
    query, called here on the offsets Spark logged (batch 0 starts at ``{}``, i.e. offset 0,
    which is where these topics begin)."""
    from oncelog.spark.options import parse_options
    from oncelog.spark.source import OncelogStreamReader
    reader = OncelogStreamReader(parse_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=True))
    logged = sorted((int(path.name), path) for path in (checkpoint / "offsets").iterdir()
                    if path.name.isdigit())
    start: dict = {}
    seconds = []
    for _, path in logged:
        end = json.loads(path.read_text().splitlines()[2])
        began = time.perf_counter()
        reader.partitions(start, end)
        seconds.append(time.perf_counter() - began)
        start = end
    return seconds


def overhead_summary(runs: list[dict]) -> dict:
    """Medians per batch over every batch of ``runs`` (each a ``sink_run`` result)."""
    batches = [batch for run in runs for batch in run["batches"]]

    def median(key: str) -> float | None:
        values = [batch[key] for batch in batches if batch.get(key) is not None]
        return statistics.median(values) if values else None
    return {"batches": len(batches), "planning_ms": median("planning_ms"),
            "commit_ms": median("commit_ms"), "share": median("share"),
            "partitions_us": median("partitions_us"),
            "trigger_ms": statistics.median(b["duration_ms"].get("triggerExecution", 0)
                                            for b in batches) if batches else None,
            "parts_ms": {part: statistics.median(b["duration_ms"].get(part, 0) for b in batches)
                         for part in (*PLANNING_PARTS, "addBatch", *COMMIT_PARTS)}
            if batches else {}}


def spread(values: list[float], fmt: str) -> str:
    return (f"{format(statistics.median(values), fmt)} "
            f"({format(min(values), fmt)}-{format(max(values), fmt)})")


def overhead_cells(overhead: dict) -> list[str]:
    def cell(key: str, fmt: str) -> str:
        value = overhead.get(key)
        return "" if value is None else format(value, fmt)
    return [cell("planning_ms", ",.0f"), cell("partitions_us", ",.0f"), cell("commit_ms", ",.0f"),
            cell("trigger_ms", ",.0f"),
            "" if overhead.get("share") is None else f"{overhead['share']:.0%}",
            str(overhead.get("batches", ""))]


OVERHEAD_COLUMNS = ("planning ms", "partitions() µs", "commit ms", "batch ms", "share",
                    "batches")


def run_local(args, bootstrap: str, folder: Path) -> dict:
    from oncelog.spark.session import local_session
    max_offsets = args.max_offsets_per_trigger or LOCAL_MAX_OFFSETS_PER_TRIGGER
    spark = local_session("oncelog-bench")
    try:
        warm_topic = fill_topic(bootstrap, 50_000)
        cold_source = source_rate(spark, bootstrap, warm_topic, 50_000)
        cold_sqlite = sink_run(spark, bootstrap, warm_topic, 50_000, folder, max_offsets)
        print(f"cold (first queries of the session, 50,000 records): source "
              f"{cold_source:,.0f}/s  source->sqlite {cold_sqlite['rate']:,.0f}/s", flush=True)
        runs: list[dict] = []
        for run in range(args.runs):
            topic = fill_topic(bootstrap, args.records)
            plain = plain_consumer_rate(bootstrap, topic, args.records)
            source = source_rate(spark, bootstrap, topic, args.records)
            sink_topic = fill_topic(bootstrap, args.sink_records)
            sqlite = sink_run(spark, bootstrap, sink_topic, args.sink_records, folder,
                              max_offsets)
            runs.append({"plain": plain, "source": source, "ratio": source / plain,
                         "sqlite": sqlite["rate"], "sqlite_batches": sqlite["batches"]})
            print(f"run {run + 1}: plain {plain:,.0f}/s  source {source:,.0f}/s  "
                  f"ratio {source / plain:.2f}  source->sqlite {sqlite['rate']:,.0f}/s",
                  flush=True)
    finally:
        spark.stop()
    overhead = overhead_summary([{"batches": r["sqlite_batches"]} for r in runs])

    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"local[2]: medians of {len(runs)} runs (min-max), {args.records:,} "
                        f"records of 100 B ({args.sink_records:,} into SQLite, "
                        f"{max_offsets:,} per batch)")
    for column in ("case", "records/s", "/ plain"):
        table.add_column(column, justify="left" if column == "case" else "right")
    table.add_row("plain confluent-kafka consumer", spread([r["plain"] for r in runs], ",.0f"),
                  "")
    table.add_row("oncelog source (noop sink)", spread([r["source"] for r in runs], ",.0f"),
                  spread([r["ratio"] for r in runs], ".2f") + "  (target >= 0.5)")
    table.add_row("source -> SQLite sink", spread([r["sqlite"] for r in runs], ",.0f"), "")
    console = Console(width=140)
    console.print(table)
    print_overhead(console, [("source -> SQLite sink", overhead)])
    return {"cold": {"source": cold_source, "sqlite": cold_sqlite["rate"]}, "runs": runs,
            "overhead": overhead, "max_offsets_per_trigger": max_offsets}


def cluster_session(cluster, executors: int):
    """A SparkSession on ``cluster`` holding exactly ``executors`` executors of 1 core each."""
    from oncelog.spark.session import local_session
    spark = local_session(f"oncelog-bench-{executors}x", master=cluster.master_url, config={
        "spark.executor.cores": "1", "spark.cores.max": str(executors),
        "spark.executor.memory": "512m", "spark.dynamicAllocation.enabled": "false"})
    deadline = time.monotonic() + CLUSTER_START_TIMEOUT_S
    while registered_executors(spark) < executors:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {registered_executors(spark)} of {executors} executors "
                               f"registered in {CLUSTER_START_TIMEOUT_S} s; see the logs in "
                               f"{cluster.directory}")
        time.sleep(0.2)
    return spark


def registered_executors(spark) -> int:
    """Executors registered with the driver (the driver itself not counted)."""
    return spark.sparkContext._jsc.sc().getExecutorIds().size()


def run_cluster(args, bootstrap: str, folder: Path) -> dict:
    from oncelog.spark.standalone import StandaloneCluster
    counts = [int(n) for n in args.executors.split(",")]
    max_offsets = args.max_offsets_per_trigger or CLUSTER_MAX_OFFSETS_PER_TRIGGER
    records, partitions = args.sink_records, args.partitions
    topic = fill_topic(bootstrap, records, partitions)
    cases: list[dict] = []
    cluster = StandaloneCluster(folder / "spark", workers=max(counts), cores_per_worker=1,
                                memory_per_worker="1g")
    try:
        cluster.start(timeout_s=CLUSTER_START_TIMEOUT_S)
        print(f"cluster {cluster.master_url}: {max(counts)} workers x 1 core; topic {topic}: "
              f"{records:,} records in {partitions} partitions", flush=True)
        for count in counts:
            cases.append(cluster_case(cluster, count, args, bootstrap, topic, folder,
                                      max_offsets))
    finally:
        cluster.stop()
    print_cluster_table(cases, args, max_offsets)
    return {"topic": {"records": records, "partitions": partitions},
            "max_offsets_per_trigger": max_offsets, "cases": cases}


def cluster_case(cluster, count: int, args, bootstrap: str, topic: str, folder: Path,
                 max_offsets: int) -> dict:
    records, partitions = args.sink_records, args.partitions
    spark = cluster_session(cluster, count)
    try:
        app_id = spark.sparkContext.applicationId
        executors = [{"id": e.executor_id, "worker": e.worker_id, "pid": e.pid}
                     for e in cluster.executors() if e.app_id == app_id]
        cold = sink_run(spark, bootstrap, topic, records, folder, max_offsets)
        print(f"{count} executor(s) {[e['pid'] for e in executors]}: cold sink run "
              f"{cold['rate']:,.0f}/s", flush=True)
        runs = []
        for run in range(args.runs):
            plain = plain_consumer_rate(bootstrap, topic, records, partitions)
            source = source_rate(spark, bootstrap, topic, records)
            sink = sink_run(spark, bootstrap, topic, records, folder, max_offsets)
            runs.append({"plain": plain, "source": source, "sink": sink["rate"],
                         "ratio": sink["rate"] / plain, "seconds": sink["seconds"],
                         "batches": sink["batches"]})
            print(f"  run {run + 1}: plain {plain:,.0f}/s  source {source:,.0f}/s  "
                  f"sink {sink['rate']:,.0f}/s  sink/plain {sink['rate'] / plain:.3f}",
                  flush=True)
    finally:
        spark.stop()
    return {"executors": count, "executor_processes": executors, "cold": cold["rate"],
            "runs": runs, "overhead": overhead_summary(runs)}


def print_cluster_table(cases: list[dict], args, max_offsets: int) -> None:
    from rich.console import Console
    from rich.table import Table
    console = Console(width=160)
    table = Table(title=f"Spark standalone, {args.sink_records:,} records of 100 B in "
                        f"{args.partitions} partitions, {max_offsets:,} per batch: medians of "
                        f"{args.runs} runs (min-max)")
    for column in ("case", "records/s", "sink / plain (per run)", "plain, same runs",
                   "source -> noop, same runs"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for case in cases:
        runs = case["runs"]
        table.add_row(f"source -> SQLite, {case['executors']} executor(s)",
                      spread([r["sink"] for r in runs], ",.0f"),
                      spread([r["ratio"] for r in runs], ".3f"),
                      spread([r["plain"] for r in runs], ",.0f"),
                      spread([r["source"] for r in runs], ",.0f"))
    all_plain = [r["plain"] for case in cases for r in case["runs"]]
    table.add_row("plain confluent-kafka consumer (all runs)", spread(all_plain, ",.0f"), "", "",
                  "")
    console.print(table)
    print_overhead(console, [(f"{case['executors']} executor(s)", case["overhead"])
                             for case in cases])


def print_overhead(console, rows: list[tuple[str, dict]]) -> None:
    from rich.table import Table
    table = Table(title="source per batch, medians over all timed batches: planning = "
                        "latestOffset + getBatch + queryPlanning, commit = walCommit + "
                        "commitOffsets, share = (planning + commit) / triggerExecution")
    table.add_column("case")
    for column in OVERHEAD_COLUMNS:
        table.add_column(column, justify="right")
    for label, overhead in rows:
        table.add_row(label, *overhead_cells(overhead))
    console.print(table)


def load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages: how shared it was while measuring."""
    return [float(value) for value in os.getloadavg()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=500_000,
                        help="local cases: records the plain consumer and the source read")
    parser.add_argument("--sink-records", type=int, default=200_000,
                        help="records each streaming query writes into SQLite")
    parser.add_argument("--executors", default=None, metavar="N,N,...",
                        help="run the cluster cases with these executor counts (e.g. 1,2,4) "
                             "instead of the local ones")
    parser.add_argument("--partitions", type=int, default=8,
                        help="cluster cases: partitions of the topic")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None,
                        help=f"records per batch (default {LOCAL_MAX_OFFSETS_PER_TRIGGER:,} "
                             f"local, {CLUSTER_MAX_OFFSETS_PER_TRIGGER:,} on the cluster)")
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args()

    sys.path.insert(0, str(HERE.parent / "src"))
    from oncelog.broker.process import BrokerProcess

    # Ctrl-C and SIGTERM unwind through the finally blocks that stop what was started (SIGINT
    # too: a shell starts a background job with it ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    folder = Path(tempfile.mkdtemp(prefix="oncelog-bench-pipeline-"))
    load_before = load_average()
    broker = None
    try:
        if args.bootstrap is None:
            broker = BrokerProcess(folder / "data", log_path=folder / "broker.log").start()
        bootstrap = args.bootstrap or broker.bootstrap
        if args.executors:
            result = {"mode": "cluster", **run_cluster(args, bootstrap, folder)}
        else:
            result = {"mode": "local", **run_local(args, bootstrap, folder)}
    finally:
        if broker:
            broker.stop()

    results = HERE / "results"
    results.mkdir(exist_ok=True)
    out = results / f"pipeline-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count(),
                               "load_average": {"before": load_before,
                                                "after": load_average()},
                               "args": vars(args), **result}, indent=2))
    print(f"raw runs: {out}")


if __name__ == "__main__":
    main()
