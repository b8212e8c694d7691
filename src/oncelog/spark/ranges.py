"""One offset range of one partition, read on an executor into Arrow record batches.

Spark pickles each ``OffsetRange`` to the executor that reads it, so a range carries all it
needs: topic, partition, [start, end), the client settings and the data-loss rule. The
client is created in ``read_range`` on the executor (a client cannot be pickled), assigned
to the one partition and positioned at ``start``: no consumer group, nothing committed.

Gaps in offsets are normal — compaction removes records and transaction markers take
offsets but are never delivered — so the range is done when a record at or past ``end - 1``
arrives or the partition's end is reached at or past ``end``. A gap is data loss only when
the log no longer starts at or before the offset wanted (retention or deletion removed it):
then ``failOnDataLoss`` decides between an error and skipping what is gone.

A retriable error while reading (a leader moving, a broker gone: ``retries.py``) closes the
client and opens a new one at the next offset wanted - new metadata, so the new leader -
``fetchOffset.retryIntervalMs`` later; ``fetchOffset.numRetries`` such errors in a row, with
no record read between them, fail the task with one sentence. The watermark lookups retry
the same way.
"""

from __future__ import annotations

import time
import uuid
from bisect import bisect_left
from collections.abc import Iterator
from typing import cast

from pyspark.sql.datasource import InputPartition

from .cluster import client_config
from .errors import DataLossError, SourceError
from .options import SourceOptions
from .retries import Tries, is_retriable

_ROWS_PER_BATCH = 20_000


class OffsetRange(InputPartition):
    def __init__(self, topic: str, partition: int, start: int, end: int,
                 options: SourceOptions) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        self.options = options

    def __repr__(self) -> str:
        return f"OffsetRange({self.topic}-{self.partition} [{self.start}, {self.end}))"


def arrow_schema(include_headers: bool):
    import pyarrow as pa
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", pa.list_(pa.struct(
            [pa.field("key", pa.string()), pa.field("value", pa.binary())]))))
    return pa.schema(fields)


def consumer_config(options: SourceOptions) -> dict:
    config = client_config(options)
    config.setdefault("group.id", f"{options.group_id_prefix}-{uuid.uuid4()}")
    config.update({
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",       # an out-of-range offset is reported, not skipped
        "enable.partition.eof": True,       # so a range ending in markers or gaps finishes
    })
    # librdkafka waits up to a second between fetches when its queue was full; a reader that
    # drains its queue as fast as this one would otherwise stall (measured: 3x slower).
    config.setdefault("fetch.queue.backoff.ms", 10)
    return config


def _tries(options: SourceOptions) -> Tries:
    return Tries(options.fetch_offset_num_retries, options.fetch_offset_retry_interval_ms)


def _consumer(rng: OffsetRange, offset: int | None = None):
    """A new client for ``rng``'s partition (its own metadata), assigned at ``offset``."""
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    try:
        consumer = Consumer(consumer_config(rng.options))
    except KafkaException as error:
        raise SourceError(f"cannot create a client for {rng!r}: {error.args[0].str()}") from None
    if offset is not None:
        consumer.assign([KafkaTopicPartition(rng.topic, rng.partition, offset)])
    return consumer


def read_range(rng: OffsetRange) -> Iterator:
    """Yield Arrow record batches holding offsets [start, end) of one partition."""
    if rng.end <= rng.start:
        return
    from confluent_kafka import KafkaError

    options = rng.options
    schema = arrow_schema(options.include_headers)
    tries = _tries(options)
    consumer = _consumer(rng, rng.start)
    try:
        columns = _Columns(options.include_headers)
        next_offset = rng.start
        checked_start = False
        last_progress = time.monotonic()
        while next_offset < rng.end:
            messages = consumer.consume(num_messages=min(10_000, rng.end - next_offset),
                                        timeout=0.2)
            # Records are handled a whole fetch at a time (a per-record loop in Python was
            # most of the read's cost); errors and end-of-partition events one by one.
            records = [m for m in messages if m.error() is None]
            if records:
                offsets = cast("list[int]", [m.offset() for m in records])  # records' have one
                first = bisect_left(offsets, next_offset)   # skip any already read
                last = bisect_left(offsets, rng.end)        # and any past the range
                if first < last:
                    if offsets[first] > next_offset and not checked_start:
                        low = _log_start(consumer, rng)
                        if low > next_offset:
                            _lost(options, f"{rng.topic}-{rng.partition} now starts at offset "
                                  f"{low}, after the {next_offset} this batch wanted")
                    checked_start = True
                    tries.progressed()
                    columns.extend(records[first:last], offsets[first:last])
                    next_offset = offsets[last - 1] + 1
                if last < len(records):
                    next_offset = rng.end                   # a record past the range: done
                if len(columns) >= _ROWS_PER_BATCH:
                    yield columns.batch(schema)
            if len(records) != len(messages):
                for message in messages:
                    failure = message.error()
                    if failure is None or next_offset >= rng.end:
                        continue
                    if failure.code() == KafkaError._PARTITION_EOF:
                        # The log's end as the broker saw it: past the range means done
                        # (the offsets left were gaps); before it, the log lost its tail.
                        if cast(int, message.offset()) >= rng.end:  # an EOF names one
                            next_offset = rng.end
                        elif _log_end(consumer, rng) < rng.end:
                            _lost(options, f"{rng.topic}-{rng.partition} ends at offset "
                                  f"{message.offset()}, before the {rng.end} this batch planned")
                            next_offset = rng.end
                    elif failure.code() == KafkaError._AUTO_OFFSET_RESET:
                        next_offset = _skip_lost(consumer, rng, next_offset)
                        checked_start = True
                    elif is_retriable(failure):
                        tries.failed(failure, f"reading {rng!r} at offset {next_offset} failed")
                        old, consumer = consumer, _consumer(rng, next_offset)
                        old.close()
                        break   # what the old client had queued is not wanted
                    else:
                        raise SourceError(f"reading {rng!r} failed: {failure.str()}")
            if messages:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > options.poll_timeout_ms / 1000:
                raise SourceError(f"timed out after {options.poll_timeout_ms} ms reading "
                                  f"{rng!r} at offset {next_offset} (kafkaConsumer.pollTimeoutMs)")
        if len(columns):
            yield columns.batch(schema)
    finally:
        consumer.close()


def _log_start(consumer, rng: OffsetRange) -> int:
    return _watermarks(consumer, rng)[0]


def _log_end(consumer, rng: OffsetRange) -> int:
    return _watermarks(consumer, rng)[1]


def _watermarks(consumer, rng: OffsetRange) -> tuple[int, int]:
    """The partition's log start and end; a retry asks through a new client."""
    from confluent_kafka import KafkaException
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    tries = _tries(rng.options)
    asking = consumer
    try:
        while True:
            try:
                return asking.get_watermark_offsets(
                    KafkaTopicPartition(rng.topic, rng.partition), timeout=30, cached=False)
            except KafkaException as error:
                tries.failed(error.args[0],
                             f"cannot look up offsets of {rng.topic}-{rng.partition}")
            if asking is not consumer:
                asking.close()
            asking = _consumer(rng)
    finally:
        if asking is not consumer:
            asking.close()


def _skip_lost(consumer, rng: OffsetRange, wanted: int) -> int:
    """The offset wanted is out of range: data loss, or (failOnDataLoss=false) skip it."""
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    low, high = _watermarks(consumer, rng)
    if wanted < low:
        _lost(rng.options, f"{rng.topic}-{rng.partition} now starts at offset {low}, after "
              f"the {wanted} this batch wanted")
        resume = low
    else:
        _lost(rng.options, f"{rng.topic}-{rng.partition} ends at offset {high}, before the "
              f"{wanted} this batch wanted")
        resume = rng.end
    if resume < rng.end:
        # After an out-of-range error the fetcher is stopped: seek() would be refused.
        consumer.assign([KafkaTopicPartition(rng.topic, rng.partition, resume)])
    return resume


def _lost(options: SourceOptions, what: str) -> None:
    if options.fail_on_data_loss:
        raise DataLossError(what)


class _Columns:
    """Records gathered column by column, turned into one Arrow record batch at a time."""

    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self._clear()

    def _clear(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.topics: list = []
        self.partitions: list = []
        self.offsets: list = []
        self.timestamps: list = []
        self.types: list = []
        self.headers: list = []

    def __len__(self) -> int:
        return len(self.offsets)

    def extend(self, messages: list, offsets: list[int]) -> None:
        self.keys += [m.key() for m in messages]
        self.values += [m.value() for m in messages]
        self.topics += [m.topic() for m in messages]
        self.partitions += [m.partition() for m in messages]
        self.offsets += offsets
        stamps = [m.timestamp() for m in messages]
        # librdkafka: 1 = CreateTime, 2 = LogAppendTime; Spark's column: 0 and 1.
        self.types += [kind - 1 if kind > 0 else 0 for kind, _ in stamps]
        self.timestamps += [millis * 1000 for _, millis in stamps]
        if self.include_headers:
            self.headers += [[{"key": k, "value": v} for k, v in (m.headers() or [])]
                             for m in messages]

    def batch(self, schema):
        import pyarrow as pa
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array(self.topics, pa.string()),
            pa.array(self.partitions, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            pa.array(self.types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, schema.field("headers").type))
        self._clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
