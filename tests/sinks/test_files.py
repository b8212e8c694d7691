"""write_files/read_files: Spark's file sink, read back through its _spark_metadata log."""

from __future__ import annotations

import shutil

import pyarrow.parquet
import pytest

from oncelog.spark.sinks import SinkError, read_files, write_files


def run_available_now(spark, output, checkpoint, format="parquet", **options) -> None:
    stream = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5)
              .option("numPartitions", 2).load())
    writer = write_files(stream, output, checkpoint, format=format, **options)
    query = writer.trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(60)
        assert query.exception() is None
    finally:
        query.stop()


@pytest.mark.slow
def test_read_files_ignores_files_the_metadata_log_does_not_name(spark, tmp_path):
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    run_available_now(spark, output, checkpoint, compression="zstd")
    run_available_now(spark, output, checkpoint, compression="zstd")

    values = sorted(row.value for row in read_files(spark, output).collect())
    assert values == list(range(10))
    assert {"0", "1"} <= {path.name for path in (output / "_spark_metadata").iterdir()}
    written = sorted(output.glob("part-*.parquet"))
    assert written and all(".zstd." in path.name for path in written)  # options reach Spark

    # what a task killed mid-batch leaves behind: a data file no log entry names
    orphan = output / "part-99999-orphan-c000.zstd.parquet"
    shutil.copy(written[0], orphan)
    orphan_rows = pyarrow.parquet.read_table(orphan).num_rows
    assert orphan_rows > 0
    assert sorted(row.value for row in read_files(spark, output).collect()) == list(range(10))
    # any reader that lists the folder itself sees the orphan's rows twice
    assert pyarrow.parquet.read_table(output).num_rows == 10 + orphan_rows


def test_read_files_refuses_globs(spark, tmp_path):
    with pytest.raises(SinkError, match="_spark_metadata"):
        read_files(spark, tmp_path / "out" / "*.parquet")


@pytest.mark.slow  # the first streaming query of a session takes several seconds
def test_a_json_file_sink_round_trips_with_a_schema(spark, tmp_path):
    output, checkpoint = tmp_path / "json", tmp_path / "checkpoint"
    run_available_now(spark, output, checkpoint, format="json")
    assert list(output.glob("part-*.json")) and (checkpoint / "commits" / "0").exists()
    df = read_files(spark, output, format="json", schema="value long, timestamp timestamp")
    assert df.columns == ["value", "timestamp"]
    assert sorted(row.value for row in df.collect()) == [0, 1, 2, 3, 4]
