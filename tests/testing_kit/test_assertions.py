"""assert_delivered and read_all: the verifier's checker and report on what a test found."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

import sqlite3

from oncelog.testing import DeliveryError, assert_delivered, read_all, read_table

SENT = ["a", "b", "c", "d"]


def test_exactly_once_passes_on_an_exact_copy():
    result = assert_delivered(SENT, ["a", "b", "c", "d"])
    assert result.contract_kept and result.delivered == 4


def test_the_failure_is_the_verifiers_report():
    with pytest.raises(DeliveryError) as caught:
        assert_delivered(SENT, ["a", "c", "b", "c"], semantics="exactly-once")
    message = str(caught.value)
    assert message.startswith("exactly-once broken: 1 acknowledged record(s) lost; "
                              "1 record(s) delivered more than once (1 extra copies); "
                              "1 record(s) delivered after a later record")
    assert "semantics     produced  acked  delivered  lost  duplicated  reordered" in message
    assert "✘ exactly-once: 1 acknowledged record(s) lost: d" in message
    assert caught.value.result.lost == ["d"]


@pytest.mark.parametrize("semantics, actual, kept", [
    ("at-least-once", ["a", "b", "b", "c", "d"], True),   # duplicates allowed
    ("at-least-once", ["a", "b", "c"], False),            # a loss is not
    ("at-most-once", ["a", "c"], True),                   # losses allowed
    ("at-most-once", ["a", "a"], False),                  # a duplicate is not
    ("at-most-once", ["a", "zzz"], False),                # never something never sent
])
def test_each_semantics_contract(semantics, actual, kept):
    if kept:
        assert_delivered(SENT, actual, semantics=semantics)
    else:
        with pytest.raises(DeliveryError):
            assert_delivered(SENT, actual, semantics=semantics)


def test_unacknowledged_ids_may_be_missing():
    assert_delivered(SENT, ["a", "b", "c"], acknowledged=["a", "b", "c"])


def test_an_aborted_record_delivered_is_an_aborted_read():
    assert assert_delivered(SENT, ["a", "c"], semantics="transactional",
                            aborted=["b", "d"]).contract_kept
    with pytest.raises(DeliveryError) as caught:
        assert_delivered(SENT, ["a", "b", "c"], semantics="transactional", aborted=["b", "d"])
    assert caught.value.result.count("aborted_reads") == 1
    assert "aborted" in str(caught.value)
    with pytest.raises(ValueError, match="aborted= goes with semantics='transactional'"):
        assert_delivered(SENT, SENT, aborted=["b"])


def test_read_table_gives_a_sink_tables_ids_in_insertion_order(tmp_path):
    with sqlite3.connect(tmp_path / "sink.db") as db:
        db.execute("CREATE TABLE orders (id TEXT, amount INTEGER)")
        db.executemany("INSERT INTO orders VALUES (?, ?)", [("b", 1), ("a", 2), ("b", 3)])
    ids = read_table(f"sqlite:///{tmp_path / 'sink.db'}", "orders")
    assert ids == ["b", "a", "b"]
    with pytest.raises(DeliveryError, match="delivered more than once"):
        assert_delivered(["b", "a"], ids)


def test_unknown_semantics_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown semantics 'twice'; choose at-most-once"):
        assert_delivered(SENT, SENT, semantics="twice")


def test_read_all_honours_isolation(oncelog_broker, oncelog_topic):
    topic = oncelog_topic()
    producer = Producer({"bootstrap.servers": oncelog_broker.bootstrap, "log_level": 0,
                         "transactional.id": oncelog_broker.group("txn")})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, b"aborted")
    producer.flush(10)
    producer.abort_transaction(10)
    producer.begin_transaction()
    producer.produce(topic, b"committed")
    producer.commit_transaction(10)
    committed = read_all(oncelog_broker.bootstrap, topic)
    assert [r.value for r in committed] == [b"committed"]
    everything = read_all(oncelog_broker.bootstrap, topic, isolation="read_uncommitted")
    assert [r.value for r in everything] == [b"aborted", b"committed"]
    assert_delivered(["committed"], committed)
    with pytest.raises(ValueError, match="isolation must be read_committed or"):
        read_all(oncelog_broker.bootstrap, topic, isolation="dirty")
