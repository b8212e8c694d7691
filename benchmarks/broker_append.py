"""The broker's own cost of idempotence, without a client library in the way.

Pre-builds 1 MiB record batches of 1 KiB values (once with a producer id, epoch and
sequences, once without) and sends them as pipelined Produce requests (acks=all, up to
``--in-flight`` outstanding) over one raw connection from a separate process, timing from the
first request to the last response. On a 2-core machine the client libraries themselves
cost CPU; this isolates what the broker spends on the idempotence check (one lookup per
batch). Runs alternate plain/idempotent; prints the medians and their ratio.

    .venv/bin/python benchmarks/broker_append.py [--bootstrap HOST:PORT] [--runs 5]
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

VALUE = b"v" * 1024
RECORDS_PER_BATCH = 1000


def build_requests(topic: str, batches: int, idempotent: bool, producer_id: int) -> list[bytes]:
    from oncelog.protocol.messages import ProduceRequest
    from oncelog.protocol.records import make_batch
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    frames = []
    for number in range(batches):
        batch = make_batch([VALUE] * RECORDS_PER_BATCH,
                           producer_id=producer_id if idempotent else -1,
                           producer_epoch=0 if idempotent else -1,
                           base_sequence=number * RECORDS_PER_BATCH if idempotent else -1)
        request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000,
                                 topic_data=[T(name=topic, partition_data=[P(index=0,
                                                                             records=batch)])])
        header = struct.pack(">hhih", 0, 9, number, 5) + b"bench" + b"\x00"
        payload = header + bytes(request.encode(version=9))
        frames.append(struct.pack(">i", len(payload)) + payload)
    return frames


def send_all(bootstrap: str, frames: list[bytes], in_flight: int, out) -> None:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    reader = sock.makefile("rb")
    start = time.perf_counter()
    sent = received = 0
    while received < len(frames):
        while sent < len(frames) and sent - received < in_flight:
            sock.sendall(frames[sent])
            sent += 1
        size = struct.unpack(">i", reader.read(4))[0]
        reader.read(size)
        received += 1
    out.send(time.perf_counter() - start)
    sock.close()


def measure(bootstrap: str, frames: list[bytes], in_flight: int) -> float:
    receiver, sender = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(
        target=send_all, args=(bootstrap, frames, in_flight, sender))
    process.start()
    seconds = receiver.recv()
    process.join()
    return len(frames) * RECORDS_PER_BATCH * len(VALUE) / 1e6 / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="measure this broker instead of starting one")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batches", type=int, default=400, help="1 MiB batches per run")
    parser.add_argument("--in-flight", type=int, default=5)
    options = parser.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    from oncelog.broker.process import BrokerProcess
    broker = None
    if options.bootstrap is None:
        base = Path(tempfile.mkdtemp(prefix="oncelog-append-"))
        broker = BrokerProcess(base / "data", log_path=base / "broker.log").start()
    bootstrap = options.bootstrap or broker.bootstrap
    results: dict[bool, list[float]] = {False: [], True: []}
    try:
        import logging
        quiet = logging.getLogger("bench.librdkafka")
        quiet.setLevel(logging.CRITICAL)
        admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet})
        for run in range(options.runs):
            for idempotent in (False, True):
                topic = f"append-{run}-{int(idempotent)}"
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
                frames = build_requests(topic, options.batches, idempotent, 10_000 + run)
                results[idempotent].append(measure(bootstrap, frames, options.in_flight))
                admin.delete_topics([topic])[topic].result(15)
                print(f"run {run + 1} {'idempotent' if idempotent else 'plain     '}: "
                      f"{results[idempotent][-1]:.0f} MB/s", file=sys.stderr)
    finally:
        if broker is not None:
            broker.stop()
    plain, idempotent = (statistics.median(results[k]) for k in (False, True))
    print(f"broker append, 1 MiB batches of 1 KiB values, acks=all, {options.in_flight} in "
          f"flight: plain {plain:.0f} MB/s, idempotent {idempotent:.0f} MB/s (medians of "
          f"{options.runs}); ratio {idempotent / plain:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
