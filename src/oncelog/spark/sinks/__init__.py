"""Exactly-once sinks for Structured Streaming: database transactions, upserts, files, Kafka.

- ``TransactionalSink`` (``transactional``) - each micro-batch and a marker row (batch id, start
  and end offsets) commit in one transaction; a batch Spark re-runs after a crash is skipped,
  and one that does not start where the stored offsets end is refused (``positions``).
- ``UpsertSink`` (``upsert``) - ``INSERT ... ON CONFLICT DO UPDATE`` by primary key, so a
  re-run batch rewrites the same rows.
- ``KafkaSink`` (``kafka``) - each micro-batch's records and its batch id (the metadata of a
  transactional offset commit) in one Kafka transaction, on any broker with transactions; a
  re-run batch is skipped. Readers use ``read_committed``. Rows pass through the driver.
- ``write_files`` / ``read_files`` (``files``) - Spark's file sink, whose ``_spark_metadata``
  log makes it exactly-once for readers that go through Spark.

Both database sinks are ``foreachBatch`` functions, take ``sqlite:///path.db`` or
``postgresql://...`` URLs (``database``; SQL differences in ``dialects``), map Spark types to
SQL types as ``columns`` tabulates, and raise ``SinkError`` (a ``ValueError``, ``errors``) with one
sentence; ``KafkaSink`` raises it too.
"""

from .database import Database, open_database, parse_url
from .errors import SinkError
from .files import read_files, write_files
from .kafka import KafkaSink
from .transactional import BATCHES_TABLE, TransactionalSink
from .upsert import UpsertSink

__all__ = ["BATCHES_TABLE", "Database", "KafkaSink", "SinkError", "TransactionalSink",
           "UpsertSink", "open_database", "parse_url", "read_files", "write_files"]
