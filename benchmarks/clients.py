"""The client side of the benchmarks: confluent-kafka workloads, each run in its own process.

``throughput.py`` starts every function here in a fresh process (multiprocessing, spawn), never
in a broker's process, and gets one dict back through a pipe. The functions only measure; they
never judge a figure. Times are ``time.perf_counter()`` within one process, except the
end-to-end latency, which crosses processes and so uses ``time.time_ns()`` (the one clock the
producer and the consumer share).
"""

from __future__ import annotations

import os
import resource
import struct
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

# The client settings every produce case shares (see README.md).
PRODUCER_BASE = {
    "linger.ms": 10,
    "batch.size": 1_000_000,  # below the broker's message.max.bytes (1048588)
    "compression.type": "none",
    "enable.idempotence": False,
    # Large enough that the local queue is not what limits throughput.
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    # Only failed deliveries reach Python, so the callback does not cost the loop.
    "delivery.report.only.error": True,
}

# --client-defaults: only what the workload itself needs; everything else librdkafka's default
# (linger.ms 5, batch.size 1000000, queue of 100,000 messages, fetch.queue.backoff.ms 1000).
PRODUCER_DEFAULTS_KEPT = {"delivery.report.only.error": True}  # client-local, not on the wire

# seq, send time (time.time_ns()), then padding up to the value size
LATENCY_HEADER = struct.Struct(">qq")


def _cpu_seconds() -> float:
    """CPU time of this process, all threads (librdkafka's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _quiet(config: dict) -> dict:
    import logging
    logger = logging.getLogger("bench.librdkafka")
    logger.setLevel(logging.CRITICAL)
    return {**config, "logger": logger}


def produce(bootstrap: str, topic: str, value_size: int, count: int, acks: str,
            extra: dict | None = None, flush_every: int = 0, spread: bool = False,
            defaults: bool = False) -> dict:
    """Produce ``count`` values of ``value_size`` bytes to partition 0 (``spread``: to every
    partition, by librdkafka's sticky partitioner, which changes partition once per batch);
    time first produce to flush() complete. ``flush_every`` > 0 also waits for every record
    to be acknowledged after each ``flush_every`` records: the pipeline drain a transaction's
    commit has, without the transaction. ``defaults``: librdkafka's settings, not
    ``PRODUCER_BASE``."""
    failures: list[str] = []

    def on_delivery(error, _message) -> None:
        if error is not None and len(failures) < 10:
            failures.append(str(error))
        elif error is not None:
            failures.append("")

    producer = Producer(_quiet({"bootstrap.servers": bootstrap, "acks": acks,
                                "on_delivery": on_delivery,
                                **(PRODUCER_DEFAULTS_KEPT if defaults else PRODUCER_BASE),
                                **(extra or {})}))
    producer.list_topics(topic, timeout=30)  # connect and learn the leader before timing
    value = os.urandom(value_size)
    produce_one, poll = producer.produce, producer.poll
    buffer_full = 0
    cpu_start, wall_start = _cpu_seconds(), time.time()
    start = time.perf_counter()
    for number in range(count):
        while True:
            try:
                if spread:
                    produce_one(topic, value)
                else:
                    produce_one(topic, value, partition=0)
                break
            except BufferError:
                buffer_full += 1
                poll(0.001)
        if flush_every and not (number + 1) % flush_every:
            producer.flush(600)
        elif not number & 1023:  # only errors are reported; serving them rarely is enough
            poll(0)
    enqueued = time.perf_counter()
    remaining = producer.flush(600)
    elapsed = time.perf_counter() - start
    wall_end = time.time()
    return {
        "messages": count, "value_bytes": value_size, "acks": acks,
        "seconds": elapsed, "enqueue_seconds": enqueued - start,
        "msgs_per_s": count / elapsed, "mb_per_s": count * value_size / 1e6 / elapsed,
        "undelivered": remaining, "failed": len(failures), "failures": failures[:10],
        "buffer_full_retries": buffer_full,
        "client_cpu_seconds": _cpu_seconds() - cpu_start,
        "window": [wall_start, wall_end],
    }


def _consumer(bootstrap: str, extra: dict | None = None, defaults: bool = False) -> Consumer:
    # oncelog has no group coordinator yet: a throwaway group.id, never a commit.
    return Consumer(_quiet({"bootstrap.servers": bootstrap,
                            "group.id": f"oncelog-bench-{os.getpid()}-{time.time_ns()}",
                            "enable.auto.commit": False, "enable.auto.offset.store": False,
                            "auto.offset.reset": "earliest",
                            # librdkafka 2.x pauses fetching for this long whenever its local
                            # queue is full (the Python loop drains slower than the broker
                            # fills it); its 1000 ms default turns into idle seconds here.
                            **({} if defaults else {"fetch.queue.backoff.ms": 10}),
                            **(extra or {})}))


def consume(bootstrap: str, topic: str, batch: int = 10_000, defaults: bool = False,
            extra: dict | None = None) -> dict:
    """Read partition 0 from its beginning to the high watermark; time assign to the last
    offset received. Fetch settings are librdkafka's defaults; ``extra`` adds client
    settings (a security protocol's)."""
    consumer = _consumer(bootstrap, extra=extra, defaults=defaults)
    partition = TopicPartition(topic, 0, OFFSET_BEGINNING)
    low, high = consumer.get_watermark_offsets(partition, timeout=30)
    expected = high - low
    received = value_bytes = 0
    errors: list[str] = []
    last_offset = low - 1
    cpu_start, wall_start = _cpu_seconds(), time.time()
    start = time.perf_counter()
    consumer.assign([partition])
    while last_offset < high - 1:
        # Never ask for more than remain: consume() returns early only on a full batch.
        messages = consumer.consume(num_messages=min(batch, high - 1 - last_offset), timeout=1.0)
        for message in messages:
            if message.error():
                if len(errors) < 10:
                    errors.append(str(message.error()))
                continue
            received += 1
            value_bytes += len(message.value())
            last_offset = message.offset()
    elapsed = time.perf_counter() - start
    wall_end = time.time()
    result = {
        "messages": received, "expected": expected, "value_bytes": value_bytes,
        "seconds": elapsed, "msgs_per_s": received / elapsed,
        "mb_per_s": value_bytes / 1e6 / elapsed, "errors": errors,
        "client_cpu_seconds": _cpu_seconds() - cpu_start,
        "window": [wall_start, wall_end],
    }
    # close() may look up a group coordinator the broker does not have; the parent sends the
    # result first and terminates this process if close() hangs.
    return result, consumer.close


def latency_consumer(bootstrap: str, topic: str, count: int, ready) -> dict:
    """Receive ``count`` latency-stamped values; one latency (ms) per message, by sequence."""
    consumer = _consumer(bootstrap, {"fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    consumer.poll(0.5)  # the empty topic: connected and fetching before the producer starts
    ready.set()
    latencies_ms = [None] * count
    received = 0
    errors: list[str] = []
    idle_since = time.monotonic()
    while received < count and time.monotonic() - idle_since < 30:  # a hang guard, not a gate
        message = consumer.poll(0.1)
        now_ns = time.time_ns()
        if message is None:
            continue
        idle_since = time.monotonic()
        if message.error():
            if len(errors) < 10:
                errors.append(str(message.error()))
            continue
        seq, sent_ns = LATENCY_HEADER.unpack_from(message.value())
        if 0 <= seq < count and latencies_ms[seq] is None:
            latencies_ms[seq] = (now_ns - sent_ns) / 1e6
            received += 1
    return {"received": received, "latencies_ms": latencies_ms, "errors": errors}, consumer.close


def latency_producer(bootstrap: str, topic: str, count: int, rate: float,
                     value_size: int = 1024) -> dict:
    """Send ``count`` values at ``rate`` per second, acks=all, each stamped with time.time_ns()."""
    failures: list[str] = []

    def on_delivery(error, _message) -> None:
        if error is not None:
            failures.append(str(error))

    producer = Producer(_quiet({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                                "enable.idempotence": False, "compression.type": "none",
                                "on_delivery": on_delivery, "delivery.report.only.error": True}))
    producer.list_topics(topic, timeout=30)
    padding = os.urandom(value_size - LATENCY_HEADER.size)
    interval = 1.0 / rate
    late = 0
    start = time.perf_counter()
    for seq in range(count):
        due = start + seq * interval
        while (wait := due - time.perf_counter()) > 0:
            producer.poll(wait if wait > 0.001 else 0)  # poll() sleeps when nothing is due
        if time.perf_counter() - due > interval:
            late += 1  # the pacing fell behind by more than one interval
        producer.produce(topic, LATENCY_HEADER.pack(seq, time.time_ns()) + padding, partition=0)
        producer.poll(0)
    remaining = producer.flush(60)
    elapsed = time.perf_counter() - start
    return {"sent": count, "seconds": elapsed, "achieved_rate": count / elapsed,
            "late_sends": late, "undelivered": remaining, "failed": len(failures),
            "failures": failures[:10]}


def transactional_produce(bootstrap: str, topic: str, value_size: int, count: int,
                          per_transaction: int, transactional_id: str,
                          extra: dict | None = None) -> dict:
    """Produce ``count`` values to partition 0 in transactions of ``per_transaction``
    records; time init_transactions done to the last commit, and each commit_transaction
    call (what the application waits for)."""
    producer = Producer(_quiet({"bootstrap.servers": bootstrap,
                                "transactional.id": transactional_id,
                                **{k: v for k, v in PRODUCER_BASE.items()
                                   if k != "enable.idempotence"}, **(extra or {})}))
    producer.init_transactions(30)
    value = os.urandom(value_size)
    produce_one, poll = producer.produce, producer.poll
    commits: list[float] = []
    cpu_start, wall_start = _cpu_seconds(), time.time()
    start = time.perf_counter()
    for first in range(0, count, per_transaction):
        producer.begin_transaction()
        for _ in range(min(per_transaction, count - first)):
            while True:
                try:
                    produce_one(topic, value, partition=0)
                    break
                except BufferError:
                    poll(0.001)
        began = time.perf_counter()
        producer.commit_transaction(60)
        commits.append((time.perf_counter() - began) * 1000)
    elapsed = time.perf_counter() - start
    return {"messages": count, "value_bytes": value_size, "seconds": elapsed,
            "msgs_per_s": count / elapsed, "mb_per_s": count * value_size / 1e6 / elapsed,
            "transactions": len(commits), "commit_ms": commits,
            "client_cpu_seconds": _cpu_seconds() - cpu_start,
            "window": [wall_start, time.time()]}


def consume_isolated(bootstrap: str, topic: str, isolation: str, expected: int,
                     batch: int = 10_000) -> dict:
    """Read ``expected`` values of partition 0 from its beginning with ``isolation.level``
    (control records are not delivered, so the count is of data records)."""
    consumer = _consumer(bootstrap, {"isolation.level": isolation})
    partition = TopicPartition(topic, 0, OFFSET_BEGINNING)
    received = value_bytes = 0
    cpu_start, wall_start = _cpu_seconds(), time.time()
    start = time.perf_counter()
    consumer.assign([partition])
    deadline = time.monotonic() + 300
    while received < expected and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=min(batch, expected - received),
                                        timeout=1.0):
            if message.error() is None:
                received += 1
                value_bytes += len(message.value())
    elapsed = time.perf_counter() - start
    result = {"messages": received, "expected": expected, "seconds": elapsed,
              "msgs_per_s": received / elapsed, "mb_per_s": value_bytes / 1e6 / elapsed,
              "client_cpu_seconds": _cpu_seconds() - cpu_start,
              "window": [wall_start, time.time()]}
    return result, consumer.close


def run(connection, name: str, kwargs: dict) -> None:
    """Entry point of a client process: run ``name`` and send its dict to the parent.

    A workload may return ``(result, cleanup)``: the result is sent first, then ``cleanup()``
    (a consumer's close()) runs, so a hanging close cannot hold the figures back.
    """
    import traceback
    try:
        outcome = globals()[name](**kwargs)
    except BaseException:
        connection.send({"error": traceback.format_exc()})
        connection.close()
        return
    result, cleanup = outcome if isinstance(outcome, tuple) else (outcome, None)
    connection.send(result)
    connection.close()
    if cleanup is not None:
        cleanup()
