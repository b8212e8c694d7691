"""The client side of ``groups.py``: consumer-group workloads over confluent-kafka, each run
in its own process (multiprocessing, spawn), never in the broker's.

``member`` is one group member that reports its rebalance callbacks (with ``time.time()``,
the clock every process shares) on a queue and leaves the group when told to. ``committer``
measures committed-offset throughput from one member. Nothing here judges a figure.
"""

from __future__ import annotations

import logging
import queue
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def _quiet(config: dict) -> dict:
    logger = logging.getLogger("bench.librdkafka")
    logger.setLevel(logging.CRITICAL)
    return {**config, "logger": logger}


def member(bootstrap: str, group: str, topic: str, index: int, heartbeat_ms: int,
           session_ms: int, events, commands) -> None:
    """Poll every 5 ms (the resolution of the callback times) until told to leave."""
    consumer = Consumer(_quiet({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "heartbeat.interval.ms": heartbeat_ms, "session.timeout.ms": session_ms,
        "partition.assignment.strategy": "range", "client.id": f"bench-member-{index}"}))

    def on_assign(_consumer, partitions) -> None:
        events.put(("assign", index, time.time(), sorted(p.partition for p in partitions)))

    def on_revoke(_consumer, partitions) -> None:
        events.put(("revoke", index, time.time(), sorted(p.partition for p in partitions)))

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while True:
        consumer.poll(0.005)
        try:
            command = commands.get_nowait()
        except queue.Empty:
            continue
        if command == "leave":
            events.put(("leave", index, time.time(), []))
            consumer.close()  # LeaveGroup
            events.put(("left", index, time.time(), []))
            return


def committer(bootstrap: str, group: str, topic: str, count: int, mode: str) -> dict:
    """Join a group, then commit ``count`` offsets of one partition as fast as the mode
    allows: ``sync`` waits for each OffsetCommit response, ``async`` pipelines them and
    counts the acknowledgements."""
    acknowledged = failed = 0

    def on_commit(error, _partitions) -> None:
        nonlocal acknowledged, failed
        if error is None:
            acknowledged += 1
        else:
            failed += 1

    callbacks = {"on_commit": on_commit} if mode == "async" else {}
    consumer = Consumer(_quiet({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        **callbacks}))
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.05)
    [partition] = consumer.assignment()[:1]
    started = time.perf_counter()
    for i in range(1, count + 1):
        offsets = [TopicPartition(topic, partition.partition, i)]
        if mode == "sync":
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                acknowledged += 1
            except KafkaException:
                failed += 1
        else:
            consumer.commit(offsets=offsets, asynchronous=True)
            if i % 256 == 0:
                consumer.poll(0)  # serve the commit callbacks
    while mode == "async" and acknowledged + failed < count and time.perf_counter() - started < 120:
        consumer.poll(0.001)
    elapsed = time.perf_counter() - started
    committed = consumer.committed([TopicPartition(topic, partition.partition)], timeout=10)
    consumer.close()
    return {"mode": mode, "commits": count, "acknowledged": acknowledged, "failed": failed,
            "seconds": elapsed, "commits_per_s": acknowledged / elapsed,
            "last_committed": committed[0].offset}


def run(connection, name: str, kwargs: dict) -> None:
    """Entry point of a client process that returns one dict to the parent."""
    import traceback
    try:
        result = globals()[name](**kwargs)
    except BaseException:
        result = {"error": traceback.format_exc()}
    connection.send(result)
    connection.close()
