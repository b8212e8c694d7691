"""Read a sink's tables back with the plain drivers (sqlite3, psycopg), not through the sinks."""

from __future__ import annotations

import sqlite3


def is_postgresql(url: str) -> bool:
    return url.startswith("postgresql://")


def blob_type(url: str) -> str:
    return "BYTEA" if is_postgresql(url) else "BLOB"


def fetch(url: str, sql: str) -> list[tuple]:
    if is_postgresql(url):
        import psycopg
        with psycopg.connect(url) as connection:
            return [tuple(row) for row in connection.execute(sql).fetchall()]
    connection = sqlite3.connect(url.removeprefix("sqlite:///"))
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def table_exists(url: str, table: str) -> bool:
    if is_postgresql(url):
        return fetch(url, f"SELECT to_regclass('\"{table}\"')")[0][0] is not None
    return bool(fetch(url, f"SELECT 1 FROM sqlite_master WHERE name = '{table}'"))


def markers(url: str, query_name: str = "default") -> list[tuple]:
    """(batch_id, end_offsets JSON text, row_count) of each committed batch, in order."""
    if not table_exists(url, "oncelog_sink_batches"):
        return []
    return fetch(url, "SELECT batch_id, end_offsets, row_count FROM oncelog_sink_batches "
                      f"WHERE query_name = '{query_name}' ORDER BY batch_id")
