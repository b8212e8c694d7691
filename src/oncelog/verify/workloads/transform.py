"""The consume-transform-produce worker: ``python -m oncelog.verify.workloads.transform``.

``oncelog.client.transform.exactly_once_transform`` from the run's topic to its output
topic (``<topic>-out``, as many partitions): each polled batch's copies and its input
offsets commit in one Kafka transaction (KIP-98, KIP-447). The exactly-once run's
``transform`` stage puts it between the producers and the ``read_committed`` reader
(``reader.py``), so the checker judges Kafka's own exactly-once, end to end.

The copy keeps the record's value (its id) and key, and goes to the *same partition number*
in the output topic, so each producer's per-partition order survives the copy and the
checker can hold the stage to exactly-once's order too (the default partitioner would
spread one input partition over all output partitions).

It is a static group member (``group.instance.id``), so a restarted worker gets its
partitions back at once, and it has a stable ``transactional.id``, so its restart fences
the killed instance and aborts the transaction that instance left open (a unique id per
instance would leave it open, holding ``read_committed`` readers back until it timed out).

**Where ``kill-consumer`` lands.** SIGUSR1 arms a crash inside the next transaction: its
copies are produced, the input offsets sent, and ``commit_transaction`` not yet called -
the output topic holds records a ``read_committed`` reader must never see, and the batch is
read again after the restart. It prints ``ready [partitions]`` on each assignment, ``crash:
<where>`` just before killing itself, and stops on SIGTERM.

**A watchdog for a librdkafka bug.** After a broker restart, librdkafka 2.x can block in
``send_offsets_to_transaction()`` for ever, its timeout ignored, when the group
coordinator's broker handle was decommissioned (confluentinc/librdkafka#5456, #5511). A
blocked C call cannot be interrupted from Python, so a watchdog thread ends the process
(exit status 75, a line saying why) once a transaction has been open longer than the
transaction timeout - by then the broker has aborted it anyway. The runner restarts the
worker as it restarts any stage that exited on its own, and reports it as an unplanned exit
(a finding of the result, with the worker's "stuck: ..." line); the new instance fences
the old one and reads the batch again.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time

from ...client.security import from_environment

__all__ = ["command", "main", "output_topic"]

TRANSACTION_TIMEOUT_S = 10.0
WATCHDOG_EXIT_STATUS = 75


def output_topic(topic: str) -> str:
    return f"{topic}-out"


def command(*, bootstrap: str, topic: str, group: str, session_timeout_ms: int,
            batch_size: int = 500) -> list[str]:
    return [sys.executable, "-m", "oncelog.verify.workloads.transform",
            "--bootstrap", bootstrap, "--topic", topic, "--group", group,
            "--session-timeout-ms", str(session_timeout_ms), "--batch-size", str(batch_size)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m oncelog.verify.workloads.transform")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True, help="the input topic")
    parser.add_argument("--group", required=True)
    parser.add_argument("--session-timeout-ms", type=int, required=True)
    parser.add_argument("--batch-size", type=int, default=500)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from ...client.transform import ExactlyOnceTransform
    from ..processes import die_with_parent

    die_with_parent()
    # the transform's aborts and commit retries go to the stage's log
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(levelname)s %(name)s: %(message)s")
    quiet = logging.getLogger("oncelog.verify.librdkafka")
    quiet.setLevel(logging.CRITICAL)

    class CrashingTransform(ExactlyOnceTransform):
        """Copies partition to partition; crashes, when armed, before a commit."""

        armed = False
        partition = 0      # of the record being transformed: single-threaded, set just before
        produced = 0
        open_since: float | None = None   # monotonic start of the transaction, for the watchdog

        def _transact(self, producer, consumer, records) -> None:
            self.open_since = time.monotonic()
            try:
                super()._transact(producer, consumer, records)
            finally:
                self.open_since = None

        def _produce(self, producer, key, value) -> None:
            while True:
                try:
                    producer.produce(self.output_topic, value, key, partition=self.partition)
                    self.produced += 1
                    return
                except BufferError:
                    producer.poll(0.1)

        def _commit(self, producer) -> None:
            if self.armed:
                print(f"crash: produced {self.produced} copies, transaction not committed",
                      flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            super()._commit(producer)
            self.produced = 0

    def copy(record):
        worker.partition = record.partition
        return [(record.key, record.value)]

    def on_assign(_consumer, partitions) -> None:
        print(f"ready {sorted(p.partition for p in partitions)}", flush=True)

    worker = CrashingTransform(
        args.bootstrap, args.group, [args.topic], copy, output_topic(args.topic),
        transactional_id=f"{output_topic(args.topic)}-transform",
        consumer_config={"group.instance.id": f"{args.group}-worker",
                         "session.timeout.ms": args.session_timeout_ms,
                         "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 100,
                         "reconnect.backoff.ms": 50,
                         "reconnect.backoff.max.ms": 500, "logger": quiet,
                         **from_environment()},  # oncelog verify --command-config
        producer_config={"linger.ms": 5, "request.timeout.ms": 5000,
                         "message.timeout.ms": int(TRANSACTION_TIMEOUT_S * 1000),
                         "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000,
                         "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
                         "logger": quiet, **from_environment()},
        batch_size=args.batch_size, poll_timeout_s=0.2,
        transaction_timeout_s=TRANSACTION_TIMEOUT_S, on_assign=on_assign)

    def arm(*_) -> None:
        worker.armed = True
        print("armed", flush=True)

    def watchdog() -> None:
        while True:
            time.sleep(0.5)
            since = worker.open_since
            if since is not None and time.monotonic() - since > TRANSACTION_TIMEOUT_S + 2:
                print(f"stuck: a transaction open for more than {TRANSACTION_TIMEOUT_S:g} s "
                      "(librdkafka#5456); exiting to be restarted", flush=True)
                os._exit(WATCHDOG_EXIT_STATUS)

    threading.Thread(target=watchdog, name="watchdog", daemon=True).start()
    signal.signal(signal.SIGUSR1, arm)
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the verifier decides when we stop
    stats = worker.run()
    print(f"stopped after {stats.consumed} records in {stats.transactions} transactions, "
          f"{stats.aborted} aborted", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
