"""The driver program of the standalone-cluster tests: a topic into ``TransactionalSink``, on a
master.

Run as a script (``python tests/spark_cluster/cluster_job.py --master spark://...``), in a
process group of its own (``oncelog.testing.spark.SparkDriver``), so a test can kill the
Python driver and its JVM with one SIGKILL and start it again from the same checkpoint.

Each row keeps the record's value, partition and offset, the Spark batch it was written in,
and **where it was read**: the task that reads a Spark partition through the ``oncelog``
source goes on, in the same task and so on the same executor, to evaluate ``where()`` on
its rows (no shuffle in between: one stage), which returns

- ``pids``: that Python worker's pid and all its ancestors' up to init, space-separated. On
  a standalone cluster the chain goes through the executor's JVM (Python worker -> PySpark
  daemon -> CoarseGrainedExecutorBackend -> Worker); in local mode through the driver's
  JVM and the driver itself. The tests compare it with the executors' pids
  (``StandaloneCluster.executors()``) and with this driver's pid.
- ``executor``: the executor id out of ``SPARK_LOG_URL_STDERR``, which a Worker sets for the
  executors it launches (empty in local mode).
- ``python``: that worker's ``sys.executable`` and where it imports ``oncelog`` from: the
  name of a zip shipped with ``--py-files``, or ``installed``.

``where()`` also sleeps ``--delay-ms`` per row, so a batch is in flight long enough to kill
an executor in it, and touches ``<--progress-dir>/<pid>`` (its content: the pid chain) so
the test sees which executor is reading right now. Being defined inside ``main`` of a
script, it travels to executors by value (cloudpickle): the executors need nothing of this
file, only the ``oncelog`` package for the source's reader.

Lines on stdout, flushed: ``started APP_ID``, ``batch N writing``, ``batch N written``,
``idle``, ``stopped``.
"""

from __future__ import annotations

import argparse
import sys
import time


def _say(line: str) -> None:
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--sink", required=True, help="sqlite:////path.db")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=400)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="sleep per row read")
    parser.add_argument("--progress-dir", default=None)
    parser.add_argument("--py-files", default=None, help="spark.submit.pyFiles")
    parser.add_argument("--stop-when-idle", type=float, default=None, metavar="SECONDS")
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from oncelog.spark.session import local_session
    from oncelog.spark.sinks import TransactionalSink

    config = {"spark.task.maxFailures": "4"}
    if args.py_files:
        config["spark.submit.pyFiles"] = args.py_files
    spark = local_session("oncelog-cluster-test", master=args.master, config=config)
    delay_s, progress_dir = args.delay_ms / 1000, args.progress_dir

    @F.udf("struct<pids:string, executor:string, python:string>")
    def where(_value):
        import os
        import re
        import sys
        import time as clock

        import oncelog
        chain, pid = [], os.getpid()
        while pid > 1:
            chain.append(str(pid))
            with open(f"/proc/{pid}/stat") as stat:       # "pid (comm) state ppid ..."
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])
        pids = " ".join(chain)
        if progress_dir:
            # Written aside and renamed: the test never reads a truncated, still-empty file.
            path = os.path.join(progress_dir, str(os.getpid()))
            with open(path + ".part", "w") as progress:
                progress.write(pids)
            os.replace(path + ".part", path)
        if delay_s:
            clock.sleep(delay_s)
        found = re.search(r"executorId=([^&]+)", os.environ.get("SPARK_LOG_URL_STDERR", ""))
        package = oncelog.__file__
        origin = os.path.basename(package.split(".zip")[0] + ".zip") if ".zip" in package \
            else "installed"
        return pids, found.group(1) if found else "", f"{sys.executable} {origin}"

    sink = TransactionalSink(args.sink, "records", query_name="cluster")
    records = (spark.readStream.format("oncelog")
               .option("kafka.bootstrap.servers", args.bootstrap)
               .option("subscribe", args.topic)
               .option("startingOffsets", "earliest")
               .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
               .options(**sink.source_options())
               .load()
               .select(F.col("value").cast("string").alias("value"), "partition", "offset",
                       where("value").alias("read_by"))
               .select("value", "partition", "offset", "read_by.pids", "read_by.executor",
                       "read_by.python"))

    def write(batch_df, batch_id: int) -> None:
        _say(f"batch {batch_id} writing")
        sink(batch_df.withColumn("batch", F.lit(batch_id)), batch_id)
        _say(f"batch {batch_id} written")

    query = (records.writeStream.foreachBatch(write)
             .option("checkpointLocation", args.checkpoint)
             .queryName("cluster").trigger(processingTime="200 milliseconds").start())
    _say(f"started {spark.sparkContext.applicationId}")
    try:
        busy_at = time.monotonic()
        while query.isActive:
            time.sleep(0.2)
            status = query.status
            if query.lastProgress is None or status["isTriggerActive"] or status["isDataAvailable"]:
                busy_at = time.monotonic()
            if args.stop_when_idle and time.monotonic() - busy_at > args.stop_when_idle:
                _say("idle")
                break
        if query.exception():
            print(f"cluster_job: the query failed: {query.exception()}", file=sys.stderr)
            return 1
    finally:
        query.stop()
        spark.stop()
        _say("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
