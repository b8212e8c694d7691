"""The sinks a verify run delivers into, and reading them back as ``Delivered`` records.

Where they live: by default each semantics has a SQLite file of its own in the run's output
folder (``<semantics>/sink.db``, tables ``deliveries`` or ``records``). With ``--sink URL``
(``sqlite:///...`` or ``postgresql://...``, the URLs of ``oncelog.spark.sinks``) every
semantics writes into that one database, each into a table of its own named
``oncelog_verify_<semantics>``, dropped and created again when a run starts.

Every row has a position that grows across the whole run (the checker's
``Delivered.position``): an identity column that is never reused (SQLite ``INTEGER PRIMARY
KEY AUTOINCREMENT``, PostgreSQL ``GENERATED ALWAYS AS IDENTITY``).

- ``DeliveriesTable`` — the consumers' sink (at-most-once, at-least-once): one row per
  record *processed*, committed at once (on SQLite in WAL mode, so it survives the
  consumer's ``kill -9``): ``(position, id, topic, partition, offset, time)``.
- ``ReadTable`` — the exactly-once reader's sink (``reader.py``): a ``DeliveriesTable`` plus
  ``<table>_positions (partition, next_offset)``, where the reader stores, in the same
  database transaction as each batch's rows, the position it has read each partition to:
  offsets stored with the output, so a reader killed at any moment resumes exactly after
  what the sink holds. Its ``ends()`` are those positions (under ``read_committed`` the
  log ends in control records the reader never delivers, so the rows' offsets would never
  reach the log end).
- ``PipelineTable`` — the Spark copy job's ``TransactionalSink`` table: the record's
  ``key``, ``value`` (from which the id is decoded), ``topic``, ``partition`` and
  ``offset``. It is created here, with the position column, before the copy job starts; the
  sink creates a table only when it is missing and names its columns in every INSERT, so
  the position fills itself. A batch's rows and its marker commit together, so a reader
  never sees half a batch.

``scan(writer)`` writes one ``Delivered`` per row, in position order; ``ends()`` is, per
partition, one past the highest offset delivered: the runner's drain waits until it
reaches the log end offsets. Anything the database refuses leaves as ``SinkUnavailable``,
one sentence.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...spark.sinks.database import Database, open_database, parse_url
from ...spark.sinks.dialects import SQLITE
from ...spark.sinks.errors import SinkError, quote_identifier
from ..history import HistoryWriter, decode_value

__all__ = ["DeliveriesTable", "PipelineTable", "ReadTable", "ReadWriter", "SinkUnavailable",
           "remove_sink_files", "sqlite_url"]

_SUFFIXES = ("", "-wal", "-shm", "-journal")


class SinkUnavailable(RuntimeError):
    """A sink cannot be opened, created or read."""


def sqlite_url(path: Path) -> str:
    """The URL of a SQLite file, absolute so that child processes agree on it."""
    return f"sqlite:///{Path(path).resolve()}"


def remove_sink_files(path: Path) -> None:
    """Delete a previous run's SQLite file and its journals (only files, never folders)."""
    for suffix in _SUFFIXES:
        candidate = Path(f"{path}{suffix}")
        if candidate.is_dir():
            raise SinkUnavailable(f"cannot open the sink {candidate}: it is a directory")
        candidate.unlink(missing_ok=True)


def _open(url: str) -> Database:
    try:
        return open_database(url)
    except SinkError as error:
        raise SinkUnavailable(f"cannot open the sink: {str(error).rstrip('.')}") from None


def _undecodable(topic: str, partition: int, offset: int | None) -> str:
    return f"undecodable@{topic}-{partition}-{offset}"


def _decode(value, topic: str, partition: int, offset: int | None) -> str:
    try:
        return decode_value(value)
    except ValueError:
        return _undecodable(topic, partition, offset)  # the checker counts it as unexpected


class _Table:
    default_table: str
    columns: tuple[tuple[str, str], ...]   # (name, column kind of dialects.types), after position

    def __init__(self, url: str | Path, table: str | None = None) -> None:
        self.url = str(url)
        self.table = table or self.default_table
        try:
            self.location = parse_url(self.url)
            self._quoted = quote_identifier(self.table)
        except SinkError as error:
            raise SinkUnavailable(str(error).rstrip(".")) from None

    @property
    def display(self) -> str:
        """Where the rows are, password hidden: ``URL table``."""
        return f"{self.location.display} table {self.table}"

    @property
    def path(self) -> Path | None:
        """The SQLite file, or None for a database server."""
        return Path(self.location.target) if self.location.dialect is SQLITE else None

    @contextmanager
    def _session(self, doing: str) -> Iterator[Database]:
        """An open database; whatever it refuses while ``doing`` is one ``SinkUnavailable``."""
        try:
            with _open(self.url) as db, db.translate_errors(f"{doing} {self.display}"):
                yield db
        except SinkError as error:
            raise SinkUnavailable(str(error).rstrip(".")) from None

    def create(self) -> None:
        dialect = self.location.dialect
        columns = ", ".join(f"{quote_identifier(name)} {dialect.types[kind]}"
                            for name, kind in self.columns)
        with self._session("creating the sink") as db:
            if dialect is SQLITE:
                db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"CREATE TABLE IF NOT EXISTS {self._quoted} "
                       f'("position" {dialect.identity_key_sql}, {columns})')

    def drop(self) -> None:
        """Remove a previous run's rows (the table itself: positions start again)."""
        with self._session("clearing the sink") as db:
            db.execute(f"DROP TABLE IF EXISTS {self._quoted}")

    def _rows(self, sql: str) -> list[tuple]:
        if self.path is not None and not self.path.exists():
            return []  # reading must not create the file
        with self._session("reading the sink") as db:
            if not db.table_exists(self.table):
                return []
            return list(db.execute(sql).fetchall())

    def count(self) -> int:
        """Rows delivered so far (copies, not distinct ids)."""
        rows = self._rows(f"SELECT count(*) FROM {self._quoted}")
        return int(rows[0][0]) if rows else 0

    def ends(self) -> dict[int, int]:
        """Partition -> one past the highest offset delivered from it."""
        return {int(partition): int(offset) + 1 for partition, offset in self._rows(
            f'SELECT "partition", max("offset") FROM {self._quoted} GROUP BY "partition"')}

    def delivered(self) -> Iterator[tuple[int, str, str, int, int | None]]:
        """(position, id, topic, partition, offset) per row, in position order."""
        raise NotImplementedError

    def scan(self, writer: HistoryWriter) -> int:
        """Write one ``Delivered`` per row; return how many."""
        rows = 0
        for position, id, topic, partition, offset in self.delivered():
            writer.delivered(id, topic, partition, offset, position)
            rows += 1
        return rows


class DeliveriesTable(_Table):
    """The consumers' sink: one committed row per processed record."""

    default_table = "deliveries"
    columns = (("id", "text"), ("topic", "text"), ("partition", "integer"),
               ("offset", "bigint"), ("time", "double"))
    def writer(self) -> DeliveryWriter:
        return DeliveryWriter(self.url, self.table)

    def delivered(self):
        # ids are stored decoded (an undecodable value as undecodable@...)
        for position, id, topic, partition, offset in self._rows(
                f'SELECT "position", id, topic, "partition", "offset" FROM {self._quoted} '
                'ORDER BY "position"'):
            yield int(position), id, topic, partition, offset


class DeliveryWriter:
    """The consumer side of ``DeliveriesTable``: one autocommitted INSERT per record.

    On SQLite, WAL with ``synchronous=NORMAL``: a commit reaches the OS before ``insert``
    returns, so it survives the consumer's ``kill -9`` (not a power cut, which is not a
    fault we inject). On PostgreSQL each INSERT is a transaction of its own.
    """

    def __init__(self, url: str, table: str = DeliveriesTable.default_table) -> None:
        self.db = _open(url)
        if self.db.dialect is SQLITE:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
        self.sql = self.db.dialect.insert_sql(
            table, [name for name, _ in DeliveriesTable.columns])

    def insert(self, value: bytes | None, topic: str, partition: int, offset: int) -> None:
        self.db.execute(self.sql, (_decode(value, topic, partition, offset), topic, partition,
                                   offset, time.time()))

    def close(self) -> None:
        self.db.close()


class ReadTable(DeliveriesTable):
    """The exactly-once reader's sink: rows and read positions, committed together."""

    @property
    def positions_table(self) -> str:
        return f"{self.table}_positions"

    def create(self) -> None:
        super().create()
        with self._session("creating the sink") as db:
            db.execute(f"CREATE TABLE IF NOT EXISTS {quote_identifier(self.positions_table)} "
                       '("partition" INTEGER PRIMARY KEY, next_offset BIGINT NOT NULL)')

    def drop(self) -> None:
        super().drop()
        with self._session("clearing the sink") as db:
            db.execute(f"DROP TABLE IF EXISTS {quote_identifier(self.positions_table)}")

    def ends(self) -> dict[int, int]:
        """Partition -> the position the reader has read it to (all before it is in the
        sink, or was not for delivering: aborted records, control records)."""
        if self.path is not None and not self.path.exists():
            return {}
        with self._session("reading the sink") as db:
            if not db.table_exists(self.positions_table):
                return {}
            return {int(partition): int(offset) for partition, offset in db.execute(
                f'SELECT "partition", next_offset FROM '
                f'{quote_identifier(self.positions_table)}').fetchall()}


class ReadWriter(DeliveryWriter):
    """The reader side of ``ReadTable``: each batch's rows and positions in one transaction."""

    def __init__(self, url: str, table: str = ReadTable.default_table) -> None:
        super().__init__(url, table)
        self.table = ReadTable(url, table)
        self.upsert_sql = self.db.dialect.upsert_sql(self.table.positions_table,
                                                     ["partition", "next_offset"], ["partition"])

    def positions(self) -> dict[int, int]:
        return self.table.ends()

    def write(self, records: list[tuple[bytes | None, str, int, int]],
              positions: dict[int, int]) -> None:
        """``records``: (value, topic, partition, offset); ``positions``: partition -> the
        next offset to read, stored with the rows."""
        now = time.time()
        rows = [(_decode(value, topic, partition, offset), topic, partition, offset, now)
                for value, topic, partition, offset in records]
        with self.db.transaction(f"writing {len(rows)} rows to {self.table.display}"):
            if rows:
                self.db.executemany(self.sql, rows)
            for partition, offset in sorted(positions.items()):
                self.db.execute(self.upsert_sql, (partition, offset))


class PipelineTable(_Table):
    """The Spark copy job's ``TransactionalSink`` table (its columns: ``copy_job``)."""

    default_table = "records"
    columns = (("key", "text"), ("value", "text"), ("topic", "text"), ("partition", "integer"),
               ("offset", "bigint"))

    def last_batch_id(self, query_name: str) -> int | None:
        """The last batch the ``TransactionalSink`` committed for ``query_name``: the
        highest batch id among its markers (``oncelog_sink_batches``), None before any."""
        from ...spark.sinks.transactional import BATCHES_TABLE
        if self.path is not None and not self.path.exists():
            return None
        with self._session("reading the batch markers of") as db:
            if not db.table_exists(BATCHES_TABLE):
                return None
            p = db.dialect.placeholder
            row = db.execute(f"SELECT max(batch_id) FROM {BATCHES_TABLE} WHERE query_name = {p}",
                             (query_name,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def delivered(self):
        for position, value, topic, partition, offset in self._rows(
                f'SELECT "position", value, topic, "partition", "offset" FROM {self._quoted} '
                'ORDER BY "position"'):
            yield int(position), _decode(value, topic, partition, offset), topic, partition, offset
