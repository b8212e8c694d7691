"""Read a topic from a chosen position, without a consumer group unless one is asked for.

No consumer group is joined and nothing is committed. Positions: ``earliest``, ``latest``, an absolute offset, or an ISO-8601 time (resolved per
partition with ListOffsets, i.e. the first record at or after that time). With
``exit_at_end`` the reader stops once every partition has been read to the end it had
when reading began. Errors become ``ValueError`` with one clear sentence.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterator

from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException,
                             TopicPartition)


@dataclass(frozen=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


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
    return "time", int(moment.astimezone(timezone.utc).timestamp() * 1000)


def read_topic(bootstrap: str, topic: str, *, start: str = "earliest", count: int | None = None,
               exit_at_end: bool = True,
               isolation_level: str = "read_uncommitted",
               timeout_s: float = 10.0) -> Iterator[ConsumedRecord]:
    kind, position = parse_start(start)
    quiet = logging.getLogger("oncelog.client.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    consumer = Consumer({
        # assign() without a group: nothing is committed, no coordinator is needed.
        "bootstrap.servers": bootstrap, "group.id": "oncelog-reader",
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
        yield from _poll(consumer, set(partitions), ends, count, exit_at_end)
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
          exit_at_end: bool) -> Iterator[ConsumedRecord]:
    delivered = 0
    pending = {p for p in partitions if ends[p] > 0} if exit_at_end else set(partitions)
    done_at_start = exit_at_end and not pending
    while not done_at_start and (count is None or delivered < count):
        message = consumer.poll(0.5)
        if message is None:
            continue
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                if exit_at_end and message.offset() >= ends.get(message.partition(), 0):
                    pending.discard(message.partition())
                    if not pending:
                        return
                continue
            raise KafkaException(error)
        delivered += 1
        yield ConsumedRecord(message.topic(), message.partition(), message.offset(),
                             message.timestamp()[1], message.key(), message.value(),
                             list(message.headers() or []))
