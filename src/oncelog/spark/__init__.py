"""The data pipeline on PySpark: a Kafka source for Spark 4 and sinks that write exactly once.

``register(spark)`` makes ``spark.readStream.format("oncelog")`` and
``spark.read.format("oncelog")`` available. The source takes the options and produces the
schema of Spark's own Kafka connector (``kafka.bootstrap.servers``, ``subscribe``,
``startingOffsets``, ...; columns key, value, topic, partition, offset, timestamp,
timestampType, headers), so existing code ports by changing the format name. It reads any
Kafka-protocol broker — oncelog's or an Apache Kafka cluster — through confluent-kafka.

Modules:
- ``options``   the source's options, checked on the driver before a query starts
- ``offsets``   per-partition offsets as Spark's checkpoint stores them, and rate limiting
- ``cluster``   driver-side lookups: partitions, earliest/latest offsets, offsets for times
- ``ranges``    one offset range, read on an executor into Arrow record batches
- ``retries``   which broker errors are asked again, how often (``fetchOffset.*``)
- ``source``    the Data Source, its batch reader and its stream reader
- ``session``   a local SparkSession with the settings PySpark's Python workers need
- ``connect_server``  Spark's Connect server started from the PySpark installation
- ``connect_client``  a fix to PySpark's Connect client that ``register`` applies (SPARK-59135)
- ``errors``    the source's errors, one sentence each
- ``sinks``     exactly-once sinks: files, database transaction with offsets, upserts, Kafka
- ``copy_job``  a streaming job copying a topic into a sink (``python -m``; the verifier's)
- ``pipeline``  the example pipeline ``oncelog pipeline run`` runs; ``pipeline_runner`` runs
                it end to end (broker, generator, Spark, progress, report)
- ``standalone``  a Spark standalone cluster (Master, Workers) from the PySpark installation;
                ``process_group`` starts Spark's processes, each in a process group of its own
- ``ship``      oncelog as a zip for executors whose Python lacks it
- ``status``    where an application's tasks ran, from the driver's status REST API
"""

from __future__ import annotations

SOURCE_NAME = "oncelog"


def register(spark) -> None:
    """Register the ``oncelog`` format with this SparkSession (once per session).

    A Spark Connect session (``SparkSession.builder.remote(...)``) registers it the same way,
    on the server; its client is also made to skip the metrics a Python data source sends in
    command streams, which PySpark 4.3.0 mistakes for errors (``connect_client``)."""
    from .connect_client import is_connect_session, tolerate_metrics_in_command_streams
    from .source import OncelogDataSource
    if is_connect_session(spark):
        tolerate_metrics_in_command_streams()
    spark.dataSource.register(OncelogDataSource)


__all__ = ["SOURCE_NAME", "register"]
