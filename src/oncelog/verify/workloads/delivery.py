"""Delivery stages: what takes records from the log into a sink, per semantics.

| semantics | stage | sink |
|---|---|---|
| at-most-once | ``ConsumerStage("at_most_once")``: commit, then process | ``DeliveriesTable`` |
| at-least-once | ``ConsumerStage("at_least_once")``: process, then commit | ``DeliveriesTable`` |
| exactly-once | ``PipelineStage``: the Spark copy job, offsets stored with the output | ``PipelineTable`` |
| transactional | ``ReaderStage``: the ``read_committed`` reader, positions stored with the output | ``ReadTable`` |
| exactly-once, ``--exactly-once-stage transform`` | ``TransformStage``: the consume-transform-produce worker into ``<topic>-out``, read by a ``ReaderStage`` | ``ReadTable`` |

Each stage is one child process the faults can kill and restart. ``kill(timed=...)``:

- ``ConsumerStage``, timed: SIGUSR1 arms the consumer to kill itself inside its weakest
  window (``consumer.py``); if it has not died within ``wait_s``, ``kill -9`` anyway.
  ``ReaderStage`` the same, the reader dying right after a batch's transaction
  (``reader.py``).
- ``PipelineStage``, timed: wait (at most ``wait_s``) for the copy job to print
  ``batch N written`` - the sink has committed batch N, Spark has not yet recorded it in
  its commit log - and ``kill -9`` its process group (driver, JVM, Python workers) right
  then, so the restarted query runs batch N again and the sink must skip it. Whether it
  did land there is *checked*, not assumed: with the copy job dead, ``batch_window`` reads
  the last batch Spark planned (the checkpoint's ``offsets/N``), the last one the sink
  committed (its markers) and the last one Spark committed (``commits/N``), and names the
  window the kill hit (``WINDOWS``): before the sink's transaction (the batch must be
  written on replay), after it and before Spark's commit log (the replay must be skipped:
  the dangerous window), or after Spark's commit log (between batches).
- ``TransformStage``, timed: the transform worker kills itself inside a transaction, its
  copies produced and not committed (``transform.py``); its reader is a stage of its own,
  which ``kill-driver`` kills at once.
- untimed: ``kill -9`` at once, wherever the process happens to be.

On a Spark cluster (``--spark-master``), the copy job also prints which application it is
(``app APP_ID ui URL``) and, after each batch, the tasks each of the application's executors
ran (``batch N executors {...}``); ``PipelineStage.app()`` is the running application (what
``kill-executor`` needs to find its executors) and ``executor_evidence`` sums those lines
over every start of the job: the proof that the batches were read on executors.

A stage knows whether it was killed on purpose (``down``), so the runner can tell a fault
from a process that died on its own (``exited_unexpectedly``; ``exit_error``: the first line
of its error, from what its log gained since it last started), and whether it has recovered
from its last start (``steady``: a consumer has its partitions; the copy job has written a
batch), which the nemesis waits for before it kills it again.
"""  # noqa: E501 - a table's rows stay one line each

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ...client.security import from_environment
from ..landing import SPARK_DRIVER
from ..processes import ChildProcess, Children
from . import consumer as consumer_worker
from . import pipeline as pipeline_worker
from . import reader as reader_worker
from . import transform as transform_worker
from .sinks import DeliveriesTable, PipelineTable, ReadTable, SinkUnavailable

if TYPE_CHECKING:
    from confluent_kafka import Consumer

__all__ = ["ConsumerStage", "PipelineStage", "ReaderStage", "TransformStage", "WINDOWS",
           "batch_window", "error_line", "executor_evidence", "last_batch_file"]

_WRITTEN = re.compile(r"^batch (\d+) written$")
_APP = re.compile(r"^app (\S+) ui (\S+)$")
_EXECUTORS = re.compile(r"^batch (\d+) executors (\{.*\})$")

# where in a micro-batch a kill of the copy job landed (see batch_window)
WINDOWS = {
    "before_first_batch": "before Spark planned its first batch",
    "before_sink": "before the sink's transaction",
    "after_sink_before_commit_log": "after the sink's transaction, before Spark's commit log",
    "after_commit_log": "after Spark's commit log",
    "sink_ahead": "the sink holds a batch Spark never planned",
}


# "oncelog.spark.errors.SourceError: cannot look up ...", "KafkaException: KafkaError{...}"
_EXCEPTION = re.compile(r"^\s*(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit)): (.*\S)")
# exceptions that only wrap the one that matters (Spark's, py4j's): skipped while another
# exception line is there
_WRAPPERS = {"StreamingQueryException", "Py4JJavaError", "PythonException", "SparkException",
             "PySparkException", "RuntimeException", "ExecutionException"}
_STAMP = re.compile(r"^\[\d\d:\d\d:\d\d\] ")   # ChildProcess's prefix on stdout lines
_ERROR_LINE_MAX = 300
_QUERY_FAILED = "copy_job: the query failed:"   # copy_job.main's line on stderr


def error_line(text: str) -> str | None:
    """The first line of a process's error, from (the end of) its log: the first exception
    line that is not a wrapper (``SourceError: cannot look up offsets of t-1 at ...``), else
    the first wrapper, else the last line it wrote; None for an empty log. Where the copy job
    said its query failed, only what follows counts (a task Spark retried may have logged
    another error before)."""
    lines = [_STAMP.sub("", line).strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    failed = [index for index, line in enumerate(lines) if line.startswith(_QUERY_FAILED)]
    if failed:
        lines = lines[failed[-1]:]
    found = [(match.group(1), match.group(2)) for match in map(_EXCEPTION.match, lines)
             if match]
    chosen = next((f"{kind}: {message}" for kind, message in found if kind not in _WRAPPERS),
                  None) or next((f"{kind}: {message}" for kind, message in found), None)
    if chosen is None and lines:
        chosen = lines[-1]
    if chosen is not None and len(chosen) > _ERROR_LINE_MAX:
        chosen = chosen[:_ERROR_LINE_MAX - 3] + "..."
    return chosen


def last_batch_file(folder: Path) -> int | None:
    """The highest batch id among a Spark metadata log's files (``offsets/N``,
    ``commits/N``); temporary files (not a plain number) do not count."""
    try:
        ids = [int(path.name) for path in Path(folder).iterdir() if path.name.isdigit()]
    except FileNotFoundError:
        return None
    return max(ids, default=None)


def batch_window(planned: int | None, sink: int | None, committed: int | None) -> dict:
    """The window a kill landed in, from the last batch Spark planned (``offsets/N``), the
    last the sink committed (its marker) and the last Spark committed (``commits/N``)."""
    if planned is None:
        window = "sink_ahead" if sink is not None else "before_first_batch"
    elif sink is not None and sink > planned:
        window = "sink_ahead"
    elif committed is not None and committed >= planned:
        window = "after_commit_log"
    elif sink is not None and sink >= planned:
        window = "after_sink_before_commit_log"
    else:
        window = "before_sink"
    return {"id": window, "name": WINDOWS[window], "batch": planned, "sink_batch": sink,
            "spark_commit": committed}


def executor_evidence(lines: Iterable[str]) -> dict:
    """Where the copy job's tasks ran, from its ``app ...`` and ``batch N executors {...}``
    lines over all its starts (each start is a new application; each executors line is
    cumulative for its application, so the last one counts): per application, the tasks each
    executor ran; ``tasks_on_executors``, their sum; ``executors_with_tasks``, how many
    executors ran at least one; ``hosts``, where those executors were."""
    apps: dict[str, dict[str, dict]] = {}
    current = None
    for text in lines:
        match = _APP.match(text)
        if match:
            current = match.group(1)
            apps.setdefault(current, {})
            continue
        match = _EXECUTORS.match(text)
        if match and current is not None:
            try:
                executors = json.loads(match.group(2))
            except ValueError:
                continue
            if isinstance(executors, dict):
                apps[current] = {str(executor): {"tasks": int(status.get("tasks", 0)),
                                                 "failed": int(status.get("failed", 0)),
                                                 "host": status.get("host")}
                                 for executor, status in executors.items()
                                 if isinstance(status, dict)}
    ran = [status for executors in apps.values() for status in executors.values()
           if status["tasks"] > 0]
    return {"apps": list(apps), "executors": apps,
            "tasks_on_executors": sum(status["tasks"] for status in ran),
            "executors_with_tasks": len(ran),
            "hosts": sorted({status["host"] for status in ran if status["host"]})}


class _Stage:
    child: ChildProcess
    sink: DeliveriesTable | PipelineTable | ReadTable
    description: str
    ready_prefix: str
    steady_pattern: str
    ready_timeout_s: float

    def __init__(self) -> None:
        self.down = False
        self._started_at = 0.0
        self._log_start = 0     # the log's size when the process last started

    @property
    def pid(self) -> int | None:
        return self.child.pid

    @property
    def alive(self) -> bool:
        return self.child.alive

    @property
    def log_path(self) -> Path:
        return self.child.log_path

    def exited_unexpectedly(self) -> int | None:
        """The exit status if the process died and no fault killed it, else None."""
        if self.down or self.child.alive or self.child.process is None:
            return None
        return self.child.returncode

    def exited_process(self) -> tuple[str, Path]:
        """What ``exited_unexpectedly`` is about: a description and its log."""
        return self.description, self.log_path

    def exit_error(self) -> str | None:
        """The first line of the error the process ended with (``error_line`` of what its
        log gained since it last started); None when it wrote nothing."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_start)
                text = log.read().decode(errors="replace")
        except OSError:
            return None
        return error_line(text)

    def start(self) -> None:
        self._started_at = time.monotonic()
        self.down = False
        try:
            self._log_start = self.log_path.stat().st_size
        except OSError:
            self._log_start = 0
        self.child.start()

    def printed(self, pattern: str) -> bool:
        """Whether the process printed a line matching ``pattern`` since it last started."""
        regex = re.compile(pattern)
        return self.child.wait_for_line(lambda text: bool(regex.match(text)),
                                        after=self._started_at - 1e-3, timeout=0) is not None

    @property
    def started_at(self) -> float:
        """When the process was last started (``time.monotonic()``)."""
        return self._started_at

    @property
    def steady(self) -> bool:
        """Running, and recovered from its last start: worth a fault."""
        return self.alive and self.printed(self.steady_pattern)

    def wait_ready(self, timeout_s: float | None = None) -> bool:
        line = self.child.wait_for_line(lambda text: text.startswith(self.ready_prefix),
                                        after=self._started_at - 1e-3,
                                        timeout=timeout_s or self.ready_timeout_s)
        return line is not None

    def restart(self) -> dict:
        self.start()
        return {"pid": self.pid}

    def stop(self) -> None:
        self.down = True
        self.child.stop(timeout=10.0)

    def _kill_now(self) -> int | None:
        self.down = True
        return self.child.kill()

    def behind(self, ends: dict[int, int]) -> int:
        """Offsets the sink is behind ``ends`` (the log end offsets when the producers
        stopped); 0 once drained. ``SinkUnavailable`` when the sink is busy."""
        delivered = self.sink.ends()
        return sum(max(0, end - delivered.get(partition, 0)) for partition, end in ends.items())


class _SelfKillingStage(_Stage):
    """A worker that, armed with SIGUSR1, kills itself in its weakest window."""

    ready_prefix = "ready"
    steady_pattern = r"^ready"  # it has its partitions
    ready_timeout_s = 60.0

    def kill(self, *, timed: bool, wait_s: float = 3.0) -> dict:
        pid = self.pid
        if not self.child.alive:
            self.down = True
            return {"pid": pid, "landed": "was not running"}
        if timed:
            armed_at = time.monotonic()
            self.down = True
            self.child.signal(signal.SIGUSR1)
            if self.child.wait_exit(wait_s):
                line = self.child.wait_for_line(lambda text: text.startswith("crash:"),
                                                after=armed_at, timeout=0.5)
                self.child.kill()  # reap, and take anything left in its group
                if line is not None:
                    return {"pid": pid, "landed": line.text[len("crash: "):]}
                return {"pid": pid, "landed": f"exited with status {self.child.returncode}"}
            self._kill_now()
            return {"pid": pid, "landed": f"kill -9 (no batch within {wait_s:g} s of arming)"}
        self._kill_now()
        return {"pid": pid, "landed": "kill -9 at once"}


class ConsumerStage(_SelfKillingStage):
    def __init__(self, guarantee: str, *, bootstrap: str, topic: str, sink: DeliveriesTable,
                 log_path: Path, children: Children, session_timeout_ms: int,
                 batch_size: int = 200) -> None:
        super().__init__()
        self.guarantee = guarantee
        self.sink = sink
        self.description = f"{guarantee.replace('_', '-')} consumer"
        self.child = children.add(ChildProcess(
            self.description,
            consumer_worker.command(guarantee=guarantee, bootstrap=bootstrap, group=topic,
                                    topic=topic, sink_url=sink.url, table=sink.table,
                                    instance=f"{topic}-consumer",
                                    session_timeout_ms=session_timeout_ms,
                                    batch_size=batch_size),
            log_path, watch=True))


class ReaderStage(_SelfKillingStage):
    """The exactly-once reader (``reader.py``) of ``topic`` into a ``ReadTable``."""

    def __init__(self, *, bootstrap: str, topic: str, partitions: int, isolation: str,
                 sink: ReadTable, log_path: Path, children: Children) -> None:
        super().__init__()
        self.sink = sink
        self.isolation = isolation
        self.description = f"{isolation} reader"
        self.child = children.add(ChildProcess(
            self.description,
            reader_worker.command(bootstrap=bootstrap, topic=topic, partitions=partitions,
                                  isolation=isolation, sink_url=sink.url, table=sink.table),
            log_path, watch=True))


class TransformStage(_SelfKillingStage):
    """The exactly-once transform worker (the stage's ``child``, ``kill-consumer``'s target)
    from ``topic`` to ``<topic>-out``, and ``reader``: the ``read_committed`` reader of the
    output topic into the sink. It has drained when the group's committed input offsets
    reach the input's log end and the reader has read the output topic to its end."""

    def __init__(self, *, bootstrap: str, topic: str, partitions: int, sink: ReadTable,
                 log_dir: Path, name: str, children: Children,
                 session_timeout_ms: int) -> None:
        super().__init__()
        self.bootstrap = bootstrap
        self.topic = topic
        self.output_topic = transform_worker.output_topic(topic)
        self.group = f"{topic}-transform"
        self.sink = sink
        self.description = "exactly-once transform"
        self.reader = ReaderStage(bootstrap=bootstrap, topic=self.output_topic,
                                  partitions=partitions, isolation="read_committed", sink=sink,
                                  log_path=log_dir / f"{name}-reader.log", children=children)
        self.child = children.add(ChildProcess(
            self.description,
            transform_worker.command(bootstrap=bootstrap, topic=topic, group=self.group,
                                     session_timeout_ms=session_timeout_ms),
            log_dir / f"{name}-transform.log", watch=True))
        self._offsets_client: Consumer | None = None

    def start(self) -> None:
        if not self.reader.alive:
            self.reader.start()
        super().start()

    def wait_ready(self, timeout_s: float | None = None) -> bool:
        return self.reader.wait_ready(timeout_s) and super().wait_ready(timeout_s)

    def exited_unexpectedly(self) -> int | None:
        status = super().exited_unexpectedly()
        return status if status is not None else self.reader.exited_unexpectedly()

    def exited_process(self) -> tuple[str, Path]:
        if self._reader_exited():
            return self.reader.exited_process()
        return super().exited_process()

    def exit_error(self) -> str | None:
        return self.reader.exit_error() if self._reader_exited() else super().exit_error()

    def _reader_exited(self) -> bool:
        return super().exited_unexpectedly() is None and \
            self.reader.exited_unexpectedly() is not None

    def restart(self) -> dict:
        """Start whichever of the two is not running."""
        detail = {}
        if not self.reader.alive:
            detail["reader"] = self.reader.restart()["pid"]
        if not self.child.alive:
            detail.update(super().restart())
        return detail

    def stop(self) -> None:
        super().stop()
        self.reader.stop()
        if self._offsets_client is not None:
            self._offsets_client.close()
            self._offsets_client = None

    def behind(self, ends: dict[int, int]) -> int:
        from confluent_kafka import KafkaException, TopicPartition
        if self._offsets_client is None:
            from confluent_kafka import Consumer
            self._offsets_client = Consumer({  # never subscribes: it only reads offsets
                "bootstrap.servers": self.bootstrap, **from_environment(),
                "group.id": self.group, "enable.auto.commit": False, "logger": _quiet()})
        client = self._offsets_client
        try:
            committed = client.committed([TopicPartition(self.topic, p) for p in ends],
                                         timeout=10)
            input_behind = sum(max(0, ends[tp.partition] - max(tp.offset, 0))
                               for tp in committed)
            if input_behind:
                return input_behind
            output_ends = {p: client.get_watermark_offsets(
                TopicPartition(self.output_topic, p), timeout=10)[1] for p in ends}
        except KafkaException:
            return sum(ends.values())  # cannot tell now: look again in a moment
        return super().behind(output_ends)


def _quiet():
    import logging
    quiet = logging.getLogger("oncelog.verify.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    return quiet


class PipelineStage(_Stage):
    sink: PipelineTable
    ready_prefix = "started"
    steady_pattern = _WRITTEN.pattern  # past the JVM start and its first batch
    ready_timeout_s = 180.0

    def __init__(self, *, bootstrap: str, topic: str, sink: PipelineTable, checkpoint: Path,
                 log_path: Path, children: Children, trigger_ms: int = 500,
                 pause_ms: int = 100, max_offsets_per_trigger: int = 2000,
                 master: str | None = None) -> None:
        super().__init__()
        self.sink = sink
        self.checkpoint = Path(checkpoint)
        self.query_name = topic
        self.master = master
        self.pause_ms = pause_ms
        self.description = SPARK_DRIVER
        self.child = children.add(ChildProcess(
            self.description,
            pipeline_worker.command(bootstrap=bootstrap, topic=topic, sink_url=sink.url,
                                    table=sink.table, checkpoint=str(checkpoint),
                                    query_name=topic, trigger_ms=trigger_ms,
                                    pause_ms=pause_ms,
                                    max_offsets_per_trigger=max_offsets_per_trigger,
                                    master=master),
            log_path, watch=True))

    def app(self) -> tuple[str, str] | None:
        """``(application id, driver UI URL)`` of the running copy job on a cluster; None
        before it said (or in local mode)."""
        for line in reversed(self.child.lines):
            if line.time < self._started_at:
                return None
            match = _APP.match(line.text)
            if match:
                return match.group(1), match.group(2)
        return None

    def executor_evidence(self) -> dict:
        """Where the tasks ran, over every start of the job (``executor_evidence``)."""
        return executor_evidence(line.text for line in self.child.lines)

    def kill(self, *, timed: bool, wait_s: float = 8.0) -> dict:
        pid = self.pid
        if not self.child.alive:
            self.down = True
            return {"pid": pid, "landed": "was not running"}
        if timed:
            line = self.child.wait_for_line(lambda text: bool(_WRITTEN.match(text)),
                                            after=time.monotonic(), timeout=wait_s)
            self._kill_now()
            if line is not None:
                landed = f"after '{line.text}'"
            else:
                phase = "still starting" if not self.printed("^started$") else "no batch written"
                landed = f"kill -9 ({phase} within {wait_s:g} s)"
        else:
            self._kill_now()
            landed = "kill -9 at once"
        return {"pid": pid, "landed": landed, "window": self.window()}

    def window(self) -> dict:
        """Where the (dead) copy job was in its batch: see ``batch_window``."""
        try:
            sink = self.sink.last_batch_id(self.query_name)
        except SinkUnavailable as error:
            return {"id": "unknown", "name": f"unknown: {error}"}
        return batch_window(last_batch_file(self.checkpoint / "offsets"), sink,
                            last_batch_file(self.checkpoint / "commits"))
