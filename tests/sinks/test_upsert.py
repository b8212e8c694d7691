"""UpsertSink without Spark: replays change nothing, a key's last row wins, failures roll back."""

from __future__ import annotations

import pytest

from oncelog.spark.sinks import SinkError, UpsertSink

from .tables import blob_type, fetch


def accounts_ddl(url: str) -> str:
    return ("CREATE TABLE IF NOT EXISTS accounts (region TEXT NOT NULL, id BIGINT NOT NULL, "
            f"balance BIGINT, note {blob_type(url)}, PRIMARY KEY (region, id))")


COLUMNS = ["region", "id", "balance", "note"]


def accounts(url: str) -> list[tuple]:
    return fetch(url, "SELECT region, id, balance, note FROM accounts ORDER BY region, id")


def test_rows_are_inserted_then_updated_by_key(db_url):
    sink = UpsertSink(db_url, "accounts", ["region", "id"])
    ddl = accounts_ddl(db_url)
    assert sink.write_rows(COLUMNS, [("eu", 1, 10, b"a"), ("us", 1, 20, None)], ddl=ddl) == 2
    sink.write_rows(COLUMNS, [("eu", 1, 15, b"\x00b"), ("eu", 2, 5, None)], ddl=ddl)
    assert accounts(db_url) == [("eu", 1, 15, b"\x00b"), ("eu", 2, 5, None), ("us", 1, 20, None)]


def test_replaying_a_batch_yields_the_same_table(db_url):
    sink = UpsertSink(db_url, "accounts", ["region", "id"])
    ddl = accounts_ddl(db_url)
    batch = [("eu", 1, 10, b"x"), ("eu", 2, 20, None), ("us", 7, 70, b"y")]
    sink.write_rows(COLUMNS, batch, ddl=ddl)
    first = accounts(db_url)
    sink.write_rows(COLUMNS, batch, ddl=ddl)
    sink.write_rows(COLUMNS, batch, ddl=ddl)
    assert accounts(db_url) == first == [("eu", 1, 10, b"x"), ("eu", 2, 20, None),
                                         ("us", 7, 70, b"y")]


@pytest.mark.parametrize("chunk_size", [1, 1000])
def test_the_last_row_of_a_key_in_a_batch_wins(db_url, chunk_size):
    """PostgreSQL refuses one INSERT that touches a row twice ("ON CONFLICT DO UPDATE command
    cannot affect row a second time"); executemany sends one statement per row, so two rows
    with one key in the same chunk are fine and apply in order."""
    sink = UpsertSink(db_url, "accounts", ["region", "id"], chunk_size=chunk_size)
    rows = [("eu", 1, 1, None), ("eu", 2, 2, None), ("eu", 1, 3, None), ("eu", 1, 4, b"last")]
    assert sink.write_rows(COLUMNS, rows, ddl=accounts_ddl(db_url)) == 4
    assert accounts(db_url) == [("eu", 1, 4, b"last"), ("eu", 2, 2, None)]


def test_a_table_of_only_keys_ignores_duplicates(db_url):
    sink = UpsertSink(db_url, "seen", ["id"])
    ddl = "CREATE TABLE IF NOT EXISTS seen (id BIGINT PRIMARY KEY)"
    sink.write_rows(["id"], [(1,), (2,), (1,)], ddl=ddl)
    sink.write_rows(["id"], [(2,), (3,)], ddl=ddl)
    assert fetch(db_url, "SELECT id FROM seen ORDER BY id") == [(1,), (2,), (3,)]


def test_a_failure_mid_batch_rolls_the_whole_batch_back(db_url):
    sink = UpsertSink(db_url, "accounts", ["region", "id"], chunk_size=1)
    ddl = accounts_ddl(db_url)
    sink.write_rows(COLUMNS, [("eu", 1, 10, None)], ddl=ddl)
    rows = [("eu", 1, 99, None), ("eu", 2, 20, None), (None, 3, 30, None)]  # NULL key: refused
    with pytest.raises(SinkError, match="rolled back") as caught:
        sink.write_rows(COLUMNS, rows, ddl=ddl)
    assert "\n" not in str(caught.value)
    assert accounts(db_url) == [("eu", 1, 10, None)]


def test_an_exception_from_the_rows_rolls_back(db_url):
    sink = UpsertSink(db_url, "accounts", ["region", "id"], chunk_size=1)
    ddl = accounts_ddl(db_url)
    sink.write_rows(COLUMNS, [("us", 9, 90, None)], ddl=ddl)

    def rows():
        yield ("us", 9, 0, None)
        yield ("eu", 1, 10, None)
        yield ("eu", 2, 20, None)
        raise RuntimeError("lost the executor")

    with pytest.raises(RuntimeError, match="lost the executor"):
        sink.write_rows(COLUMNS, rows(), ddl=ddl)
    assert accounts(db_url) == [("us", 9, 90, None)]


def test_key_columns_must_be_among_the_columns(db_url):
    sink = UpsertSink(db_url, "accounts", ["region", "id"])
    with pytest.raises(SinkError, match="'id'"):
        sink.write_rows(["region", "balance"], [("eu", 1)], ddl=accounts_ddl(db_url))


def test_an_existing_table_without_that_key_is_refused(db_url):
    sink = UpsertSink(db_url, "plain", ["id"])
    ddl = "CREATE TABLE IF NOT EXISTS plain (id BIGINT, v TEXT)"
    with pytest.raises(SinkError, match="upserting rows into 'plain'"):
        sink.write_rows(["id", "v"], [(1, "a")], ddl=ddl)


def test_a_missing_table_without_ddl_is_a_sink_error(db_url):
    with pytest.raises(SinkError, match="does not exist"):
        UpsertSink(db_url, "accounts", ["id"]).write_rows(["id"], [(1,)])


def test_no_key_columns_is_a_sink_error(tmp_path):
    with pytest.raises(SinkError, match="at least one key"):
        UpsertSink(f"sqlite:///{tmp_path}/x.db", "accounts", [])
