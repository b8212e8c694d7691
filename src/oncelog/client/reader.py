"""Read a topic from a chosen position, without a consumer group unless one is asked for.

``read_topic``: no consumer group is joined and nothing is committed. Positions:
``earliest``, ``latest``, an absolute offset, or an ISO-8601 time (resolved per partition
with ListOffsets, i.e. the first record at or after that time). With ``exit_at_end`` the
reader stops once every partition has been read to the end it had when reading began.

``read_group``: as a member of a consumer group, from the group's committed offsets
(``earliest``/``latest`` only say where a partition without one starts), committing each
record once the caller has taken it and asked for the next — at-least-once: a crash
repeats at most what was taken since the last commit. With ``exit_at_end`` it stops when
every partition assigned to it has been read to its end.

Both take ``stop``, a callable asked between polls: once it says True, reading ends as at
the end (``oncelog consume`` sets it on Ctrl-C). In a group this is the way to stop that
commits the last record taken too: closing the iterator cannot tell whether the caller took
the record it was handed last, so that one is left to be read again.

``config``: more librdkafka settings (security, from ``client.security``).

Errors become ``ValueError`` with one clear sentence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException,
                             Message, TopicPartition)


@dataclass(frozen=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]

    @classmethod
    def from_message(cls, message: Message) -> ConsumedRecord:
        """From a confluent_kafka.Message that carries a record (not an error)."""
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        assert topic is not None and partition is not None and offset is not None, "a record"
        # a consumed record's headers are (name, value) pairs, values bytes or None
        headers = cast("list[tuple[str, bytes | None]]", message.headers() or [])
        return cls(topic, partition, offset, message.timestamp()[1], message.key(),
                   message.value(), list(headers))


def parse_start(start: str) -> tuple[str, int]:
    """-> ("offset", n) for earliest/latest/offsets, ("time", ms) for ISO times."""
    if start == "earliest":
        return "offset", OFFSET_BEGINNING
    if start == "latest":
        return "offset", OFFSET_END
    if start.lstrip("-").isdigit():
        offset = int(start)
        if offset < 0:
            raise ValueError(f"offset {offset} is negative")
        return "offset", offset
    try:
        moment = datetime.fromisoformat(start)
    except ValueError:
        raise ValueError(f"--from {start!r} is not earliest, latest, an offset or an ISO-8601 "
                         "time") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as a user typing a time means
    return "time", int(moment.astimezone(UTC).timestamp() * 1000)


def read_topic(bootstrap: str, topic: str, *, start: str = "earliest", count: int | None = None,
               exit_at_end: bool = True,
               isolation_level: str = "read_uncommitted", timeout_s: float = 10.0,
               stop: Callable[[], bool] | None = None,
               config: Mapping[str, str] | None = None) -> Generator[ConsumedRecord]:
    kind, position = parse_start(start)
    quiet = logging.getLogger("oncelog.client.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    consumer = Consumer({
        # assign() without a group: nothing is committed, no coordinator is needed.
        "bootstrap.servers": bootstrap, **(config or {}), "group.id": "oncelog-reader",
        "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": isolation_level, "logger": quiet})
    try:
        partitions = _partitions(consumer, bootstrap, topic, timeout_s)
        assignment = [TopicPartition(topic, p, position) for p in partitions]
        if kind == "time":
            assignment = consumer.offsets_for_times(assignment, timeout=timeout_s)
            assignment = [TopicPartition(topic, tp.partition,
                                         tp.offset if tp.offset >= 0 else OFFSET_END)
                          for tp in assignment]
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                  timeout=timeout_s)[1] for p in partitions}
        consumer.assign(assignment)
        yield from _poll(consumer, set(partitions), ends, count, exit_at_end, stop)
    except KafkaException as error:
        raise ValueError(f"cannot read {topic} from {bootstrap}: {error.args[0].str()}") from None
    finally:
        consumer.close()


def _partitions(consumer: Consumer, bootstrap: str, topic: str, timeout_s: float) -> list[int]:
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
    except KafkaException as error:
        raise ValueError(f"cannot reach a broker at {bootstrap}: {error.args[0].str()}") from None
    entry = metadata.topics.get(topic)
    if entry is None or entry.error is not None or not entry.partitions:
        reason = entry.error.str() if entry is not None and entry.error else "no such topic"
        raise ValueError(f"cannot read topic {topic}: {reason}")
    return sorted(entry.partitions)


def _poll(consumer: Consumer, partitions: set[int], ends: dict[int, int], count: int | None,
          exit_at_end: bool, stop: Callable[[], bool] | None) -> Iterator[ConsumedRecord]:
    delivered = 0
    pending = {p for p in partitions if ends[p] > 0} if exit_at_end else set(partitions)
    done_at_start = exit_at_end and not pending
    while not done_at_start and (count is None or delivered < count):
        if stop is not None and stop():
            return
        message = consumer.poll(0.5)
        if message is None:
            continue
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None  # an EOF names both
                if exit_at_end and offset >= ends.get(partition, 0):
                    pending.discard(partition)
                    if not pending:
                        return
                continue
            raise KafkaException(error)
        delivered += 1
        yield ConsumedRecord.from_message(message)


def read_group(bootstrap: str, topic: str, group: str, *, start: str = "earliest",
               count: int | None = None, exit_at_end: bool = True,
               isolation_level: str = "read_uncommitted", timeout_s: float = 10.0,
               stop: Callable[[], bool] | None = None,
               config: Mapping[str, str] | None = None) -> Generator[ConsumedRecord]:
    if start not in ("earliest", "latest"):
        raise ValueError("in a group, reading starts at the committed offsets; --from can only "
                         "say where a partition without one starts: earliest or latest")
    quiet = logging.getLogger("oncelog.client.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    consumer = Consumer({
        "bootstrap.servers": bootstrap, **(config or {}), "group.id": group,
        "auto.offset.reset": start,
        "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": isolation_level, "logger": quiet})
    assigned: set[int] = set()
    at_end: set[int] = set()
    taken: dict[int, int] = {}  # partition -> next offset, for records the caller has taken

    def on_assign(_consumer, partitions) -> None:
        assigned.update(p.partition for p in partitions)

    def on_revoke(_consumer, partitions) -> None:
        _commit(consumer, topic, taken)
        for p in partitions:
            assigned.discard(p.partition)
            at_end.discard(p.partition)
            taken.pop(p.partition, None)

    try:
        _partitions(consumer, bootstrap, topic, timeout_s)
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        delivered = 0
        while count is None or delivered < count:
            if stop is not None and stop():
                return  # the caller asked for the next record: the last one is taken
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(cast(int, message.partition()))  # an EOF names it
                    if exit_at_end and assigned and assigned <= at_end:
                        return
                    continue
                raise KafkaException(error)
            record = ConsumedRecord.from_message(message)
            at_end.discard(record.partition)
            yield record
            taken[record.partition] = record.offset + 1  # the caller has it now
            delivered += 1
    except KafkaException as error:
        raise ValueError(f"cannot read {topic} in group {group} from {bootstrap}: "
                         f"{error.args[0].str()}") from None
    finally:
        try:
            _commit(consumer, topic, taken)
        finally:
            consumer.close()


def _commit(consumer: Consumer, topic: str, taken: dict[int, int]) -> None:
    if taken:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in taken.items()],
                        asynchronous=False)
