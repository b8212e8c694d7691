"""The producer workload: ``python -m oncelog.verify.workloads.producer``.

One process per producer. It sends records at a steady rate with the chosen semantics'
producer preset (``oncelog.client.producer``), each value carrying a unique id
(``encode_value(make_id(producer, seq))``), and records in its own history file:

- ``Produced`` *before* each send (a producer killed mid-send still leaves the attempt);
- ``Acknowledged`` or ``Failed`` from the delivery callback (offset ``None`` under
  ``acks=0``, where librdkafka reports -1).

Record ``seq`` goes to partition ``seq % partitions``, chosen by the producer, so the
checker can judge order per producer within each partition. The process stops after
``--duration`` seconds or on SIGTERM, then flushes for at most ``--flush-timeout`` seconds
(records still unanswered then are neither acknowledged nor failed: they promised nothing).
It prints ``ready`` when its first send was made and ``done N`` at the end.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time

__all__ = ["command", "main"]


def command(*, bootstrap: str, topic: str, semantics: str, producer: str, history: str,
            rate: float, duration_s: float, partitions: int, payload_size: int = 100,
            flush_timeout_s: float = 30.0) -> list[str]:
    return [sys.executable, "-m", "oncelog.verify.workloads.producer",
            "--bootstrap", bootstrap, "--topic", topic, "--semantics", semantics,
            "--producer", producer, "--history", history, "--rate", str(rate),
            "--duration", str(duration_s), "--partitions", str(partitions),
            "--payload-size", str(payload_size), "--flush-timeout", str(flush_timeout_s)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m oncelog.verify.workloads.producer")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--semantics", required=True,
                        choices=["at_most_once", "at_least_once", "exactly_once"])
    parser.add_argument("--producer", required=True, help="producer name, e.g. p0")
    parser.add_argument("--history", required=True, help="this producer's history file")
    parser.add_argument("--rate", type=float, default=250.0, help="records per second")
    parser.add_argument("--duration", type=float, required=True, help="seconds")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--payload-size", type=int, default=100)
    parser.add_argument("--flush-timeout", type=float, default=30.0)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from confluent_kafka import Producer

    from ...client.producer import producer_config
    from ..history import HistoryWriter, encode_value, make_id
    from ..processes import die_with_parent

    die_with_parent()
    stopping = False

    def stop(*_) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the verifier decides when we stop
    quiet = logging.getLogger("oncelog.verify.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    # Retries must outlast a broker restart (1-3 s down, then recovery) and dropped acks.
    producer = Producer(producer_config(
        args.semantics, args.bootstrap, **{
            "linger.ms": 5, "message.timeout.ms": 60000, "request.timeout.ms": 5000,
            "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000,
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
            "queue.buffering.max.messages": 200000, "logger": quiet}))
    history = HistoryWriter(args.history)

    def delivered(id: str, error, message) -> None:
        if error is not None:
            history.failed(id, error.str())
        else:
            offset = message.offset()
            history.acknowledged(id, message.topic(), message.partition(),
                                 offset if offset is not None and offset >= 0 else None)

    started = time.monotonic()
    interval = 1.0 / args.rate
    seq = 0
    while not stopping and time.monotonic() - started < args.duration:
        due = started + seq * interval
        pause = due - time.monotonic()
        if pause > 0:
            producer.poll(min(pause, 0.1))
            continue
        id = make_id(args.producer, seq)
        partition = seq % args.partitions
        history.produced(id, args.producer, seq, partition)
        value = encode_value(id, args.payload_size)
        while True:
            try:
                producer.produce(args.topic, value=value, partition=partition,
                                 on_delivery=lambda error, message, id=id:
                                 delivered(id, error, message))
                break
            except BufferError:
                producer.poll(0.05)
        if seq == 0:
            print("ready", flush=True)
        seq += 1
        producer.poll(0)
    unanswered = producer.flush(args.flush_timeout)
    history.close()
    print(f"done {seq} sent, {unanswered} unanswered", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
