"""``KafkaSink``: a micro-batch and its batch id land in one Kafka transaction.

Use it as ``df.writeStream.foreachBatch(KafkaSink(bootstrap, "out", sink_id="q"))``. Spark
re-runs a batch id over the same offsets when the driver died after the sink wrote but
before the checkpoint's commit log recorded the batch; this sink recognises the re-run and
skips it. It works against any broker with transactions (oncelog's or Apache Kafka's):

- The producer's ``transactional.id`` is ``oncelog-sink-<sink_id>``, stable across driver
  restarts: the restarted driver's ``init_transactions`` (InitProducerId) fences its crashed
  predecessor and aborts the transaction it left open, so a dead driver's records never
  become visible, and a second live driver with the same id makes the older one fail.
- Each batch is one transaction: the rows, then a transactional offset commit
  (``send_offsets_to_transaction``, TxnOffsetCommit) for the consumer group
  ``oncelog-sink-<sink_id>`` on partition 0 of the output topic, offset ``batch_id + 1``,
  whose metadata is the marker: ``{"batch_id", "batches", "rows", "end_offsets"}`` (batches
  and rows committed so far; ``end_offsets`` as ``TransactionalSink`` keeps them, when the
  batch has the source's ``topic``, ``partition``, ``offset`` columns). The rows and the
  marker become visible together with the commit marker, or not at all.
- Before writing, the marker is read with OffsetFetch ``require_stable`` (librdkafka asks
  for stable offsets when ``isolation.level`` is ``read_committed``) and the batch is checked
  against it as ``TransactionalSink`` does (``positions.decide``): Spark's re-run of the
  last batch is skipped whole; when the offsets Spark planned are known
  (``positions.planned_offsets``) they are stored (``start_offsets`` joins the marker) and a
  batch that does not start where the stored end offsets end is one ``SinkError``, nothing
  written; without them (Spark Connect) the rows' first and last offsets decide
  (``positions``, rule 4), and without offset columns a batch id below the committed one
  is refused. A query started
  with no checkpoint resumes after the marker's end offsets when its source is given
  ``source_options()`` (``startingOffsetsFromSink=kafka://<bootstrap>/<topic>``).

Columns, as Spark's own ``format("kafka")`` sink takes them: ``value`` (string or binary),
optional ``key`` (string or binary), ``headers`` (``array<struct<key string, value
binary>>``) and ``partition`` (int); a ``topic`` column is ignored - the sink's topic wins,
as Spark's ``topic`` option does. ``key_column``/``value_column`` name other columns. A batch
without a value column is written whole: each row's value is a JSON object of all its
columns (``columns.to_json_text``), and no column but the key is interpreted.

Security: ``security`` takes the client's security settings, Kafka's names or librdkafka's
(``{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config":
...}``, ``client.security.translate``), used by the sink's producer and its marker readers;
``source_options()`` carries none of them (give the source its ``kafka.*`` options).

Limits: rows go through the driver (``columns.local_rows``: the next Spark partition computed
while the driver produces the current one), so throughput is one Python process's - fine
for this project's pipelines, not for a cluster's. A batch is one transaction, bounded by
``transaction.timeout.ms`` (default 60 s here). Readers must use
``read_committed``. The producer is created on the first batch and kept (not pickled).
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from .columns import OffsetTracker, local_rows, to_json_text
from .errors import SinkError
from .positions import Batch, Marker, decide, planned_offsets, row_offsets
from .transactional import merge_offsets

if TYPE_CHECKING:  # imported where used: the sink is pickled to Spark's workers
    from confluent_kafka import Consumer, Producer

log = logging.getLogger(__name__)

MARKER_PARTITION = 0
METADATA_BYTES_MAX = 4096  # Kafka's default offset.metadata.max.bytes
# how long a resuming query waits for the sink's offsets to be stable before it aborts the
# transaction a crashed writer left open (see read_marker)
UNSTABLE_WAIT_S = 3.0
_FIXED = {"transactional.id", "enable.idempotence", "acks", "bootstrap.servers"}


def quiet_logger() -> logging.Logger:
    """librdkafka's own log lines stay out of the user's terminal; errors reach them as
    ``SinkError`` sentences instead."""
    quiet = logging.getLogger("oncelog.client.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    return quiet


def sink_name(sink_id: str) -> str:
    """The ``transactional.id`` and consumer group of a sink: ``oncelog-sink-<sink_id>``."""
    return f"oncelog-sink-{sink_id}"


class KafkaSink:
    def __init__(self, bootstrap: str, topic: str, *, sink_id: str = "default",
                 key_column: str | None = None, value_column: str | None = None,
                 producer_config: dict | None = None, timeout_s: float = 30.0,
                 transaction_timeout_s: float = 60.0, hold_open_s: float = 0.0,
                 security: dict[str, str] | None = None) -> None:
        if not isinstance(bootstrap, str) or not bootstrap:
            raise SinkError("bootstrap must be HOST:PORT of a broker.")
        if not isinstance(topic, str) or not topic:
            raise SinkError("topic must be a non-empty string.")
        if not isinstance(sink_id, str) or not sink_id:
            raise SinkError("sink_id must be a non-empty string.")
        clashes = sorted(set(producer_config or {}) & _FIXED)
        if clashes:
            raise SinkError(f"KafkaSink sets {', '.join(clashes)} itself; changing it would "
                            "change the guarantee.")
        from ...client.security import SecurityConfigError, translate
        try:
            self.security = translate(security or {}, "KafkaSink's security")
        except SecurityConfigError as error:
            raise SinkError(f"{error}.") from None
        self.bootstrap = bootstrap
        self.topic = topic
        self.sink_id = sink_id
        self.key_column = key_column
        self.value_column = value_column
        self.timeout_s = timeout_s
        # fault tests: keep each transaction open this long with its records in the log, so a
        # kill can land in it (a fast broker commits 800 records within a few milliseconds)
        self.hold_open_s = hold_open_s
        self.producer_settings = {
            "bootstrap.servers": bootstrap, **self.security, "transaction.timeout.ms":
            int(transaction_timeout_s * 1000), "linger.ms": 5, **(producer_config or {}),
            "transactional.id": sink_name(sink_id)}
        self._producer: Producer | None = None  # made by the first batch, kept for the next
        self._consumer: Consumer | None = None  # reads the marker, lends its group metadata

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_producer"] = state["_consumer"] = None  # clients do not pickle
        return state

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        """foreachBatch entry point: write ``batch_df`` as batch ``batch_id``, once."""
        self.write_batch(batch_df, batch_id)

    def write_batch(self, batch_df: Any, batch_id: int) -> bool:
        """Write the batch and its marker in one transaction; False if already committed."""
        batch_id = int(batch_id)
        names = [field.name for field in batch_df.schema.fields]
        encode = self._encoder(batch_df.schema)
        planned = planned_offsets(batch_df)
        # no plan to read (Spark Connect): where the rows lie decides (positions, rule 4)
        seen = row_offsets(batch_df) if planned is None else None
        self._connect()
        marker = self._read_marker()
        start_offsets, end_offsets = planned or (None, None)
        if not decide(_stored(marker), Batch(batch_id, start_offsets, end_offsets, seen),
                      what=f"sink {self.sink_id!r}"):
            return False
        tracker = OffsetTracker(names)
        try:
            self._transact(batch_df, batch_id, encode, tracker, marker or {}, planned)
        except BaseException:
            self._abort_quietly()  # e.g. Spark failed mid-batch: nothing of it stays
            self.close()  # the next batch (or the restarted query) starts a fresh producer
            raise
        return True

    def _transact(self, batch_df, batch_id: int, encode, tracker: OffsetTracker,
                  previous: dict, planned: tuple | None) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        producer, consumer = self._connected()
        doing = f"writing batch {batch_id} of sink {self.sink_id!r} to topic {self.topic!r}"
        rows = 0
        try:
            producer.begin_transaction()
            for row in local_rows(batch_df):
                if tracker.enabled:
                    tracker.observe(row)
                self._produce(producer, encode(row))
                rows += 1
            marker = {"batch_id": batch_id, "batches": int(previous.get("batches", 0)) + 1,
                      "rows": int(previous.get("rows", 0)) + rows,
                      "end_offsets": merge_offsets(previous.get("end_offsets"),
                                                   planned[1] if planned
                                                   else tracker.end_offsets())}
            if planned:
                marker["start_offsets"] = planned[0]
            offsets = [TopicPartition(self.topic, MARKER_PARTITION, batch_id + 1,
                                      metadata=encode_marker(marker))]
            producer.send_offsets_to_transaction(
                offsets, consumer.consumer_group_metadata(), self.timeout_s)
            if self.hold_open_s > 0:
                producer.flush(self.timeout_s)
                time.sleep(self.hold_open_s)
            _commit(producer, self.timeout_s)
        except KafkaException as error:
            self._abort_quietly()
            raise SinkError(f"{doing} failed: {error.args[0].str()}.") from None

    def _produce(self, producer, message: tuple) -> None:
        key, value, headers, partition = message
        kwargs = {"key": key, "value": value}
        if headers:
            kwargs["headers"] = headers
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                producer.produce(self.topic, **kwargs)
                producer.poll(0)
                return
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let deliveries drain it

    def _abort_quietly(self) -> None:
        if self._producer is None:
            return
        try:
            self._producer.abort_transaction(self.timeout_s)
        except Exception:  # fenced or unreachable: InitProducerId of the next producer aborts
            pass

    def _connected(self) -> tuple[Producer, Consumer]:
        assert self._producer is not None and self._consumer is not None, "_connect() first"
        return self._producer, self._consumer

    def _connect(self) -> None:
        """Create the producer (fencing any predecessor) and the marker's consumer."""
        if self._producer is not None:
            return
        from confluent_kafka import Consumer, KafkaException, Producer

        where = f"the broker at {self.bootstrap}"
        producer = Producer({**self.producer_settings, "logger": quiet_logger()})
        try:
            metadata = producer.list_topics(self.topic, timeout=min(self.timeout_s, 10))
        except KafkaException as error:
            raise SinkError(f"cannot reach {where}: {error.args[0].str()}.") from None
        entry = metadata.topics.get(self.topic)
        if entry is None or entry.error is not None or not entry.partitions:
            reason = entry.error.str() if entry is not None and entry.error else "no such topic"
            raise SinkError(f"cannot write to topic {self.topic!r} on {where}: {reason}.")
        try:
            producer.init_transactions(self.timeout_s)
        except KafkaException as error:
            raise SinkError(f"{where} refused to start transactions for "
                            f"{sink_name(self.sink_id)!r} (a broker without transactions, or "
                            f"one whose settings forbid this sink's): "
                            f"{error.args[0].str()}.") from None
        self._consumer = Consumer({
            "bootstrap.servers": self.bootstrap, **self.security,
            "group.id": sink_name(self.sink_id),
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "logger": quiet_logger()})
        self._producer = producer

    def check(self) -> None:
        """Reach the broker, find the topic and start transactions now, or raise SinkError:
        a command can report a bad sink in one sentence before Spark starts."""
        self._connect()
        self.close()

    def _read_marker(self) -> dict | None:
        from confluent_kafka import KafkaException, TopicPartition
        try:
            committed = self._connected()[1].committed(
                [TopicPartition(self.topic, MARKER_PARTITION)], timeout=self.timeout_s)
        except KafkaException as error:
            self.close()
            raise SinkError(f"cannot read the committed batch of sink {self.sink_id!r}: "
                            f"{error.args[0].str()}.") from None
        return parse_marker(committed[0])

    def last_marker(self) -> dict | None:
        """The marker of the last committed batch, or None (see the module docstring)."""
        return read_marker(self.bootstrap, self.topic, self.sink_id, timeout_s=self.timeout_s,
                           config=self.security)

    def last_batch_id(self) -> int | None:
        marker = self.last_marker()
        return None if marker is None else marker["batch_id"]

    def source_options(self) -> dict[str, str]:
        """Options for the ``oncelog`` source: a query started without a checkpoint begins
        exactly where this sink's marker says its output ends."""
        return {"startingOffsetsFromSink": f"kafka://{self.bootstrap}/{self.topic}",
                "sinkQueryName": self.sink_id}

    def close(self) -> None:
        """Release the producer and consumer; the next batch creates them again."""
        producer, consumer = self._producer, self._consumer
        self._producer = self._consumer = None
        if consumer is not None:
            consumer.close()
        if producer is not None:
            try:
                producer.purge()  # only an aborted transaction's records can be queued
            except Exception:     # a fenced (fatal) producer refuses even that
                pass

    def _encoder(self, schema):
        """A function from a row to (key, value, headers, partition), or a SinkError now."""
        from pyspark.sql import types as T
        fields = {field.name: (index, field.dataType)
                  for index, field in enumerate(schema.fields)}

        def column(name: str | None, default: str, what: str) -> int | None:
            if name is None:
                name = default
                if name not in fields:
                    return None
            if name not in fields:
                raise SinkError(f"the {what} column {name!r} is not in the batch (its columns: "
                                f"{', '.join(fields) or 'none'}).")
            if not isinstance(fields[name][1], (T.StringType, T.BinaryType)):
                raise SinkError(f"the {what} column {name!r} must be string or binary, not "
                                f"{fields[name][1].simpleString()}.")
            return fields[name][0]

        key_at = column(self.key_column, "key", "key")
        value_at = column(self.value_column, "value", "value")
        headers_at = partition_at = None
        if value_at is not None:  # Spark's Kafka sink conventions
            if "headers" in fields:
                headers_at = fields["headers"][0]
            if "partition" in fields:
                if not isinstance(fields["partition"][1], T.IntegerType):
                    raise SinkError("the partition column must be int, not "
                                    f"{fields['partition'][1].simpleString()}.")
                partition_at = fields["partition"][0]
        names = list(fields)

        def encode(row) -> tuple:
            key = None if key_at is None else _bytes(row[key_at])
            value: bytes | None
            if value_at is None:
                value = to_json_text(dict(zip(names, row))).encode()
            else:
                value = _bytes(row[value_at])
            headers = None
            if headers_at is not None and row[headers_at]:
                headers = [(h["key"], _bytes(h["value"])) for h in row[headers_at]]
            partition = None if partition_at is None else row[partition_at]
            return key, value, headers, partition
        return encode


def _stored(marker: dict | None) -> Marker | None:
    """The marker as ``positions.decide`` reads it; its end offsets are Spark's planned ones
    when it also has start offsets."""
    if marker is None:
        return None
    return Marker(int(marker["batch_id"]), marker.get("end_offsets"),
                  exact=marker.get("start_offsets") is not None)


def encode_marker(marker: dict) -> str:
    """The marker as compact JSON. Kafka keeps at most ``offset.metadata.max.bytes`` (4096 by
    default) of metadata: past that the offsets are dropped - the sink then checks batch ids
    only, and a query cannot resume from it without a checkpoint; the batch id, which makes
    the sink exactly-once across crashes, always fits."""
    text = json.dumps(marker, separators=(",", ":"))
    if len(text.encode()) > METADATA_BYTES_MAX:
        log.warning("KafkaSink: the offsets of batch %d take more than %d bytes; "
                    "they are not kept", marker["batch_id"], METADATA_BYTES_MAX)
        slim = {key: value for key, value in marker.items() if key != "start_offsets"}
        text = json.dumps({**slim, "end_offsets": None}, separators=(",", ":"))
    return text


def _commit(producer, timeout_s: float) -> None:
    """commit_transaction, again while librdkafka calls its error retriable (a timeout):
    the transaction is still ours to commit (librdkafka's documented retry)."""
    from confluent_kafka import KafkaException
    while True:
        try:
            producer.commit_transaction(timeout_s)
            return
        except KafkaException as error:
            if not error.args[0].retriable():
                raise
            log.info("KafkaSink: commit will be retried: %s", error.args[0].str())


def _bytes(value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return bytes(value)




def parse_marker(partition) -> dict | None:
    """The marker in a committed ``TopicPartition``'s metadata, or None if there is none."""
    if partition.error is not None or partition.offset < 0 or not partition.metadata:
        return None
    try:
        marker = json.loads(partition.metadata)
        marker["batch_id"] = int(marker["batch_id"])
    except (ValueError, KeyError, TypeError):
        raise SinkError(f"the offset committed on topic {partition.topic!r} partition "
                        f"{partition.partition} does not hold a KafkaSink marker: "
                        f"{partition.metadata[:80]!r}.") from None
    return marker


def read_marker(bootstrap: str, topic: str, sink_id: str, *,
                timeout_s: float = 10.0, fence: bool = False,
                config: dict[str, str] | None = None) -> dict | None:
    """The last committed marker of sink ``sink_id`` writing ``topic``, or None.

    With ``fence``, a read that stays unstable for a few seconds - a crashed writer of the
    sink left its transaction open, and its pending marker keeps the group's offsets
    unstable until the transaction times out - aborts that transaction (an InitProducerId
    with the sink's ``transactional.id``, as the sink's own first batch does) and reads
    again. A query resuming from the sink (the source's ``startingOffsetsFromSink``) reads
    this way: it plans before its sink writes. A stable read fences nobody, so a live sink
    of the same driver keeps its producer. ``config``: librdkafka's security settings."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    def committed(wait_s: float):
        consumer = Consumer({"bootstrap.servers": bootstrap, **(config or {}),
                             "group.id": sink_name(sink_id),
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "logger": quiet_logger()})
        try:
            return consumer.committed([TopicPartition(topic, MARKER_PARTITION)],
                                      timeout=wait_s)[0]
        finally:
            consumer.close()

    try:
        try:
            found = committed(min(timeout_s, UNSTABLE_WAIT_S) if fence else timeout_s)
        except KafkaException as error:
            if not fence or error.args[0].code() != KafkaError._TIMED_OUT:
                raise
            producer = Producer({"bootstrap.servers": bootstrap, **(config or {}),
                                 "transactional.id": sink_name(sink_id),
                                 "logger": quiet_logger()})
            producer.init_transactions(timeout_s)
            found = committed(timeout_s)
    except KafkaException as error:
        raise SinkError(f"cannot read the committed batch of sink {sink_id!r} from "
                        f"{bootstrap}: {error.args[0].str()}.") from None
    return parse_marker(found)
