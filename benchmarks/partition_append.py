"""The partition's append path in-process, without a socket or a client in the way.

Appends many small pre-built batches (one 100-byte record each) to a fresh single-replica
partition on real files: plain batches, idempotent ones (producer id and sequences), and a
follower's append of the leader's log read back in fetch-sized chunks. Times each case in
CPU time (``time.process_time``: this process's user + system time, so other work on a shared
machine disturbs it less than wall time) and prints microseconds per batch, the median over
``--runs`` (min-max).
It measures Python's per-batch cost of ``Partition.append_records`` / ``append_as_follower``
(validation, producer state, the high watermark, invariants), which a 1 MiB batch hides.

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/partition_append.py [--batches 20000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

CONFIGS = {"segment.bytes": str(1 << 30), "segment.ms": str(7 * 86400_000),
           "retention.ms": "-1", "retention.bytes": "-1", "index.interval.bytes": "4096",
           "max.message.bytes": str(1 << 20), "message.timestamp.type": "CreateTime",
           "min.insync.replicas": "1"}
VALUE = b"v" * 100


def _clock() -> int:
    return time.time_ns() // 1_000_000


def _partition(directory: Path, replica_id: int = 1, replicas: tuple[int, ...] | None = None):
    from oncelog.partition import Partition, TopicSettings
    from oncelog.storage import Log
    settings = TopicSettings.from_configs(CONFIGS)
    log = Log.open(directory / f"broker-{replica_id}" / "bench-0", settings.log_config, _clock)
    return Partition("bench", 0, log, settings, _clock, replica_id=replica_id, replicas=replicas)


def _batches(count: int, idempotent: bool) -> list[bytes]:
    from oncelog.protocol.records import make_batch
    return [make_batch([VALUE], producer_id=7 if idempotent else -1,
                       producer_epoch=0 if idempotent else -1,
                       base_sequence=number if idempotent else -1) for number in range(count)]


def leader_run(count: int, idempotent: bool) -> float:
    """Microseconds per ``append_records`` call."""
    batches = _batches(count, idempotent)
    with tempfile.TemporaryDirectory(prefix="partition-append-") as directory:
        partition = _partition(Path(directory))
        buffers = [bytearray(batch) for batch in batches]  # as a Produce request carries them
        append = partition.append_records
        start = time.process_time()
        for buffer in buffers:
            append(buffer)
        elapsed = time.process_time() - start
        partition.close()
    return elapsed / count * 1e6


def follower_run(count: int, chunk_bytes: int = 1 << 20) -> float:
    """Microseconds per batch appended by a follower, in fetch-sized chunks of the leader's
    log (the idempotent batches above, so producer state is applied too)."""
    from oncelog.controller.store import PartitionState
    from oncelog.protocol.batches import iter_headers
    with tempfile.TemporaryDirectory(prefix="partition-append-") as directory:
        leader = _partition(Path(directory), 1, (1, 2))
        follower = _partition(Path(directory), 2, (1, 2))
        state = PartitionState(1, 0, (1,), version=0)
        leader.apply_state(state, (1, 2))
        follower.apply_state(state, (1, 2))
        for batch in _batches(count, idempotent=True):
            leader.append_records(bytearray(batch))
        chunks, offset = [], 0
        while offset < leader.log_end_offset:
            chunk = bytes(leader.log.read(offset, chunk_bytes, max_offset=leader.log_end_offset))
            chunks.append(memoryview(chunk))
            offset = list(iter_headers(chunk))[-1][1].last_offset + 1
        start = time.process_time()
        for chunk in chunks:
            follower.append_as_follower(chunk)
        elapsed = time.process_time() - start
        assert follower.log_end_offset == leader.log_end_offset
        leader.close()
        follower.close()
    return elapsed / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20000, help="batches per run")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cases = {"leader, plain": lambda: leader_run(args.batches, idempotent=False),
             "leader, idempotent": lambda: leader_run(args.batches, idempotent=True),
             "follower, idempotent": lambda: follower_run(args.batches)}
    results: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):  # cases interleaved, so a noisy moment hits all of them
        for name, run in cases.items():
            results[name].append(run())
    print(f"{args.batches} one-record batches of {len(VALUE)} B per run, {args.runs} runs")
    for name, figures in results.items():
        print(f"  {name:22} {statistics.median(figures):6.2f} us/batch "
              f"({min(figures):.2f}-{max(figures):.2f})")


if __name__ == "__main__":
    main()
