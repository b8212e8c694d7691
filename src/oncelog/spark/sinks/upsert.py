"""``UpsertSink``: idempotent writes keyed by a primary key, so a replayed batch changes nothing.

Use it as ``df.writeStream.foreachBatch(UpsertSink(url, "accounts", ["account_id"]))``. Every
row is written with ``INSERT ... ON CONFLICT (keys) DO UPDATE SET <other columns> =
excluded.<column>`` (``DO NOTHING`` when every column is a key), one transaction per batch. A
batch Spark re-runs after a crash writes the same rows over themselves; unlike
``TransactionalSink`` no marker is needed - but it is exactly-once only for the table's final
state, and only if a batch's rows are the same when it is re-run.

Within a batch, rows are applied in order, so when two rows share a key the later one wins.
That holds on PostgreSQL too: its "ON CONFLICT DO UPDATE command cannot affect row a second
time" error concerns one statement carrying both rows (a multi-row VALUES); psycopg's
``executemany`` sends one statement per row (tested in ``tests/sinks/test_upsert.py``).

The table is created from the Spark schema with ``PRIMARY KEY (keys)`` and NOT NULL keys (SQLite
would otherwise accept NULL keys, which never conflict). An existing table must have a primary
key or unique constraint on exactly the key columns, or the database rejects the upsert.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .columns import check_column_names, columns_from_schema, spark_rows
from .database import Database, open_database, parse_url
from .errors import SinkError, quote_identifier
from .transactional import CHUNK_SIZE


class UpsertSink:
    def __init__(self, url: str | Path, table: str, key_columns: Sequence[str], *,
                 create_table: bool = True, chunk_size: int = CHUNK_SIZE) -> None:
        self.url = str(url)
        self.dialect = parse_url(url).dialect  # a bad URL fails here, before a query starts
        quote_identifier(table)
        if isinstance(key_columns, str):
            key_columns = [key_columns]
        key_columns = list(key_columns)
        if not key_columns:
            raise SinkError("an upsert needs at least one key column.")
        check_column_names(key_columns)
        if chunk_size < 1:
            raise SinkError(f"chunk_size must be at least 1, not {chunk_size}.")
        self.table = table
        self.key_columns = key_columns
        self.create_table = create_table
        self.chunk_size = chunk_size

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        """foreachBatch entry point; ``batch_id`` only names the batch in errors."""
        columns = columns_from_schema(batch_df.schema)
        names = [column.name for column in columns]
        self._check_keys(names)
        converters = [self.dialect.converter(column.kind) for column in columns]
        rows = spark_rows(batch_df, converters)
        ddl = (self.dialect.create_table_sql(self.table, columns, self.key_columns)
               if self.create_table else None)
        try:
            self._write(names, rows, ddl, f"upserting batch {int(batch_id)} into {self.table!r}")
        finally:
            rows.close()

    def write_rows(self, columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
                   ddl: str | None = None) -> int:
        """Upsert ``rows`` in one transaction; returns how many rows were sent.

        Without Spark there is no schema to create the table from: it must exist, or ``ddl``
        (run in the same transaction) must create it.
        """
        names = list(columns)
        check_column_names(names)
        self._check_keys(names)
        adapt = self.dialect.adapt
        adapted = (tuple(adapt(value) for value in row) for row in rows)
        return self._write(names, adapted, ddl, f"upserting rows into {self.table!r}")

    def _check_keys(self, names: list[str]) -> None:
        missing = [key for key in self.key_columns if key not in names]
        if missing:
            raise SinkError(f"key column(s) {', '.join(map(repr, missing))} are not among the "
                            f"columns {names}.")

    def _write(self, names: list[str], rows: Iterable[tuple], ddl: str | None, doing: str) -> int:
        with open_database(self.url) as db, db.transaction(doing):
            self._prepare_table(db, ddl)
            sql = db.dialect.upsert_sql(self.table, names, self.key_columns)
            return db.executemany_chunked(sql, rows, self.chunk_size)

    def _prepare_table(self, db: Database, ddl: str | None) -> None:
        if ddl is not None:
            db.execute(ddl)
        elif not db.table_exists(self.table):
            raise SinkError(f"table {self.table!r} does not exist in {db.location.display}; "
                            "create it, or pass ddl=.")
