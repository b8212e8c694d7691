"""Database URLs, connection failures and identifier checks, against real files and servers."""

from __future__ import annotations

import pytest

from oncelog.broker.process import free_port
from oncelog.spark.sinks import SinkError, TransactionalSink, UpsertSink, open_database, parse_url
from oncelog.spark.sinks.dialects import POSTGRESQL, SQLITE

from .tables import fetch


def test_sink_error_is_a_value_error():
    assert issubclass(SinkError, ValueError)


@pytest.mark.parametrize("url, dialect, target", [
    ("sqlite:///relative/events.db", SQLITE, "relative/events.db"),
    ("sqlite:////abs/events.db", SQLITE, "/abs/events.db"),
    ("data/events.sqlite", SQLITE, "data/events.sqlite"),
    ("/abs/events.db", SQLITE, "/abs/events.db"),
    ("postgresql://u:pw@h:5432/d", POSTGRESQL, "postgresql://u:pw@h:5432/d"),
    ("postgres://u@h/d", POSTGRESQL, "postgres://u@h/d"),
])
def test_parse_url_picks_the_dialect(url, dialect, target):
    location = parse_url(url)
    assert location.dialect is dialect
    assert location.target == target


@pytest.mark.parametrize("url", ["mysql://u:pw@h/d", "events.csv", "sqlite://host/x.db",
                                 "sqlite:///", "sqlite:///:memory:", ""])
def test_unsupported_urls_are_refused_in_one_sentence(url):
    with pytest.raises(SinkError) as caught:
        TransactionalSink(url, "events")
    message = str(caught.value)
    assert "\n" not in message and message.endswith(".")
    assert "pw" not in message  # the password never reaches a message


def test_a_relative_sqlite_url_is_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with open_database("sqlite:///here.db") as db:
        db.execute("CREATE TABLE t (x INTEGER)")
    assert (tmp_path / "here.db").exists()


def test_a_plain_db_path_opens_sqlite(tmp_path):
    path = tmp_path / "plain.db"
    sink = TransactionalSink(path, "events")
    assert sink.write_batch(["id"], [(1,)], 0, ddl="CREATE TABLE events (id INTEGER)")
    assert fetch(f"sqlite:///{path}", "SELECT id FROM events") == [(1,)]


def test_sqlite_in_a_missing_directory_is_a_sink_error(tmp_path):
    url = f"sqlite:///{tmp_path}/no/such/dir/sink.db"
    with pytest.raises(SinkError, match="cannot open database") as caught:
        TransactionalSink(url, "events").write_batch(["id"], [(1,)], 0)
    assert url in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "no").exists()


def test_a_file_that_is_not_sqlite_is_a_sink_error(tmp_path):
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a database, just sixteen-plus bytes of text" * 20)
    with pytest.raises(SinkError, match="not a database"):
        open_database(f"sqlite:///{path}")


def test_postgresql_on_a_closed_port_is_a_sink_error_without_the_password():
    url = f"postgresql://postgres:secret@127.0.0.1:{free_port()}/nothing"
    with pytest.raises(SinkError, match="cannot connect to database") as caught:
        UpsertSink(url, "accounts", ["id"]).write_rows(["id"], [(1,)])
    message = str(caught.value)
    assert "secret" not in message and "postgres:***@127.0.0.1" in message
    assert "\n" not in message


def test_postgresql_missing_database_is_a_sink_error(postgres_server):
    with pytest.raises(SinkError, match="does_not_exist"):
        TransactionalSink(postgres_server.url("does_not_exist"), "events").last_batch_id()


@pytest.mark.parametrize("name", ["", "1events", "events; DROP TABLE x", 'ev"ents', "a-b",
                                  "schema.table", "événements", None])
def test_bad_table_names_are_refused(name, tmp_path):
    url = f"sqlite:///{tmp_path}/sink.db"
    with pytest.raises(SinkError, match="not a simple SQL identifier"):
        TransactionalSink(url, name)
    with pytest.raises(SinkError, match="not a simple SQL identifier"):
        UpsertSink(url, name, ["id"])
    with pytest.raises(SinkError, match="not a simple SQL identifier"):
        UpsertSink(url, "accounts", [name])


def test_bad_column_names_are_refused_before_anything_is_written(db_url):
    sink = TransactionalSink(db_url, "events")
    with pytest.raises(SinkError, match="not a simple SQL identifier"):
        sink.write_batch(["id", "x) VALUES (1); --"], [(1, 2)], 0)
    with pytest.raises(SinkError, match="appears twice"):
        sink.write_batch(["id", "id"], [(1, 2)], 0)
    assert sink.last_batch_id() is None


def test_identifiers_are_quoted_so_reserved_words_work(db_url):
    sink = TransactionalSink(db_url, "order")
    ddl = 'CREATE TABLE "order" ("select" INTEGER, "offset" INTEGER, "Partition" TEXT)'
    assert sink.write_batch(["select", "offset", "Partition"], [(1, 2, "p")], 0, ddl=ddl)
    assert fetch(db_url, 'SELECT "select", "offset", "Partition" FROM "order"') == [(1, 2, "p")]
