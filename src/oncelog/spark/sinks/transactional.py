"""``TransactionalSink``: a micro-batch and its marker land in one database transaction.

Use it as ``df.writeStream.foreachBatch(TransactionalSink(url, "events", query_name="q"))``.
Spark runs a micro-batch, then records it in the checkpoint's ``commits/`` log; if the driver
dies in between, the restarted query runs the same batch id again over the same offsets. So
each batch is written, in ONE transaction, together with a row of ``oncelog_sink_batches``:

    query_name TEXT, batch_id BIGINT, end_offsets TEXT (JSON), row_count BIGINT,
    committed_at (TEXT on SQLite, TIMESTAMPTZ on PostgreSQL), spark_batch_id BIGINT,
    start_offsets TEXT (JSON), PRIMARY KEY (query_name, batch_id)

and a batch Spark runs again (the last one committed) is skipped whole.
Either the rows and their marker are both committed or neither is: a failure anywhere in the
batch (a constraint, the database, an exception from Spark while rows are read) rolls back.

``end_offsets`` holds, like Spark's own offset log, the position reached in every partition
seen so far: the batch's ``{topic: {partition: max(offset) + 1}}`` (when it has the Kafka
source's ``topic``, ``partition`` and ``offset`` columns) laid over the previous marker's,
unless Spark's own planned offsets are known (below). ``committed_offsets()`` is where to
resume.

The stored offsets are the truth about where the query stands (``positions`` explains the
rules). Inside a streaming query the sink reads the start and end offsets Spark planned for
the batch (``positions.planned_offsets``) and stores those, exactly; each batch must start
where the last one stored ended, or it is refused with one ``SinkError`` sentence and
nothing is written: a checkpoint from another query, an older copy of the checkpoint, or a
table rewound under a running checkpoint would otherwise skip or repeat records. A query
started with NO checkpoint resumes exactly after the stored offsets when its source is
given ``source_options()`` (``startingOffsetsFromSink``); Spark numbers its batches from 0
again, so ``batch_id`` in the table is the sink's own count (Spark's batch id while one
checkpoint lasts) and ``spark_batch_id`` is Spark's. Two columns came with this:
``spark_batch_id BIGINT`` and ``start_offsets TEXT`` (NULL when the offsets were taken from
rows); an older table gets them on its next batch.

Invariants and caveats:
- The replay Spark runs after a crash has the last batch's Spark id and end offsets: skipped.
- When the planned offsets are not known (Spark Connect, a source without Kafka offsets,
  ``write_batch`` without ``start_offsets``) the end offsets come from the rows as above.
  Inside a query, the rows' first and last offsets per partition (one aggregation over the
  batch before it is written) then tell a replay (every row held: skipped) from new
  records (written, whatever the batch id) and from an overlap (refused); without offset
  columns only batch ids can be checked: a batch id below the last committed one is refused.
- Rows are streamed with ``toLocalIterator`` (``columns.local_rows``: the next partition is
  computed while the driver inserts the current one) and inserted ``chunk_size`` at a time:
  the driver holds two Spark partitions at most, never the whole batch. A batch is one
  transaction, so its size is bounded by what the database accepts in one.
- A connection is opened per batch and closed after: the sink holds no connection, so it can
  be pickled (Spark Connect ships foreachBatch functions to the server).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .columns import Column, OffsetTracker, check_column_names, columns_from_schema, spark_rows
from .database import Database, open_database, parse_url, split_password
from .errors import SinkError, quote_identifier
from .positions import Batch, Marker, decide, normalise, planned_offsets, row_offsets

BATCHES_TABLE = "oncelog_sink_batches"
CHUNK_SIZE = 1000

EndOffsets = dict[str, dict[str, int]]


class TransactionalSink:
    def __init__(self, url: str | Path, table: str, *, query_name: str = "default",
                 create_table: bool = True, chunk_size: int = CHUNK_SIZE) -> None:
        self.url = str(url)
        self.dialect = parse_url(url).dialect  # a bad URL fails here, before a query starts
        quote_identifier(table)
        if not isinstance(query_name, str) or not query_name:
            raise SinkError("query_name must be a non-empty string.")
        if chunk_size < 1:
            raise SinkError(f"chunk_size must be at least 1, not {chunk_size}.")
        self.table = table
        self.query_name = query_name
        self.create_table = create_table
        self.chunk_size = chunk_size

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        """foreachBatch entry point: write ``batch_df`` as batch ``batch_id``, once."""
        columns = columns_from_schema(batch_df.schema)
        names = [column.name for column in columns]
        tracker = OffsetTracker(names)
        converters = [self.dialect.converter(column.kind) for column in columns]
        planned = planned_offsets(batch_df)  # before any row is read: a refusal reads none
        # no plan to read (Spark Connect): where the rows lie decides (positions, rule 4)
        seen = row_offsets(batch_df) if planned is None else None
        rows = spark_rows(batch_df, converters, tracker.observe if tracker.enabled else None)
        try:
            self._write(names, rows, batch_id, tracker.end_offsets, planned=planned,
                        create_columns=columns if self.create_table else None,
                        row_offsets=seen)
        finally:
            rows.close()  # a skipped or failed batch releases Spark's local iterator now

    def write_batch(self, columns: Sequence[str], rows: Iterable[Sequence[Any]], batch_id: int,
                    end_offsets: EndOffsets | None = None, *, ddl: str | None = None,
                    start_offsets: EndOffsets | None = None) -> bool:
        """Write ``rows`` as batch ``batch_id`` with its marker; False if already committed.

        With ``start_offsets`` too, ``[start_offsets, end_offsets)`` is the batch's exact
        input range and is checked against the stored position (module docstring); without,
        ``end_offsets`` are the rows' own (``max(offset) + 1``).

        Without Spark there is no schema to create the table from: it must exist, or ``ddl``
        (run in the same transaction, e.g. ``CREATE TABLE IF NOT EXISTS ...``) must create it.
        Values are adapted as ``Dialect.adapt`` describes.
        """
        check_column_names(list(columns))
        adapt = self.dialect.adapt
        adapted = (tuple(adapt(value) for value in row) for row in rows)
        planned = None
        if start_offsets is not None:
            if end_offsets is None:
                raise SinkError("start_offsets need end_offsets: together they are the batch's "
                                "input range.")
            planned = (normalise(start_offsets), normalise(end_offsets))
        return self._write(list(columns), adapted, batch_id, lambda: end_offsets, ddl=ddl,
                           planned=planned)

    def _write(self, names: list[str], rows: Iterator[tuple], batch_id: int,
               end_offsets_of: Callable[[], EndOffsets | None], *,
               planned: tuple[EndOffsets, EndOffsets] | None = None,
               create_columns: list[Column] | None = None, ddl: str | None = None,
               row_offsets: tuple[EndOffsets, EndOffsets] | None = None) -> bool:
        batch_id = int(batch_id)
        doing = (f"writing batch {batch_id} of query {self.query_name!r} "
                 f"to table {self.table!r}")
        with open_database(self.url) as db, db.transaction(doing):
            lock = db.dialect.lock_query(self.query_name)
            if lock is not None:
                db.execute(*lock)
            _create_batches_table(db)
            sequence, last = _last_marker(db, self.query_name)
            start_offsets, planned_end = planned or (None, None)
            if not decide(last, Batch(batch_id, start_offsets, planned_end, row_offsets),
                          what=f"query {self.query_name!r}"):
                return False
            self._prepare_table(db, create_columns, ddl)
            row_count = db.executemany_chunked(db.dialect.insert_sql(self.table, names), rows,
                                               self.chunk_size)
            offsets = merge_offsets(last.end_offsets if last else None,
                                    planned_end if planned else end_offsets_of())
            # A new checkpoint counts from 0 again: the sink's own count goes on.
            sink_batch_id = batch_id if sequence is None or batch_id > sequence else sequence + 1
            p = db.dialect.placeholder
            db.execute(f"INSERT INTO {BATCHES_TABLE} (query_name, batch_id, end_offsets, "
                       f"row_count, committed_at, spark_batch_id, start_offsets) VALUES "
                       f"({p}, {p}, {p}, {p}, {db.dialect.now_sql}, {p}, {p})",
                       (self.query_name, sink_batch_id,
                        None if offsets is None else json.dumps(offsets), row_count, batch_id,
                        None if start_offsets is None else json.dumps(start_offsets)))
        return True

    def _prepare_table(self, db: Database, columns: list[Column] | None, ddl: str | None) -> None:
        if ddl is not None:
            db.execute(ddl)
        elif columns is not None:
            db.execute(db.dialect.create_table_sql(self.table, columns))
        elif not db.table_exists(self.table):
            raise SinkError(f"table {self.table!r} does not exist in {db.location.display}; "
                            "create it, or pass ddl=.")

    def last_batch_id(self) -> int | None:
        """Spark's id of the last batch committed for this query, or None if there is none."""
        marker = self._read_last_marker()
        return None if marker is None else marker.spark_batch_id

    def committed_offsets(self) -> EndOffsets | None:
        """The end offsets stored with the last committed batch (see the module docstring)."""
        marker = self._read_last_marker()
        return None if marker is None else marker.end_offsets

    def source_options(self) -> dict[str, str]:
        """Options for the ``oncelog`` source: a query started without a checkpoint begins
        exactly where this sink's stored offsets end (``.options(**sink.source_options())``).
        A password in the URL goes in an option of its own, which Spark redacts where it
        shows a query's options."""
        url, password = split_password(self.url)
        options = {"startingOffsetsFromSink": url, "sinkQueryName": self.query_name}
        if password is not None:
            options["startingOffsetsFromSinkPassword"] = password
        return options

    def _read_last_marker(self) -> Marker | None:
        with open_database(self.url) as db, \
                db.translate_errors(f"reading the markers of query {self.query_name!r}"):
            return read_last_marker(db, self.query_name)


def read_last_marker(db: Database, query_name: str) -> Marker | None:
    """The last marker of ``query_name`` in an open database, without changing anything."""
    if not db.table_exists(BATCHES_TABLE):
        return None
    return _last_marker(db, query_name, new_columns=_has_column(db, "spark_batch_id"))[1]


def _create_batches_table(db: Database) -> None:
    committed_at_type = db.dialect.types["timestamp"]
    db.execute(f"CREATE TABLE IF NOT EXISTS {BATCHES_TABLE} (query_name TEXT NOT NULL, "
               f"batch_id BIGINT NOT NULL, end_offsets TEXT, row_count BIGINT NOT NULL, "
               f"committed_at {committed_at_type} NOT NULL, spark_batch_id BIGINT, "
               f"start_offsets TEXT, PRIMARY KEY (query_name, batch_id))")
    # A table made before the sink checked offsets: add what it lacks, in the batch's
    # transaction. SQLite's BEGIN IMMEDIATE serializes every writer; on PostgreSQL writers
    # of two query names may race here, which IF NOT EXISTS settles.
    if_not_exists = "IF NOT EXISTS " if db.dialect.name == "postgresql" else ""
    for column, sql_type in (("spark_batch_id", "BIGINT"), ("start_offsets", "TEXT")):
        if not _has_column(db, column):
            db.execute(f"ALTER TABLE {BATCHES_TABLE} ADD COLUMN {if_not_exists}{column} "
                       f"{sql_type}")


def _has_column(db: Database, column: str) -> bool:
    return bool(db.fetchvalue(*db.dialect.column_exists_query(BATCHES_TABLE, column)) > 0)


def _last_marker(db: Database, query_name: str,
                 new_columns: bool = True) -> tuple[int | None, Marker | None]:
    """(the sink's batch_id, the marker) of the last committed batch, or (None, None)."""
    p = db.dialect.placeholder
    extra = "spark_batch_id, start_offsets" if new_columns else "NULL, NULL"
    row = db.fetchone(f"SELECT batch_id, end_offsets, {extra} FROM {BATCHES_TABLE} "
                      f"WHERE query_name = {p} ORDER BY batch_id DESC LIMIT 1", (query_name,))
    if row is None:
        return None, None
    sequence = int(row[0])
    spark_batch_id = sequence if row[2] is None else int(row[2])
    end_offsets = None if row[1] is None else json.loads(row[1])
    return sequence, Marker(spark_batch_id, end_offsets, exact=row[3] is not None)


def merge_offsets(previous: EndOffsets | None, batch: EndOffsets | None) -> EndOffsets | None:
    """``batch``'s partitions laid over ``previous``; topics sorted, partitions by number."""
    if previous is None and batch is None:
        return None
    merged: dict[str, dict[str, int]] = {}
    for offsets in (previous or {}, batch or {}):
        for topic, partitions in offsets.items():
            merged.setdefault(str(topic), {}).update(
                {str(partition): int(offset) for partition, offset in partitions.items()})
    return {topic: dict(sorted(merged[topic].items(), key=lambda item: int(item[0])))
            for topic in sorted(merged)}
