"""kill -9 of the Spark driver writing into a Kafka topic through ``KafkaSink``, again and
again; the output topic read with ``read_committed`` holds every input record exactly once.

The driver is ``python -m oncelog.spark.copy_job --sink kafka://OUT`` in a process group of
its own (``kill -9`` takes Python and its JVM at once). Three kills, each restarted on the
same checkpoint:

1. at a random moment of a batch (seeded; the seed is in the failure message): before,
   during or after the sink's transaction;
2. while the sink's transaction is open with records in the log - seen from outside as the
   output topic's last stable offset behind its high watermark: the restarted driver's
   InitProducerId aborts that transaction, and Spark re-runs the batch;
3. just after the sink committed a batch, before Spark's commit log recorded it: the
   restarted query re-runs that batch id and the sink must skip it.

Records keep arriving between the crashes.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from oncelog.client.reader import read_topic

from .conftest import new_topic, produce
from .test_driver_crash import CopyJob, batch_line

FIRST, SECOND = 3000, 1000


def open_transaction_in(admin: AdminClient, topic: str, partitions: int) -> bool:
    """Some partition's last stable offset is behind its high watermark."""
    def ends(level):
        wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
        futures = admin.list_offsets(wanted, isolation_level=level, request_timeout=5)
        return {tp.partition: future.result().offset for tp, future in futures.items()}
    return ends(IsolationLevel.READ_COMMITTED) != ends(IsolationLevel.READ_UNCOMMITTED)


def wait_until(condition, what: str, job: CopyJob, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if job.process.poll() is not None:
            break
        time.sleep(0.01)
    raise AssertionError(f"never saw {what}; the copy job printed {job.lines}")


@pytest.mark.slow
@pytest.mark.timeout(600)  # 1-2.5 min; Spark JVMs start slowly on a loaded machine
def test_kafka_sink_is_exactly_once_across_repeated_driver_kills(spark_broker, tmp_path):
    bootstrap = spark_broker.bootstrap
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    source = new_topic(bootstrap, partitions=3, prefix="crash-in")
    out = new_topic(bootstrap, partitions=3, prefix="crash-out")
    produce(bootstrap, source, [f"id-{i}".encode() for i in range(FIRST)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    args = ["--bootstrap", bootstrap, "--topic", source, "--sink", f"kafka://{out}",
            "--checkpoint", str(tmp_path / "checkpoint"), "--max-offsets-per-trigger", "800",
            "--query-name", "kafka-crash"]
    log: Path = tmp_path / "copy_job.log"
    jobs: list[CopyJob] = []
    started = time.monotonic()

    def run_and_kill(wait) -> None:
        # the hold keeps kill 2 inside an open transaction: without it the broker commits
        # the batch within milliseconds of its records showing, often before the kill lands
        job = CopyJob(args + ["--pause-ms", "300", "--hold-transaction-ms", "500"], log)
        jobs.append(job)
        try:
            wait(job)
        finally:
            job.kill()
        print(f"kill {len(jobs)} at {time.monotonic() - started:.1f} s: {job.lines[-3:]}")

    def random_moment(job: CopyJob) -> None:
        job.wait_for(batch_line("writing", 0))
        time.sleep(rng.uniform(0, 1.4))  # 0.3 s pause, the transaction held 0.5 s, 0.3 s pause

    def open_transaction(job: CopyJob) -> None:
        wait_until(lambda: open_transaction_in(admin, out, 3), "an open transaction", job)

    def just_committed(job: CopyJob) -> None:
        job.wait_for(batch_line("written", 0))

    run_and_kill(random_moment)
    produce(bootstrap, source, [f"id-{i}".encode() for i in range(FIRST, FIRST + SECOND)])
    run_and_kill(open_transaction)
    run_and_kill(just_committed)
    last = CopyJob(args + ["--stop-when-idle", "3"], log)
    jobs.append(last)
    assert last.finish() == 0, f"the last run failed (seed {seed}); see {log}"
    print(f"last run done at {time.monotonic() - started:.1f} s: {last.lines[:4]}")

    committed = [r.value for r in read_topic(bootstrap, out, isolation_level="read_committed")]
    expected = sorted(f"id-{i}".encode() for i in range(FIRST + SECOND))
    assert len(committed) == FIRST + SECOND, f"seed {seed}"
    assert sorted(committed) == expected, f"seed {seed}"
    # kill 2 left records of an open transaction in the log; the restart aborted them
    everything = list(read_topic(bootstrap, out, isolation_level="read_uncommitted"))
    assert len(everything) > len(committed), f"seed {seed}"
    # kill 3: the batch committed just before it was re-run by Spark and skipped
    batch = max(int(line.split()[1]) for line in jobs[2].lines
                if batch_line("written", 0)(line))
    assert f"batch {batch} skipped" in jobs[3].lines, (seed, jobs[3].lines[:6])
