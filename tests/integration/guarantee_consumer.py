"""A consumer process for the group tests, built on ``oncelog.client.consumer``'s presets.

Run as ``python tests/integration/guarantee_consumer.py GUARANTEE BOOTSTRAP GROUP TOPIC OUT``.
"Processing" a record appends its value (a record id) and a newline to OUT with one
``os.write`` on an O_APPEND file: the page cache keeps it through this process's SIGKILL.

Options:
  --crash-at ID        kill -9 ourselves (``os.kill(os.getpid(), SIGKILL)``) on record ID:
                       under at_least_once after processing it (so its batch is never
                       committed), under at_most_once before processing it (its batch was
                       committed already).
  --stop-at ID         stop (and leave the group) after processing record ID.
  --batch-size N       records per poll, hence per commit.
  --set NAME=VALUE     extra consumer config (repeatable).
The process prints "ready" on stderr once it has an assignment.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from oncelog.client import consumer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("guarantee", choices=["at_most_once", "at_least_once"])
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("out")
    parser.add_argument("--crash-at")
    parser.add_argument("--stop-at")
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--set", dest="settings", action="append", default=[])
    args = parser.parse_args()
    config = dict(setting.split("=", 1) for setting in args.settings)
    out = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    crash_at = args.crash_at.encode() if args.crash_at else None
    stop_at = args.stop_at.encode() if args.stop_at else None
    holder: list = []

    def process(record) -> None:
        if record.value == crash_at and args.guarantee == "at_most_once":
            os.kill(os.getpid(), signal.SIGKILL)  # committed, not processed
        os.write(out, record.value + b"\n")
        if record.value == crash_at:
            os.kill(os.getpid(), signal.SIGKILL)  # processed, not committed
        if record.value == stop_at:
            holder[0].stop()

    def on_assign(_consumer, partitions) -> None:
        print(f"ready {sorted(p.partition for p in partitions)}", file=sys.stderr, flush=True)

    preset = getattr(consumer, args.guarantee)
    member = preset(args.bootstrap, args.group, [args.topic], process, config=config,
                    batch_size=args.batch_size, on_assign=on_assign)
    holder.append(member)
    signal.signal(signal.SIGTERM, lambda *_: member.stop())
    member.run()


if __name__ == "__main__":
    main()
