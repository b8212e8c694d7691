"""The sinks a verify run delivers into, and reading them back as ``Delivered`` records.

Both are SQLite files in the run's output folder, and both give every row a position that
grows across the whole run (the checker's ``Delivered.position``): the SQLite row id.

- ``DeliveriesTable`` — the consumers' sink (at-most-once, at-least-once): one row per
  record *processed*, committed at once (WAL, so it survives the consumer's ``kill -9``):
  ``deliveries(position INTEGER PRIMARY KEY AUTOINCREMENT, id, topic, partition, offset,
  time)``. AUTOINCREMENT: a position is never reused, even after the last row is gone.
- ``PipelineTable`` — the Spark copy job's sink (``TransactionalSink``): a ``records``
  table with the record's ``value`` (from which the id is decoded), ``topic``,
  ``partition`` and ``offset``; its implicit row id grows with every insert because rows
  are never deleted (SQLite hands out max(rowid) + 1), and a batch's rows and its marker
  commit together, so a reader never sees half a batch.

``scan(writer)`` writes one ``Delivered`` per row, in position order; ``ends()`` is, per
partition, one past the highest offset delivered: the runner's drain waits until it
reaches the log end offsets.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Iterator

from ..history import HistoryWriter, decode_value

__all__ = ["DeliveriesTable", "PipelineTable", "SinkUnavailable", "open_sink_file",
           "remove_sink_files"]

_SUFFIXES = ("", "-wal", "-shm", "-journal")


class SinkUnavailable(RuntimeError):
    """A sink file cannot be opened or created."""


def remove_sink_files(path: Path) -> None:
    """Delete a previous run's SQLite file and its journals (only files, never folders)."""
    for suffix in _SUFFIXES:
        candidate = Path(f"{path}{suffix}")
        if candidate.is_dir():
            raise SinkUnavailable(f"cannot open the sink {candidate}: it is a directory")
        candidate.unlink(missing_ok=True)


def open_sink_file(path: Path, *, timeout_s: float = 10.0) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
        connection.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return connection
    except (OSError, sqlite3.Error) as error:
        raise SinkUnavailable(f"cannot open the sink {path}: {error}") from None


def _undecodable(topic: str, partition: int, offset: int | None) -> str:
    return f"undecodable@{topic}-{partition}-{offset}"


def _decode(value, topic: str, partition: int, offset: int | None) -> str:
    try:
        return decode_value(value)
    except ValueError:
        return _undecodable(topic, partition, offset)  # the checker counts it as unexpected


class _Table:
    path: Path
    table: str

    def _connect(self) -> sqlite3.Connection:
        return open_sink_file(self.path)

    def _rows(self, sql: str) -> list[tuple]:
        if not self.path.exists():
            return []
        connection = self._connect()
        try:
            return connection.execute(sql).fetchall()
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                return []
            raise
        finally:
            connection.close()

    def count(self) -> int:
        """Rows delivered so far (copies, not distinct ids)."""
        rows = self._rows(f'SELECT count(*) FROM "{self.table}"')
        return rows[0][0] if rows else 0

    def ends(self) -> dict[int, int]:
        """Partition -> one past the highest offset delivered from it."""
        return {int(partition): int(offset) + 1 for partition, offset in self._rows(
            f'SELECT "partition", max("offset") FROM "{self.table}" GROUP BY "partition"')}

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

    table = "deliveries"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def create(self) -> None:
        connection = self._connect()
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(
                "CREATE TABLE IF NOT EXISTS deliveries (position INTEGER PRIMARY KEY "
                "AUTOINCREMENT, id TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER "
                "NOT NULL, \"offset\" INTEGER, time REAL NOT NULL)")
        except sqlite3.Error as error:
            raise SinkUnavailable(f"cannot create the sink {self.path}: {error}") from None
        finally:
            connection.close()

    def writer(self) -> "DeliveryWriter":
        return DeliveryWriter(self.path)

    def delivered(self):
        for position, id, topic, partition, offset in self._rows(
                'SELECT position, id, topic, partition, "offset" FROM deliveries '
                'ORDER BY position'):
            yield position, id, topic, partition, offset


class DeliveryWriter:
    """The consumer side of ``DeliveriesTable``: one autocommitted INSERT per record.

    WAL with ``synchronous=NORMAL``: a commit reaches the OS before ``insert`` returns, so
    it survives the consumer's ``kill -9`` (not a power cut, which is not a fault we inject).
    """

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, timeout=30, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=NORMAL")

    def insert(self, value: bytes | None, topic: str, partition: int, offset: int) -> None:
        self.connection.execute(
            'INSERT INTO deliveries (id, topic, partition, "offset", time) VALUES (?, ?, ?, ?, ?)',
            (_decode(value, topic, partition, offset), topic, partition, offset, time.time()))

    def close(self) -> None:
        self.connection.close()


class PipelineTable(_Table):
    """The Spark copy job's ``TransactionalSink`` table."""

    def __init__(self, path: Path, table: str = "records") -> None:
        self.path = Path(path)
        self.table = table

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def create(self) -> None:
        """The copy job creates its table; here we only prove the file can be opened."""
        self._connect().close()

    def delivered(self):
        for position, value, topic, partition, offset in self._rows(
                f'SELECT rowid, value, topic, "partition", "offset" FROM "{self.table}" '
                'ORDER BY rowid'):
            yield position, _decode(value, topic, partition, offset), topic, partition, offset
