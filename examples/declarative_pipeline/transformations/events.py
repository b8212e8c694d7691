"""A topic into a streaming table, and a materialized view over it.

``spark-pipelines`` imports this file with ``spark`` (a Spark Connect session) defined; the
``oncelog`` format is registered here, in the pipeline's own session. The broker and the
topic are the Spark confs ``spark.oncelog.bootstrap`` and ``spark.oncelog.topic``: given on
the command line (``--conf spark.oncelog.bootstrap=...``) when spark-pipelines starts its
own server, or in the spec's ``configuration:`` section (which also reaches a server given
with ``--remote``).

``events`` is a streaming table: each run of the pipeline reads what arrived since the last
(its offsets are in the pipeline's storage, as any streaming query's checkpoint) and appends
it, once. ``events_per_key`` is recomputed from ``events`` on every run.
"""

from pyspark import pipelines as dp
from pyspark.sql import functions as F

import oncelog.spark

oncelog.spark.register(spark)  # noqa: F821 - spark-pipelines defines ``spark``

BOOTSTRAP = spark.conf.get("spark.oncelog.bootstrap", "127.0.0.1:9092")  # noqa: F821
TOPIC = spark.conf.get("spark.oncelog.topic", "events")  # noqa: F821


@dp.table(comment=f"Every record of topic {TOPIC}, once")
def events():
    return (spark.readStream.format("oncelog")  # noqa: F821
            .option("kafka.bootstrap.servers", BOOTSTRAP)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                        "topic", "partition", "offset", "timestamp"))


@dp.materialized_view(comment="Records per key")
def events_per_key():
    return (spark.read.table("events")  # noqa: F821
            .groupBy("key").agg(F.count("*").alias("records")))
