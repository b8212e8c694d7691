"""The exactly-once delivery stage's process: ``python -m oncelog.verify.workloads.pipeline``.

It is ``oncelog.spark.copy_job`` (the ``oncelog`` source into a ``TransactionalSink``: a
batch's rows and its end offsets in one SQLite transaction, a re-run batch skipped), with
one addition: it dies with the verifier (``die_with_parent``); its JVM follows, as PySpark's
gateway JVM exits when its driver's stdin pipe closes. Arguments are the copy job's.
"""

from __future__ import annotations

import sys

__all__ = ["command", "main"]


def command(*, bootstrap: str, topic: str, sink_url: str, table: str, checkpoint: str,
            query_name: str, trigger_ms: int = 500, pause_ms: int = 100,
            max_offsets_per_trigger: int = 2000, master: str | None = None) -> list[str]:
    # --pause-ms widens the window between "batch N written" (the sink committed) and
    # Spark's commit log, where kill-driver lands; --max-offsets-per-trigger keeps batches
    # short after a restart, so that window comes round every second or two instead of
    # once per backlog.
    return [sys.executable, "-m", "oncelog.verify.workloads.pipeline",
            "--bootstrap", bootstrap, "--topic", topic, "--sink", sink_url, "--table", table,
            "--checkpoint", checkpoint, "--query-name", query_name,
            "--trigger-ms", str(trigger_ms), "--pause-ms", str(pause_ms),
            "--max-offsets-per-trigger", str(max_offsets_per_trigger),
            *(["--master", master] if master else [])]


def main(argv: list[str] | None = None) -> int:
    from ...spark.copy_job import main as copy_job
    from ..processes import die_with_parent

    die_with_parent()
    return copy_job(argv)


if __name__ == "__main__":
    sys.exit(main())
