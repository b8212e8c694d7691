"""``TransactionalSink``: a micro-batch and its marker land in one database transaction.

Use it as ``df.writeStream.foreachBatch(TransactionalSink(url, "events", query_name="q"))``.
Spark runs a micro-batch, then records it in the checkpoint's ``commits/`` log; if the driver
dies in between, the restarted query runs the same batch id again over the same offsets. So
each batch is written, in ONE transaction, together with a row of ``oncelog_sink_batches``:

    query_name TEXT, batch_id BIGINT, end_offsets TEXT (JSON), row_count BIGINT,
    committed_at (TEXT on SQLite, TIMESTAMPTZ on PostgreSQL), PRIMARY KEY (query_name, batch_id)

and a batch whose id is not above the highest committed one for its query is skipped whole.
Either the rows and their marker are both committed or neither is: a failure anywhere in the
batch (a constraint, the database, an exception from Spark while rows are read) rolls back.

``end_offsets`` holds, like Spark's own offset log, the position reached in every partition
seen so far: the batch's ``{topic: {partition: max(offset) + 1}}`` (when it has the Kafka
source's ``topic``, ``partition`` and ``offset`` columns) laid over the previous marker's. So
``committed_offsets()`` is where to resume - e.g. as ``startingOffsets`` for a fresh query.

Invariants and caveats:
- The query name and checkpoint belong together: a query restarted from a NEW checkpoint
  counts batches from 0 again and, under the same name, would have every batch skipped
  (logged as a warning). Give it a new ``query_name``, or delete that name's markers.
- Rows are streamed with ``toLocalIterator`` and inserted ``chunk_size`` at a time: the driver
  holds one Spark partition, never the whole batch. A batch is one transaction, so its size
  is bounded by what the database accepts in one.
- A connection is opened per batch and closed after: the sink holds no connection, so it can
  be pickled (Spark Connect ships foreachBatch functions to the server).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from .columns import Column, OffsetTracker, check_column_names, columns_from_schema, spark_rows
from .database import Database, open_database, parse_url
from .errors import SinkError, quote_identifier

log = logging.getLogger(__name__)

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
        rows = spark_rows(batch_df, converters, tracker.observe if tracker.enabled else None)
        try:
            self._write(names, rows, batch_id, tracker.end_offsets,
                        create_columns=columns if self.create_table else None)
        finally:
            rows.close()  # a skipped or failed batch releases Spark's local iterator now

    def write_batch(self, columns: Sequence[str], rows: Iterable[Sequence[Any]], batch_id: int,
                    end_offsets: EndOffsets | None = None, *, ddl: str | None = None) -> bool:
        """Write ``rows`` as batch ``batch_id`` with its marker; False if already committed.

        Without Spark there is no schema to create the table from: it must exist, or ``ddl``
        (run in the same transaction, e.g. ``CREATE TABLE IF NOT EXISTS ...``) must create it.
        Values are adapted as ``Dialect.adapt`` describes.
        """
        check_column_names(list(columns))
        adapt = self.dialect.adapt
        adapted = (tuple(adapt(value) for value in row) for row in rows)
        return self._write(list(columns), adapted, batch_id, lambda: end_offsets, ddl=ddl)

    def _write(self, names: list[str], rows: Iterator[tuple], batch_id: int,
               end_offsets_of: Callable[[], EndOffsets | None], *,
               create_columns: list[Column] | None = None, ddl: str | None = None) -> bool:
        batch_id = int(batch_id)
        doing = (f"writing batch {batch_id} of query {self.query_name!r} "
                 f"to table {self.table!r}")
        with open_database(self.url) as db, db.transaction(doing):
            lock = db.dialect.lock_query(self.query_name)
            if lock is not None:
                db.execute(*lock)
            _create_batches_table(db)
            last_batch_id, previous_offsets = _last_marker(db, self.query_name)
            if last_batch_id is not None and batch_id <= last_batch_id:
                if batch_id < last_batch_id:
                    log.warning("skipping batch %d of query %r: batch %d is already committed "
                                "(was the query restarted from a new checkpoint?)",
                                batch_id, self.query_name, last_batch_id)
                return False
            self._prepare_table(db, create_columns, ddl)
            row_count = db.executemany_chunked(db.dialect.insert_sql(self.table, names), rows,
                                               self.chunk_size)
            offsets = merge_offsets(previous_offsets, end_offsets_of())
            p = db.dialect.placeholder
            db.execute(f"INSERT INTO {BATCHES_TABLE} (query_name, batch_id, end_offsets, "
                       f"row_count, committed_at) VALUES ({p}, {p}, {p}, {p}, "
                       f"{db.dialect.now_sql})",
                       (self.query_name, batch_id,
                        None if offsets is None else json.dumps(offsets), row_count))
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
        """The highest batch id committed for this query, or None if there is none."""
        return self._read_last_marker()[0]

    def committed_offsets(self) -> EndOffsets | None:
        """The end offsets stored with the last committed batch (see the module docstring)."""
        return self._read_last_marker()[1]

    def _read_last_marker(self) -> tuple[int | None, EndOffsets | None]:
        with open_database(self.url) as db, \
                db.translate_errors(f"reading the markers of query {self.query_name!r}"):
            if not db.table_exists(BATCHES_TABLE):
                return None, None
            return _last_marker(db, self.query_name)


def _create_batches_table(db: Database) -> None:
    committed_at_type = db.dialect.types["timestamp"]
    db.execute(f"CREATE TABLE IF NOT EXISTS {BATCHES_TABLE} (query_name TEXT NOT NULL, "
               f"batch_id BIGINT NOT NULL, end_offsets TEXT, row_count BIGINT NOT NULL, "
               f"committed_at {committed_at_type} NOT NULL, "
               f"PRIMARY KEY (query_name, batch_id))")


def _last_marker(db: Database, query_name: str) -> tuple[int | None, EndOffsets | None]:
    p = db.dialect.placeholder
    row = db.fetchone(f"SELECT batch_id, end_offsets FROM {BATCHES_TABLE} "
                      f"WHERE query_name = {p} ORDER BY batch_id DESC LIMIT 1", (query_name,))
    if row is None:
        return None, None
    return int(row[0]), None if row[1] is None else json.loads(row[1])


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
