"""Exactly-once consume-transform-produce: read a topic, transform each record, write the
results to another topic, and commit each batch's output and input offsets in one Kafka
transaction (KIP-98 + KIP-447), so every input record's output is in the output topic
exactly once for ``read_committed`` readers - across kill -9 of the process, broker
restarts and rebalances.

    from oncelog.client.transform import exactly_once_transform
    def enrich(record):                      # a ConsumedRecord -> output values
        return [record.value.upper()]        # or (key, value) pairs, or nothing
    exactly_once_transform("127.0.0.1:9092", "enricher", ["orders"], enrich,
                           "orders-enriched").run()

Each poll's batch: ``begin_transaction``; every output of ``transform`` is produced to
``output_topic`` (a value, or a ``(key, value)`` pair; ``None`` values are tombstones);
the batch's next offsets go into the transaction with ``send_offsets_to_transaction`` and
the consumer's group metadata (generation and member id: a member that a rebalance
replaced cannot commit, KIP-447); ``commit_transaction``. Nothing is committed outside a
transaction (the consumer's auto commit is off), so after a crash the group resumes exactly
where the last committed transaction left it, and that transaction's output is the only
output of those records. An error that aborts the transaction (a rebalance fenced this
member, a partition error) aborts it and rewinds the consumer to the committed offsets, so
the batch is read again - by this member or by the partition's new owner. A fatal error
(another instance with the same ``transactional.id``) stops the loop with the exception.

``transactional_id`` defaults to one unique per instance: with KIP-447 the group's
generation, not the id, fences zombies; give a stable id (one per instance, e.g. from the
host name) if the output must also be fenced by id. The consumer reads ``read_committed``
(an upstream transactional producer's aborted records are never transformed).
``transform`` must not have effects outside Kafka that must happen once: a batch can run
more than once, only its Kafka output counts once.

Known client bug: after a broker restart librdkafka 2.x can block in
``send_offsets_to_transaction`` for ever, past its timeout (confluentinc/librdkafka#5456,
#5511). Run the loop under a supervisor that restarts a process making no progress (see
docs/guarantees.md); what the stuck transaction held is aborted by the next instance.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from .consumer import next_offsets, poll_records
from .reader import ConsumedRecord

log = logging.getLogger(__name__)

Transform = Callable[[ConsumedRecord], Iterable]

_CONSUMER_FIXED = {"enable.auto.commit": False, "enable.auto.offset.store": False,
                   "isolation.level": "read_committed"}
_PRODUCER_FIXED = {"acks", "enable.idempotence", "transactional.id"}


@dataclass
class TransformStats:
    consumed: int = 0
    produced: int = 0
    transactions: int = 0
    aborted: int = 0


class ExactlyOnceTransform:
    def __init__(self, bootstrap: str, group: str, topics: Iterable[str], transform: Transform,
                 output_topic: str, *, transactional_id: str | None = None,
                 consumer_config: dict | None = None, producer_config: dict | None = None,
                 start: str = "earliest", batch_size: int = 500, poll_timeout_s: float = 0.5,
                 transaction_timeout_s: float = 60.0, init_timeout_s: float = 60.0,
                 on_assign: Callable | None = None) -> None:
        """``init_timeout_s`` bounds ``init_transactions()``, which waits out what a restart
        can meet: the id's coordinator moving to another broker, and the previous
        instance's open transaction being aborted (CONCURRENT_TRANSACTIONS until it is).
        Java's ``max.block.ms`` default; the other blocking calls get the transaction
        timeout, after which the broker aborts the transaction anyway."""
        clashes = sorted(set(consumer_config or {}) & set(_CONSUMER_FIXED)) + \
            sorted(set(producer_config or {}) & _PRODUCER_FIXED)
        if clashes:
            raise ValueError(f"exactly_once_transform sets {', '.join(clashes)} itself; "
                             "changing it would change the guarantee")
        self.topics = list(topics)
        self.transform = transform
        self.output_topic = output_topic
        self.batch_size = batch_size
        self.poll_timeout_s = poll_timeout_s
        self.timeout_s = transaction_timeout_s
        self.init_timeout_s = init_timeout_s
        self.transactional_id = transactional_id or f"{group}-transform-{uuid.uuid4()}"
        self.consumer_settings = {"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": start, **(consumer_config or {}),
                                  **_CONSUMER_FIXED}
        self.producer_settings = {"bootstrap.servers": bootstrap, **(producer_config or {}),
                                  "transactional.id": self.transactional_id,
                                  "transaction.timeout.ms": int(transaction_timeout_s * 1000)}
        self.on_assign = on_assign
        self.stats = TransformStats()
        self.producer: Producer | None = None  # while run() runs
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self, *, max_records: int | None = None,
            idle_timeout_s: float | None = None) -> TransformStats:
        """Transform until ``stop()``, ``max_records`` consumed, or nothing arrived for
        ``idle_timeout_s``; then leave the group."""
        producer = self.producer = Producer(self.producer_settings)
        producer.init_transactions(self.init_timeout_s)
        consumer = Consumer(self.consumer_settings)
        callbacks = {"on_assign": self.on_assign} if self.on_assign else {}
        consumer.subscribe(self.topics, **callbacks)
        last_data = time.monotonic()
        try:
            while not self._stop.is_set():
                if max_records is not None and self.stats.consumed >= max_records:
                    break
                records = self._poll(consumer)
                if not records:
                    if idle_timeout_s is not None and \
                            time.monotonic() - last_data > idle_timeout_s:
                        break
                    continue
                last_data = time.monotonic()
                self._transact(producer, consumer, records)
        finally:
            consumer.close()
            producer.flush(self.timeout_s)
        return self.stats

    def _transact(self, producer: Producer, consumer: Consumer,
                  records: list[ConsumedRecord]) -> None:
        producer.begin_transaction()
        try:
            produced = 0
            for record in records:
                for output in self.transform(record) or ():
                    key, value = output if isinstance(output, tuple) else (None, output)
                    self._produce(producer, key, value)
                    produced += 1
            producer.send_offsets_to_transaction(next_offsets(records),
                                                 consumer.consumer_group_metadata(),
                                                 self.timeout_s)
            self._commit(producer)
        except KafkaException as error:
            if not error.args[0].txn_requires_abort():
                raise  # fatal: fenced by another instance, or a bug
            log.warning("exactly-once transform: transaction aborted (%s); reading the batch "
                        "again from the committed offsets", error.args[0].str())
            producer.abort_transaction(self.timeout_s)
            self.stats.aborted += 1
            _rewind(consumer, records)
            return
        self.stats.consumed += len(records)
        self.stats.produced += produced
        self.stats.transactions += 1

    def _produce(self, producer: Producer, key, value) -> None:
        while True:
            try:
                producer.produce(self.output_topic, value, key)
                return
            except BufferError:
                producer.poll(0.1)

    def _commit(self, producer: Producer) -> None:
        while True:
            try:
                producer.commit_transaction(self.timeout_s)
                return
            except KafkaException as error:
                if not error.args[0].retriable():
                    raise
                log.info("exactly-once transform: commit will be retried: %s",
                         error.args[0].str())

    def _poll(self, consumer: Consumer) -> list[ConsumedRecord]:
        return poll_records(consumer, self.batch_size, self.poll_timeout_s,
                            "exactly-once transform")


def _rewind(consumer: Consumer, records: list[ConsumedRecord]) -> None:
    """Back to the committed offsets of the batch's partitions (or its first records)."""
    starts: dict[tuple[str, int], int] = {}
    for record in records:
        starts.setdefault((record.topic, record.partition), record.offset)
    try:
        committed = consumer.committed([TopicPartition(t, p) for t, p in starts], timeout=10)
    except KafkaException:
        committed = []
    for tp in committed:
        if tp.offset >= 0:
            starts[(tp.topic, tp.partition)] = tp.offset
    for (topic, partition), offset in starts.items():
        try:
            consumer.seek(TopicPartition(topic, partition, offset))
        except KafkaException:
            pass  # no longer ours: its new owner starts from the committed offset


def exactly_once_transform(bootstrap: str, group: str, topics: Iterable[str],
                           transform: Transform, output_topic: str,
                           **options) -> ExactlyOnceTransform:
    """A consume-transform-produce loop whose output counts each input exactly once."""
    return ExactlyOnceTransform(bootstrap, group, topics, transform, output_topic, **options)
