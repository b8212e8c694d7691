"""Open a sink's database from a URL, and run statements in all-or-nothing transactions.

URLs:
- ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (SQLAlchemy's spelling: the
  path is everything after the third slash), or a plain path ending ``.db``, ``.sqlite`` or
  ``.sqlite3``. The file is created if missing; its directory must exist.
- ``postgresql://user:password@host:port/dbname`` (or ``postgres://``), opened with psycopg 3,
  which is imported only when such a URL is used, so SQLite needs no extra package.

A ``Database`` is one connection in autocommit mode: ``transaction()`` issues BEGIN and COMMIT
itself, and rolls back on any exception, so whatever runs inside lands whole or not at all.
Driver errors leave this module as ``SinkError``: one sentence naming the database (password
hidden) and the driver's first line; the driver's exception is kept as ``__cause__``.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from .dialects import POSTGRESQL, SQLITE, Dialect
from .errors import SinkError, first_line

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
SQLITE_BUSY_TIMEOUT_S = 30.0
POSTGRESQL_CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True)
class DatabaseLocation:
    """Where a database lives: the dialect, what to pass the driver, and a printable URL."""
    dialect: Dialect
    target: str
    display: str


def parse_url(url: str | Path) -> DatabaseLocation:
    """Check a database URL without connecting; raises ``SinkError`` for unsupported ones."""
    text = str(url)
    if text.startswith("sqlite:"):
        if not text.startswith("sqlite:///"):
            raise SinkError(f"SQLite URL {text!r} must look like sqlite:///relative.db or "
                            "sqlite:////absolute/path.db.")
        path = text[len("sqlite:///"):]
        if not path or path == ":memory:" or path.startswith("file:"):
            raise SinkError(f"SQLite URL {text!r} must name a database file (an in-memory "
                            "database would not outlive one batch's connection).")
        return DatabaseLocation(SQLITE, path, text)
    if text.startswith(("postgresql://", "postgres://")):
        return DatabaseLocation(POSTGRESQL, text, hide_password(text))
    if "://" not in text and text.lower().endswith(_SQLITE_SUFFIXES):
        return DatabaseLocation(SQLITE, text, text)
    scheme = text.split("://", 1)[0] if "://" in text else text
    raise SinkError(f"unsupported database URL {hide_password(text)!r}: use sqlite:///path.db, "
                    f"a path ending .db/.sqlite, or postgresql://... (got {scheme!r}).")


def hide_password(url: str) -> str:
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.rsplit("@", 1)
        user = netloc[0].split(":", 1)[0]
        return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))
    except ValueError:
        return "<unparsable URL>"


def split_password(url: str) -> tuple[str, str | None]:
    """``url`` without its password, and the password (None when it has none)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url, None
    except ValueError:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}")), unquote(parts.password)


def with_password(url: str, password: str) -> str:
    """``url`` (without a password) with ``password`` put in."""
    parts = urlsplit(url)
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


def open_database(url: str | Path) -> Database:
    """Connect to the database at ``url``; ``SinkError`` if it cannot be opened."""
    location = parse_url(url)
    if location.dialect is SQLITE:
        return _open_sqlite(location)
    return _open_postgresql(location)


def _open_sqlite(location: DatabaseLocation) -> Database:
    try:
        # isolation_level=None: autocommit, so BEGIN/COMMIT below are ours alone
        connection = sqlite3.connect(location.target, timeout=SQLITE_BUSY_TIMEOUT_S,
                                     isolation_level=None)
    except sqlite3.Error as error:
        raise SinkError(f"cannot open database {location.display}: {first_line(error)}.") from error
    try:
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()  # "not a database"?
    except sqlite3.Error as error:
        connection.close()
        raise SinkError(f"cannot open database {location.display}: {first_line(error)}.") from error
    return Database(connection, location)


def _open_postgresql(location: DatabaseLocation) -> Database:
    try:
        import psycopg
    except ImportError as error:
        raise SinkError("PostgreSQL URLs need psycopg 3: pip install 'oncelog[postgresql]'.") \
            from error
    try:
        connection = psycopg.connect(location.target, autocommit=True,
                                     connect_timeout=POSTGRESQL_CONNECT_TIMEOUT_S)
    except psycopg.Error as error:
        message = first_line(error).replace(location.target, location.display)
        raise SinkError(f"cannot connect to database {location.display}: {message}") from error
    return Database(connection, location)


class Database:
    """One open connection; statements use the dialect's ``?``/``%s`` placeholders."""

    def __init__(self, connection: Any, location: DatabaseLocation) -> None:
        self.connection = connection
        self.location = location
        self.dialect = location.dialect

    def execute(self, sql: str, params: Iterable[Any] = ()) -> Any:
        return self.connection.execute(sql, tuple(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        cursor = self.connection.cursor()
        try:
            cursor.executemany(sql, rows)
        finally:
            cursor.close()

    def executemany_chunked(self, sql: str, rows: Iterable[Sequence[Any]], chunk_size: int) -> int:
        """``executemany`` ``chunk_size`` rows at a time; returns how many rows were sent."""
        iterator = iter(rows)
        count = 0
        while chunk := list(itertools.islice(iterator, chunk_size)):
            self.executemany(sql, chunk)
            count += len(chunk)
        return count

    def fetchone(self, sql: str, params: Iterable[Any] = ()) -> tuple | None:
        return self.execute(sql, params).fetchone()

    def fetchrow(self, sql: str, params: Iterable[Any] = ()) -> tuple[Any, ...]:
        """The row of a query that always answers one (an aggregate)."""
        row = self.fetchone(sql, params)
        assert row is not None, f"no row from {sql}"
        return row

    def fetchvalue(self, sql: str, params: Iterable[Any] = ()) -> Any:
        return self.fetchrow(sql, params)[0]

    def table_exists(self, table: str) -> bool:
        sql, params = self.dialect.table_exists_query(table)
        return self.fetchvalue(sql, params) is not None

    @contextmanager
    def translate_errors(self, doing: str, outcome: str = "failed") -> Iterator[None]:
        """Driver errors inside become one ``SinkError`` sentence; ``doing`` names the work."""
        try:
            yield
        except self.dialect.driver_errors() as error:
            raise SinkError(f"{doing} in {self.location.display} {outcome}: "
                            f"{first_line(error)}") from error

    @contextmanager
    def transaction(self, doing: str) -> Iterator[Database]:
        """BEGIN ... COMMIT; any exception rolls back, and driver errors become ``SinkError``.

        ``doing`` completes the error sentence, e.g. 'writing batch 3 to table "events"'.
        """
        with self.translate_errors(doing, "failed and was rolled back"):
            self.execute(self.dialect.begin_sql)
            try:
                yield self
            except BaseException:
                self._rollback_quietly()
                raise
            try:
                self.execute("COMMIT")
            except BaseException:
                self._rollback_quietly()
                raise

    def _rollback_quietly(self) -> None:
        try:
            self.execute("ROLLBACK")
        except Exception:  # the connection may be gone; closing it discards the transaction
            pass

    def close(self) -> None:
        try:
            self.connection.close()
        except Exception:
            pass

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
