"""Spark's file sink, and how to read its output back without seeing uncommitted files.

The file sink is exactly-once only through its metadata log. Each micro-batch's tasks write
files with unique names straight into the output folder; when the batch is done the driver
appends the list of those files to ``<path>/_spark_metadata/<batch_id>`` - that append is
the commit. A task that was killed, retried or speculatively duplicated, or a batch that was
running when the driver died (and is re-run under the same id after the restart), leaves
files that no log entry names: orphans, partial or duplicate data.

A Spark read of the folder itself (``read_files``, or ``spark.read.parquet(path)``) sees
``_spark_metadata`` and lists only the committed files, so the orphans are invisible. Anything
else that lists the folder - pandas, pyarrow, DuckDB, Trino, Hive, or Spark given a glob such
as ``path/*.parquet`` or a subfolder - reads the orphans too, and duplicates or half-written
rows appear. Read the output through Spark, or from a table format with its own transaction
log (Delta Lake, Iceberg), when other tools must read it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import SinkError

_GLOB_CHARACTERS = set("*?[]{}")


def write_files(stream_df: Any, path: str | Path, checkpoint: str | Path,
                format: str = "parquet", **options: Any) -> Any:
    """A ``DataStreamWriter`` for an append-only file sink at ``path``; call ``.start()``.

    ``options`` are passed to the writer (e.g. ``compression="zstd"``). Returns the writer
    so the caller picks the trigger: ``write_files(df, out, ckpt).trigger(availableNow=True)
    .start()``. The checkpoint and ``path`` belong together: a new checkpoint over an old
    output folder restarts batch ids at 0, and the sink silently skips every id its metadata
    log already holds.
    """
    writer = (stream_df.writeStream.format(format).outputMode("append")
              .option("path", str(path)).option("checkpointLocation", str(checkpoint)))
    if options:
        writer = writer.options(**options)  # PySpark spells booleans as Spark expects
    return writer


def read_files(spark: Any, path: str | Path, format: str = "parquet", schema: Any = None) -> Any:
    """A DataFrame of the committed files of a file sink's output folder ``path``.

    ``path`` must be the folder itself: Spark honours ``_spark_metadata`` only for a single
    folder path, so globs are refused. ``schema`` (a ``StructType`` or DDL string) skips
    schema inference, and is required for formats that cannot infer one.
    """
    text = str(path)
    if _GLOB_CHARACTERS & set(text):
        raise SinkError(f"read_files needs the output folder itself, not the pattern {text!r}: "
                        "Spark ignores _spark_metadata for globs.")
    reader = spark.read.format(format)
    if schema is not None:
        reader = reader.schema(schema)
    return reader.load(text)
