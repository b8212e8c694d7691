"""Consumers with a named delivery guarantee: ``at_most_once`` and ``at_least_once``.

Both join a consumer group (any Kafka-protocol broker) over confluent-kafka and call
``process(record)`` for every record; what differs is the order of processing and
committing, which is the whole of the guarantee (see docs/guarantees.md):

- ``at_most_once`` — **commit, then process.** Each polled batch's offsets are committed
  synchronously first; only if that commit succeeded are its records processed. A crash
  after the commit loses the rest of the batch (never seen again); nothing is processed
  twice. If the commit fails (a rebalance, a lost coordinator), the batch is not processed:
  the consumer seeks back to it, so whoever owns the partition next reads it again.
- ``at_least_once`` — **process, then commit.** The batch is processed, then its offsets are
  committed synchronously. A crash (or a failed commit, or a rebalance that moves the
  partition) before the commit means those records are delivered again: duplicates, never
  losses. ``process`` should be idempotent, or the output should tolerate repeats.

Settings both presets fix (a ``config`` dict may add others, e.g. ``session.timeout.ms``,
``group.instance.id`` or ``partition.assignment.strategy``, but not these):
``enable.auto.commit=false`` (commits happen exactly where the guarantee puts them) and
``enable.auto.offset.store=false``. ``auto.offset.reset`` (where a group without committed
offsets starts) defaults to ``earliest``, so a new group misses nothing written before it
started; pass ``start="latest"`` to begin at the end.

What neither can promise: what ``process`` did outside Kafka is not rolled back when the
commit that follows fails — that needs offsets stored with the output (for output to
Kafka: ``oncelog.client.transform.exactly_once_transform``, one transaction per batch). A
record ``process`` raised on stops the consumer; under at-least-once it and the rest of its
batch are redelivered to the next consumer, under at-most-once they are gone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from .reader import ConsumedRecord

log = logging.getLogger(__name__)

AT_MOST_ONCE = "at_most_once"
AT_LEAST_ONCE = "at_least_once"

Process = Callable[[ConsumedRecord], None]

# Settings a preset owns: changing them would change the guarantee.
_FIXED = {"enable.auto.commit": False, "enable.auto.offset.store": False}


@dataclass
class ConsumerStats:
    """What ``GuaranteedConsumer.run()`` did, returned to its caller: records processed,
    batches polled, offset commits made and commits that failed (their records come again:
    an at-least-once consumer processes them twice, an at-most-once one reads them again
    before processing them)."""
    processed: int = 0
    batches: int = 0
    commits: int = 0
    failed_commits: int = 0


class GuaranteedConsumer:
    """A consumer-group member that processes records under one guarantee.

    ``run()`` polls and processes until ``stop()`` is called (from another thread or from
    ``process``), ``max_records`` have been processed, or nothing arrived for
    ``idle_timeout_s``; then ``close()`` leaves the group. ``on_assign``/``on_revoke`` are
    confluent-kafka's rebalance callbacks, called from inside the poll.
    """

    def __init__(self, guarantee: str, bootstrap: str, group: str, topics: Iterable[str],
                 process: Process, *, config: dict | None = None, start: str = "earliest",
                 batch_size: int = 500, poll_timeout_s: float = 0.5,
                 on_assign: Callable | None = None, on_revoke: Callable | None = None) -> None:
        if guarantee not in (AT_MOST_ONCE, AT_LEAST_ONCE):
            raise ValueError(f"guarantee {guarantee!r} is neither {AT_MOST_ONCE} nor "
                             f"{AT_LEAST_ONCE}")
        clashes = sorted(set(config or {}) & set(_FIXED))
        if clashes:
            raise ValueError(f"{guarantee} sets {', '.join(clashes)} itself; changing it would "
                             "change the guarantee")
        self.guarantee = guarantee
        self.topics = list(topics)
        self.process = process
        self.batch_size = batch_size
        self.poll_timeout_s = poll_timeout_s
        self.settings = {"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": start, **(config or {}), **_FIXED}
        self.stats = ConsumerStats()
        self._rebalance_callbacks = {name: callback for name, callback in (
            ("on_assign", on_assign), ("on_revoke", on_revoke)) if callback is not None}
        self._stop = threading.Event()
        self._consumer: Consumer | None = None

    def stop(self) -> None:
        self._stop.set()

    def run(self, *, max_records: int | None = None,
            idle_timeout_s: float | None = None) -> ConsumerStats:
        consumer = self._consumer = Consumer(self.settings)
        consumer.subscribe(self.topics, **self._rebalance_callbacks)
        last_data = time.monotonic()
        try:
            while not self._stop.is_set():
                if max_records is not None and self.stats.processed >= max_records:
                    break
                records = self._poll(consumer)
                if not records:
                    if idle_timeout_s is not None and time.monotonic() - last_data > idle_timeout_s:
                        break
                    continue
                last_data = time.monotonic()
                self.stats.batches += 1
                if self.guarantee == AT_MOST_ONCE:
                    self._commit_then_process(consumer, records)
                else:
                    self._process_then_commit(consumer, records)
        finally:
            self.close()
        return self.stats

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()  # leaves the group; commits nothing (auto commit is off)

    # -- the two guarantees ----------------------------------------------------------------------

    def _commit_then_process(self, consumer: Consumer, records: list[ConsumedRecord]) -> None:
        if not self._commit(consumer, records):
            # Not committed: processing now could repeat what the partition's next owner
            # will read. Go back so these records are read (and committed) again.
            self._seek_back(consumer, records)
            return
        for record in records:
            self.process(record)
            self.stats.processed += 1

    def _process_then_commit(self, consumer: Consumer, records: list[ConsumedRecord]) -> None:
        for record in records:
            self.process(record)
            self.stats.processed += 1
        self._commit(consumer, records)  # if it fails, the records come again: duplicates

    # -- mechanics -------------------------------------------------------------------------------

    def _poll(self, consumer: Consumer) -> list[ConsumedRecord]:
        return poll_records(consumer, self.batch_size, self.poll_timeout_s,
                            f"{self.guarantee} consumer")

    def _commit(self, consumer: Consumer, records: list[ConsumedRecord]) -> bool:
        """Commit the offset after each partition's last record, synchronously."""
        offsets = next_offsets(records)
        try:
            results = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            self.stats.failed_commits += 1
            log.warning("%s consumer: commit failed: %s", self.guarantee, error.args[0].str())
            return False
        failed = [tp for tp in results or [] if tp.error is not None]
        if failed:
            self.stats.failed_commits += 1
            log.warning("%s consumer: commit failed for %s", self.guarantee,
                        ", ".join(f"{tp.topic}-{tp.partition}: {tp.error.str()}"
                                  for tp in failed if tp.error is not None))
            return False
        self.stats.commits += 1
        return True

    def _seek_back(self, consumer: Consumer, records: list[ConsumedRecord]) -> None:
        starts: dict[tuple[str, int], int] = {}
        for record in records:
            starts.setdefault((record.topic, record.partition), record.offset)
        for (topic, partition), offset in starts.items():
            try:
                consumer.seek(TopicPartition(topic, partition, offset))
            except KafkaException:
                pass  # no longer ours: its next owner starts from the committed offset


def poll_records(consumer: Consumer, batch_size: int, timeout_s: float,
                 label: str) -> list[ConsumedRecord]:
    """One ``consume()`` as records; end-of-partition events are skipped, other errors
    logged, fatal ones raised - including librdkafka's ``_FATAL`` event (a static member
    fenced by another with its ``group.instance.id``), whose ``fatal()`` is false: left to
    the log, the consumer would poll on for ever without a record, never to be restarted."""
    records = []
    for message in consumer.consume(num_messages=batch_size, timeout=timeout_s):
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                continue
            if error.fatal() or error.code() == KafkaError._FATAL:
                raise KafkaException(error)
            log.warning("%s: %s", label, error.str())
            continue
        records.append(ConsumedRecord.from_message(message))
    return records


def next_offsets(records: list[ConsumedRecord]) -> list[TopicPartition]:
    """The offset after each partition's last record: what to commit for ``records``."""
    ends: dict[tuple[str, int], int] = {}
    for record in records:
        ends[(record.topic, record.partition)] = record.offset + 1
    return [TopicPartition(t, p, o) for (t, p), o in ends.items()]


def at_most_once(bootstrap: str, group: str, topics: Iterable[str], process: Process,
                 **options) -> GuaranteedConsumer:
    """A consumer that commits each batch before processing it: may lose, never repeats."""
    return GuaranteedConsumer(AT_MOST_ONCE, bootstrap, group, topics, process, **options)


def at_least_once(bootstrap: str, group: str, topics: Iterable[str], process: Process,
                  **options) -> GuaranteedConsumer:
    """A consumer that processes each batch before committing it: may repeat, never loses."""
    return GuaranteedConsumer(AT_LEAST_ONCE, bootstrap, group, topics, process, **options)
