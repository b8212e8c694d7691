"""A consume-transform-produce process for the exactly-once transform tests, built on
``oncelog.client.transform``.

Run as ``python tests/integration/transform_worker.py BOOTSTRAP GROUP IN OUT``. The transform
upper-cases each value. Options:
  --crash-in-batch N   kill -9 ourselves in the middle of the Nth batch's transaction (its
                       first output produced and flushed to the broker, nothing committed).
  --crash-when PATH    the same, in the first batch after PATH exists.
  --delay-ms MS        spend MS milliseconds on each record (a slow transform).
  --idle S             stop after S seconds without input (default 5).
  --transactional-id T the producer's transactional.id (default: one per process).
  --transaction-timeout S   transaction.timeout.ms, in seconds (default 60).
The process prints "ready [partitions]" on stderr at each assignment.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from oncelog.client.transform import exactly_once_transform


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--crash-in-batch", type=int)
    parser.add_argument("--crash-when", type=Path,
                        help="kill -9 ourselves mid-transaction once this file exists")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--idle", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--transactional-id")
    parser.add_argument("--transaction-timeout", type=float, default=60.0)
    args = parser.parse_args()
    seen = {"batch": 0, "in_batch": 0}
    holder: list = []

    def upper(record):
        loop = holder[0]
        batch = loop.stats.transactions + loop.stats.aborted + 1
        if batch != seen["batch"]:
            seen["batch"], seen["in_batch"] = batch, 0
        seen["in_batch"] += 1
        if args.delay_ms:
            time.sleep(args.delay_ms / 1000)
        crash = batch == args.crash_in_batch or (args.crash_when is not None
                                                  and args.crash_when.exists())
        if crash and seen["in_batch"] == 2:
            loop.producer.flush(10)  # the outputs so far reach the broker, uncommitted
            os.kill(os.getpid(), signal.SIGKILL)
        return [record.value.upper()]

    def on_assign(_consumer, partitions) -> None:
        print(f"ready {sorted(p.partition for p in partitions)}", file=sys.stderr, flush=True)

    loop = exactly_once_transform(args.bootstrap, args.group, [args.input], upper, args.output,
                                  batch_size=args.batch_size, on_assign=on_assign,
                                  transactional_id=args.transactional_id,
                                  transaction_timeout_s=args.transaction_timeout,
                                  consumer_config={"session.timeout.ms": 6000,
                                                   "heartbeat.interval.ms": 500},
                                  producer_config={"linger.ms": 5})
    holder.append(loop)
    stats = loop.run(idle_timeout_s=args.idle)
    print(f"done {stats.consumed} {stats.produced} {stats.transactions} {stats.aborted}",
          file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
