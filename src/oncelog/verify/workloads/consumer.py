"""The consumer workload: ``python -m oncelog.verify.workloads.consumer``.

A consumer-group member built on ``oncelog.client.consumer``'s presets. "Processing" a
record is one committed INSERT into the run's ``DeliveriesTable`` (``sinks.py``), so the
sink holds exactly what was processed, each copy at a position that grows across restarts.

**Where ``kill-consumer`` lands.** SIGUSR1 arms a crash at the point where the consumer's
semantics is weakest, and the consumer then kills itself with SIGKILL - a ``kill -9`` in
every respect, timed instead of left to chance, so a run shows the semantics' failure mode
every time (the same trick as ``tests/integration/guarantee_consumer.py``):

- at-least-once (process, then commit): after processing a batch, before committing it ->
  the batch is delivered again after the restart (duplicates, allowed);
- at-most-once (commit, then process): after committing a batch, before processing it ->
  the batch is never processed (losses, allowed).

The verifier falls back to a plain ``kill -9`` if no batch arrives soon after arming.
The member is static (``group.instance.id``), so a restarted consumer gets its partitions
back at once instead of after the session timeout. It prints ``ready [partitions]`` on each
assignment, ``crash: <where>`` just before killing itself, and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from ...client.security import from_environment

__all__ = ["command", "main"]


def command(*, guarantee: str, bootstrap: str, group: str, topic: str, sink_url: str,
            table: str, instance: str, session_timeout_ms: int,
            batch_size: int = 200) -> list[str]:
    return [sys.executable, "-m", "oncelog.verify.workloads.consumer",
            "--guarantee", guarantee, "--bootstrap", bootstrap, "--group", group,
            "--topic", topic, "--sink", sink_url, "--table", table, "--instance", instance,
            "--session-timeout-ms", str(session_timeout_ms), "--batch-size", str(batch_size)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m oncelog.verify.workloads.consumer")
    parser.add_argument("--guarantee", required=True, choices=["at_most_once", "at_least_once"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--sink", required=True,
                        help="the DeliveriesTable's database: sqlite:///... or postgresql://...")
    parser.add_argument("--table", default="deliveries", help="the DeliveriesTable's table")
    parser.add_argument("--instance", required=True, help="group.instance.id")
    parser.add_argument("--session-timeout-ms", type=int, required=True)
    parser.add_argument("--batch-size", type=int, default=200)
    return parser


def _crash(where: str) -> None:
    print(f"crash: {where}", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from ...client.consumer import AT_LEAST_ONCE, AT_MOST_ONCE, GuaranteedConsumer
    from ..processes import die_with_parent
    from .sinks import DeliveryWriter

    die_with_parent()

    class CrashingConsumer(GuaranteedConsumer):
        """Crashes, when armed, inside the window between processing and committing."""

        armed = False

        def _commit(self, consumer, records) -> bool:
            if self.armed and self.guarantee == AT_LEAST_ONCE:
                _crash(f"processed {len(records)} records, not committed")
            committed = super()._commit(consumer, records)
            if committed and self.armed and self.guarantee == AT_MOST_ONCE:
                _crash(f"committed {len(records)} records, not processed")
            return committed

    sink = DeliveryWriter(args.sink, args.table)
    quiet = logging.getLogger("oncelog.verify.librdkafka")
    quiet.setLevel(logging.CRITICAL)

    def process(record) -> None:
        sink.insert(record.value, record.topic, record.partition, record.offset)

    def on_assign(_consumer, partitions) -> None:
        print(f"ready {sorted(p.partition for p in partitions)}", flush=True)

    member = CrashingConsumer(
        args.guarantee, args.bootstrap, args.group, [args.topic], process,
        config={"group.instance.id": args.instance,
                "session.timeout.ms": args.session_timeout_ms,
                "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 100,
                "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
                "logger": quiet, **from_environment()},  # oncelog verify --command-config
        batch_size=args.batch_size, poll_timeout_s=0.2, on_assign=on_assign)

    def arm(*_) -> None:
        member.armed = True
        print("armed", flush=True)

    signal.signal(signal.SIGUSR1, arm)
    signal.signal(signal.SIGTERM, lambda *_: member.stop())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the verifier decides when we stop
    stats = member.run()
    sink.close()
    print(f"stopped after {stats.processed} records, {stats.commits} commits", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
