"""The exactly-once reader: ``python -m oncelog.verify.workloads.reader``.

Reads every partition of a topic (``assign``, no consumer group) with a chosen
``isolation.level`` and writes what it reads into a ``ReadTable`` (``sinks.py``): each
polled batch's rows *and* the position reached in each partition go into one database
transaction, and a (re)started reader starts from the stored positions. Offsets stored
with the output: whatever moment a ``kill -9`` lands, the sink holds each record read
exactly once, so a duplicate in the sink is a duplicate in the log, and a record missing
is one the log did not give. It delivers:

- the transactional run (``--isolation read_committed``; ``read_uncommitted`` is the
  negative control: the aborted records must show up as aborted reads);
- the exactly-once run's ``transform`` stage, reading the transform's output topic.

A position also moves on end-of-partition (``enable.partition.eof``): under
``read_committed`` the log ends in commit and abort markers, which are never delivered,
so only the reader's position can tell the runner that it has read everything.

**Where ``kill-consumer`` lands.** SIGUSR1 arms a crash right after the next batch's
transaction committed (before the reader polls on), where a reader that kept its position
anywhere but with its rows would read the batch again after the restart. It prints
``ready [partitions]`` once assigned, ``crash: <where>`` just before killing itself, and
stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import cast

from ...client.security import from_environment

__all__ = ["command", "main"]

ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


def command(*, bootstrap: str, topic: str, partitions: int, isolation: str, sink_url: str,
            table: str, batch_size: int = 500) -> list[str]:
    return [sys.executable, "-m", "oncelog.verify.workloads.reader",
            "--bootstrap", bootstrap, "--topic", topic, "--partitions", str(partitions),
            "--isolation", isolation, "--sink", sink_url, "--table", table,
            "--batch-size", str(batch_size)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m oncelog.verify.workloads.reader")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--isolation", choices=ISOLATION_LEVELS, default="read_committed")
    parser.add_argument("--sink", required=True, help="the ReadTable's database URL")
    parser.add_argument("--table", default="deliveries")
    parser.add_argument("--batch-size", type=int, default=500)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    from ..processes import die_with_parent
    from .sinks import ReadWriter

    die_with_parent()
    stopping = armed = False

    def stop(*_) -> None:
        nonlocal stopping
        stopping = True

    def arm(*_) -> None:
        nonlocal armed
        armed = True
        print("armed", flush=True)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGUSR1, arm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the verifier decides when we stop
    quiet = logging.getLogger("oncelog.verify.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    sink = ReadWriter(args.sink, args.table)
    positions = sink.positions()
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": f"{args.topic}-reader",  # never joined
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "enable.partition.eof": True, "isolation.level": args.isolation,
        "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
        "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500, "logger": quiet,
        **from_environment()})  # a secured broker: oncelog verify --command-config
    consumer.assign([TopicPartition(args.topic, partition,
                                    positions.get(partition, OFFSET_BEGINNING))
                     for partition in range(args.partitions)])
    print(f"ready {list(range(args.partitions))} from {positions}", flush=True)
    read = 0
    while not stopping:
        records, moved = [], {}
        for message in consumer.consume(num_messages=args.batch_size, timeout=0.2):
            error = message.error()
            # a record and an end-of-partition event name their partition and offset
            partition, offset = cast(int, message.partition()), cast(int, message.offset())
            if error is None:
                records.append((message.value(), cast(str, message.topic()), partition, offset))
                moved[partition] = offset + 1
            elif error.code() == KafkaError._PARTITION_EOF:
                if offset > moved.get(partition, positions.get(partition, -1)):
                    moved[partition] = offset
            elif error.fatal():
                print(f"fatal: {error.str()}", flush=True)
                return 1
        if not moved:
            continue
        sink.write(records, moved)
        positions.update(moved)
        read += len(records)
        if armed and records:
            print(f"crash: wrote {len(records)} records and their positions", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    consumer.close()
    sink.close()
    print(f"stopped after {read} records", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
