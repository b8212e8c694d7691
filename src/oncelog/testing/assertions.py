"""Delivery assertions for a user's tests, judged by the verifier's own checker.

``read_all(bootstrap, topic)`` reads a topic from the beginning to its current end, without a
consumer group (``read_committed`` by default: what an exactly-once reader sees).

``assert_delivered(expected_ids, actual, semantics="exactly-once")`` turns what a test sent
and what it found into a verifier history and runs ``oncelog.verify.checker.check`` on it,
so a failure prints the same lost / duplicated / reordered report ``oncelog verify`` prints:

- ``expected_ids`` — the ids the test sent, in send order (order within a partition is
  checked against it); ``acknowledged`` (default: all of them) are the ones the producer saw
  acknowledged: only those count as lost when missing.
- ``actual`` — what arrived: records from ``read_all`` (or any objects with ``value`` and,
  optionally, ``topic``/``partition``/``offset``), or plain ids. ``id_of`` maps an item to
  its id; the default reads a verifier JSON value (``{"id": ...}``), or else the whole value
  as UTF-8 text.

The contracts are the checker's: at-most-once forbids duplicates; at-least-once forbids
losses; exactly-once forbids losses, duplicates and reordering. Anything delivered that was
never sent is always a failure. For a transactional producer, ``semantics="transactional"``
with ``aborted`` (the ids of the transactions it aborted) also fails on every aborted record
delivered - the report's "aborted reads", as ``oncelog verify --semantics transactional``.

``read_table(url, table)`` reads the ids a sink table holds (``sqlite:///path.db`` or
``postgresql://...``, the sinks' URLs), in insertion order, for ``assert_delivered``.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

from ..client.reader import ConsumedRecord, read_topic
from ..verify.checker import CheckResult, check
from ..verify.history import (Acknowledged, Delivered, History, Produced, Transaction,
                              decode_value)

__all__ = ["DeliveryError", "assert_delivered", "delivery_report", "read_all", "read_table"]

_PRODUCER = "sent"


class DeliveryError(AssertionError):
    """A delivery contract was broken; the message is the verifier's report."""

    def __init__(self, message: str, result: CheckResult) -> None:
        super().__init__(message)
        self.result = result


def read_all(bootstrap: str, topic: str, *, isolation: str = "read_committed",
             timeout_s: float = 10.0,
             config: dict[str, str] | None = None) -> list[ConsumedRecord]:
    """Every record of ``topic`` from the beginning to the end it has now, in partition then
    offset order. ``isolation``: ``read_committed`` or ``read_uncommitted``; ``config``:
    librdkafka settings to connect with (a secured broker's ``client_settings()``)."""
    level = isolation.replace("-", "_").lower()
    if level not in ("read_committed", "read_uncommitted"):
        raise ValueError(f"isolation must be read_committed or read_uncommitted, "
                         f"not {isolation!r}")
    return list(read_topic(bootstrap, topic, isolation_level=level, timeout_s=timeout_s,
                           config=config))


def default_id_of(item: Any) -> str:
    if isinstance(item, str):
        return item
    value = getattr(item, "value", item)
    if callable(value):  # a confluent_kafka.Message
        value = value()
    if isinstance(value, (bytes, bytearray)):
        try:
            return decode_value(bytes(value))
        except ValueError:
            return bytes(value).decode("utf-8", "replace")
    return str(value)


def _history(expected_ids: Iterable[str], actual: Iterable[Any],
             acknowledged: Iterable[str] | None,
             id_of: Callable[[Any], str], aborted: Iterable[str] | None = None) -> History:
    history = History()
    expected = list(expected_ids)
    acked = set(expected if acknowledged is None else acknowledged)
    for seq, id in enumerate(expected):
        history.append(Produced(id, _PRODUCER, seq, None, 0.0))
        if id in acked:
            history.append(Acknowledged(id, "", 0, None, 0.0))
    if aborted is not None:  # one committed transaction, one aborted: what the checker needs
        thrown = set(aborted)
        history.append(Transaction(_PRODUCER, 0, [i for i in expected if i not in thrown],
                                   "committed", 0.0))
        history.append(Transaction(_PRODUCER, 1, [i for i in expected if i in thrown],
                                   "aborted", 0.0))
    for index, item in enumerate(actual):
        topic, partition, offset = _where(item)
        position = offset if offset is not None and offset >= 0 else index
        history.append(Delivered(id_of(item), topic, partition, offset, position, 1.0))
    return history


def _where(item: Any) -> tuple[str, int, int | None]:
    """(topic, partition, offset) of a delivered item; ("", 0, None) for a bare id."""
    if isinstance(item, (str, bytes)):
        return "", 0, None
    topic = getattr(item, "topic", "")
    if callable(topic):  # a confluent_kafka.Message
        return item.topic(), item.partition(), item.offset()
    partition, offset = getattr(item, "partition", 0), getattr(item, "offset", None)
    return (topic or "", partition if isinstance(partition, int) else 0,
            offset if isinstance(offset, int) else None)


def delivery_report(result: CheckResult) -> str:
    """The verifier's table and per-anomaly lines, as plain text."""
    from rich.console import Console

    from ..verify.report import print_report
    buffer = io.StringIO()
    print_report([result], console=Console(file=buffer, width=100, color_system=None,
                                           force_terminal=False))
    return buffer.getvalue()


def assert_delivered(expected_ids: Iterable[str], actual: Iterable[Any], *,
                     semantics: str = "exactly-once",
                     acknowledged: Iterable[str] | None = None,
                     aborted: Iterable[str] | None = None,
                     id_of: Callable[[Any], str] = default_id_of) -> CheckResult:
    """Raise ``DeliveryError`` with the verifier's report unless ``actual`` keeps
    ``semantics``' contract for ``expected_ids``; return the checker's result otherwise.
    ``aborted`` (with ``semantics="transactional"``): the ids whose transaction was aborted;
    every other id counts as committed."""
    if (aborted is None) != (semantics.replace("-", "_") != "transactional"):
        raise ValueError("aborted= goes with semantics='transactional', and it needs it")
    result = check(_history(expected_ids, actual, acknowledged, id_of, aborted), semantics)
    if not result.contract_kept:
        raise DeliveryError(f"{result.semantics.replace('_', '-')} broken: "
                            f"{'; '.join(result.violations)}\n{delivery_report(result)}",
                            result)
    return result


def read_table(url: str, table: str, *, id_column: str = "id",
               order_by: str | None = None) -> list[str]:
    """The ids in ``table`` of the database at ``url`` (a sink's URL), ordered by
    ``order_by`` (default: insertion order - SQLite's rowid, PostgreSQL's ctid is not one, so
    give a column there), for ``assert_delivered``."""
    from ..spark.sinks import open_database
    from ..spark.sinks.errors import quote_identifier
    with open_database(url) as db:
        order = quote_identifier(order_by) if order_by else (
            "rowid" if db.location.dialect.name == "sqlite" else None)
        sql = f"SELECT {quote_identifier(id_column)} FROM {quote_identifier(table)}"
        rows = db.execute(sql + (f" ORDER BY {order}" if order else "")).fetchall()
    return [str(row[0]) for row in rows]
