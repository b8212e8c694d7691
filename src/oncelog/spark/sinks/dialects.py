"""What differs between SQLite and PostgreSQL: SQL types, placeholders, locking, values.

Both speak ``INSERT ... ON CONFLICT (keys) DO UPDATE SET c = excluded.c`` (SQLite since
3.24) and transactional DDL, so the sinks build one SQL text for both; a dialect supplies:
- ``placeholder`` (``?`` for sqlite3, ``%s`` for psycopg) and the SQL type of each column kind
  (the table is in ``columns.py``);
- ``begin_sql``: SQLite's ``BEGIN IMMEDIATE`` takes the write lock at once, so "read the last
  batch id, then write" cannot interleave with another writer; PostgreSQL instead takes a
  transaction-scoped advisory lock per query name (``lock_query``);
- value converters: how a value PySpark returns for each kind is stored (``converter``), and
  ``adapt`` for rows given without a schema (bytearray/memoryview become bytes; dicts become
  JSON; on SQLite, which stores no dates or decimals, those become ISO 8601 / exact text and
  lists JSON; PostgreSQL adapts lists to arrays itself).
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from .columns import Column, to_json_text
from .errors import quote_identifier

_UTC = datetime.UTC


def _identity(value: Any) -> Any:
    return value


def _to_bytes(value: Any) -> bytes:
    return bytes(value)


def _aware_utc(value: datetime.datetime) -> datetime.datetime:
    # PySpark hands out a TimestampType value as a naive local datetime; astimezone() reads
    # a naive datetime as local time, exactly how fromtimestamp() produced it.
    return value.astimezone(_UTC)


class Dialect:
    name = ""
    placeholder = "?"
    begin_sql = "BEGIN"
    now_sql = ""
    identity_key_sql = ""  # the type of a primary key the database numbers, never reusing one
    types: dict[str, str] = {}
    converters: dict[str, Callable[[Any], Any]] = {}

    def driver_errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def sql_type(self, column: Column) -> str:
        return self.types[column.kind]

    def converter(self, kind: str) -> Callable[[Any], Any]:
        return self.converters.get(kind, _identity)

    def adapt(self, value: Any) -> Any:
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        if isinstance(value, dict):
            return to_json_text(value)
        return value

    def table_exists_query(self, table: str) -> tuple[str, tuple]:
        raise NotImplementedError

    def column_exists_query(self, table: str, column: str) -> tuple[str, tuple]:
        """A query whose one value is 0 when ``table`` has no column ``column``."""
        raise NotImplementedError

    def lock_query(self, name: str) -> tuple[str, tuple] | None:
        """A statement that serializes writers of ``name`` until the transaction ends."""
        return None

    def placeholders(self, count: int) -> str:
        return ", ".join([self.placeholder] * count)

    def create_table_sql(self, table: str, columns: Sequence[Column],
                         primary_key: Sequence[str] = ()) -> str:
        lines = []
        for column in columns:
            not_null = " NOT NULL" if column.name in primary_key else ""  # SQLite allows NULL keys
            lines.append(f"{quote_identifier(column.name)} {self.sql_type(column)}{not_null}")
        if primary_key:
            lines.append(f"PRIMARY KEY ({', '.join(map(quote_identifier, primary_key))})")
        return f"CREATE TABLE IF NOT EXISTS {quote_identifier(table)} ({', '.join(lines)})"

    def insert_sql(self, table: str, columns: Sequence[str]) -> str:
        names = ", ".join(map(quote_identifier, columns))
        return (f"INSERT INTO {quote_identifier(table)} ({names}) "
                f"VALUES ({self.placeholders(len(columns))})")

    def upsert_sql(self, table: str, columns: Sequence[str], key_columns: Sequence[str]) -> str:
        keys = ", ".join(map(quote_identifier, key_columns))
        updates = [f"{quote_identifier(name)} = excluded.{quote_identifier(name)}"
                   for name in columns if name not in key_columns]
        action = f"DO UPDATE SET {', '.join(updates)}" if updates else "DO NOTHING"
        return f"{self.insert_sql(table, columns)} ON CONFLICT ({keys}) {action}"


class SQLiteDialect(Dialect):
    name = "sqlite"
    placeholder = "?"
    begin_sql = "BEGIN IMMEDIATE"
    identity_key_sql = "INTEGER PRIMARY KEY AUTOINCREMENT"
    now_sql = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    types = {
        "text": "TEXT", "binary": "BLOB", "smallint": "INTEGER", "integer": "INTEGER",
        "bigint": "INTEGER", "real": "REAL", "double": "REAL", "boolean": "INTEGER",
        "timestamp": "TEXT", "timestamp_ntz": "TEXT", "date": "TEXT", "decimal": "TEXT",
        "json": "TEXT",
    }
    converters = {
        "binary": _to_bytes,
        "timestamp": lambda value: _aware_utc(value).isoformat(),
        "timestamp_ntz": lambda value: value.isoformat(),
        "date": lambda value: value.isoformat(),
        "decimal": str,
        "json": to_json_text,
    }

    def driver_errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.Error,)

    def adapt(self, value: Any) -> Any:
        if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date too
            return value.isoformat()
        if isinstance(value, decimal.Decimal):
            return str(value)
        if isinstance(value, (list, tuple)):
            return to_json_text(value)
        return super().adapt(value)

    def table_exists_query(self, table: str) -> tuple[str, tuple]:
        return "SELECT max(name) FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)

    def column_exists_query(self, table: str, column: str) -> tuple[str, tuple]:
        return "SELECT count(*) FROM pragma_table_info(?) WHERE name = ?", (table, column)


class PostgreSQLDialect(Dialect):
    name = "postgresql"
    placeholder = "%s"
    begin_sql = "BEGIN"
    identity_key_sql = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    now_sql = "now()"
    types = {
        "text": "TEXT", "binary": "BYTEA", "smallint": "SMALLINT", "integer": "INTEGER",
        "bigint": "BIGINT", "real": "REAL", "double": "DOUBLE PRECISION", "boolean": "BOOLEAN",
        "timestamp": "TIMESTAMPTZ", "timestamp_ntz": "TIMESTAMP", "date": "DATE",
        "json": "JSONB",
    }
    converters = {"binary": _to_bytes, "timestamp": _aware_utc, "json": to_json_text}

    def driver_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg
        return (psycopg.Error,)

    def sql_type(self, column: Column) -> str:
        if column.kind == "decimal":
            return f"NUMERIC({column.precision}, {column.scale})"
        return super().sql_type(column)

    def table_exists_query(self, table: str) -> tuple[str, tuple]:
        return "SELECT to_regclass(%s)", (quote_identifier(table),)

    def column_exists_query(self, table: str, column: str) -> tuple[str, tuple]:
        return ("SELECT count(*) FROM information_schema.columns WHERE table_schema = "
                "current_schema() AND table_name = %s AND column_name = %s", (table, column))

    def lock_query(self, name: str) -> tuple[str, tuple]:
        digest = hashlib.blake2b(f"oncelog.sink:{name}".encode(), digest_size=8).digest()
        return "SELECT pg_advisory_xact_lock(%s)", (int.from_bytes(digest, "big", signed=True),)


SQLITE = SQLiteDialect()
POSTGRESQL = PostgreSQLDialect()
