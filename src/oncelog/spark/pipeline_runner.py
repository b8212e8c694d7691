"""Run the example pipeline end to end: broker, generator, Spark, progress, report.

Used by ``oncelog pipeline run``. Without ``--bootstrap`` a broker is started for the run in
the work directory and stopped at the end (or on Ctrl-C); with one, the pipeline uses that
broker (oncelog's or Apache Kafka). Progress shows records produced, rows committed in the
sink, batches committed and the lag (records in the log not yet in the sink): a live table
on a terminal, plain flushed lines anywhere else (a line per committed batch, and one every
``PROGRESS_LINE_S`` at least). The run's broker is tied to this process (``BrokerProcess``:
it dies with it, even by ``kill -9``), and so is Spark's driver JVM, which PySpark makes exit
when the pipe from its Python driver closes. With
``output_topic`` the orders go to that topic through ``KafkaSink``; the sink is checked (the
broker reached, the topic created if missing, transactions started) before Spark starts. A
query whose Python worker missed Spark's connect-back limit is restarted from its checkpoint
(``WORKER_RESTARTS`` times at most).
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack, contextmanager

from rich.console import Console
from rich.live import Live
from rich.table import Table

from .offsets import to_json
from .pipeline import (Generator, PipelineSettings, Report, final_report, sink_state,
                       start_queries)


# Spark gives each Python worker it starts a fixed 10 s to connect back (not configurable);
# on a machine short of CPU one can miss it, and its query dies. Both sinks are exactly-once
# across restarts from the checkpoints (what a killed driver relies on), so the run restarts
# its queries a few times before giving up.
WORKER_MISSED = "Python worker failed to connect back"
WORKER_RESTARTS = 3
PROGRESS_LINE_S = 5.0  # not on a terminal: a progress line at least this often


class PipelineError(Exception):
    """The run cannot start or cannot finish: one sentence for the user."""


def run_pipeline(settings: PipelineSettings, *, start_broker: bool,
                 console: Console | None = None) -> Report:
    console = console or Console()
    settings.work_dir.mkdir(parents=True, exist_ok=True)
    check_sink(settings.sink_url)
    with ExitStack() as stack:
        if start_broker:
            broker = _start_broker(settings)
            stack.callback(broker.stop)
            settings.bootstrap = broker.bootstrap
            console.print(f"[bold]broker[/] pid {broker.pid} on {broker.bootstrap} "
                          f"(log: {broker.log_path})")
        lookups = Lookups(settings.bootstrap, settings.topic, settings.security)
        lookups.ensure_topic(partitions=3)
        if settings.output_topic:
            check_output_topic(settings)
            console.print(f"[bold]orders to topic[/] {settings.output_topic} (one Kafka "
                          f"transaction per batch)")
        console.print(f"[bold]sink[/] {hide(settings.sink_url)}   [bold]work dir[/] "
                      f"{settings.work_dir}")
        console.print(f"starting Spark ({settings.master}) ...")
        from .session import local_session
        spark = local_session("oncelog-pipeline", master=settings.master,
                              config=settings.spark_conf)
        stack.callback(spark.stop)
        generator = Generator(settings.bootstrap, settings.topic, settings.records,
                              settings.rate, security=settings.security).start()
        started = time.monotonic()
        stack.callback(lambda: [q.stop() for q in spark.streams.active])
        for attempt in range(WORKER_RESTARTS + 1):
            if attempt:
                console.print(f"\n[yellow]a Python worker missed Spark's 10 s to connect back "
                              f"(a busy machine): restarting the queries from their "
                              f"checkpoints ({attempt} of {WORKER_RESTARTS})[/]")
                for query in spark.streams.active:
                    query.stop()
            queries, missed = _start(spark, settings)
            if missed is None:
                _follow(console, settings, generator, queries, lookups, started)
                failures = (str(q.exception()) for q in queries if q.exception() is not None)
                missed = next((f for f in failures if WORKER_MISSED in f), None)
            if missed is None:
                break
        else:
            assert missed is not None  # the last attempt missed too
            raise PipelineError(f"Spark's Python workers missed its connect-back limit "
                                f"{WORKER_RESTARTS + 1} times: {missed.splitlines()[0]}")
        console.print()
        if generator.error:
            raise PipelineError(f"the order generator failed: {generator.error}")
        for query in queries:
            if query.exception():
                raise PipelineError(f"query {query.name} failed: "
                                    f"{str(query.exception()).splitlines()[0]}")
        in_topic = sum(lookups.latest().values()) - sum(lookups.earliest().values())
        return final_report(settings, in_topic, time.monotonic() - started)


def _start_broker(settings: PipelineSettings):
    """The run's broker, started (and tied to this process: it dies with us, even by
    ``kill -9``); one sentence if it cannot start, e.g. when a broker an earlier run left
    behind still holds the data directory."""
    from ..broker.process import BrokerExited, BrokerProcess
    broker = BrokerProcess(settings.work_dir / "broker-data",
                           log_path=settings.work_dir / "broker.log")
    try:
        return broker.start()
    except BrokerExited as error:
        raise PipelineError(f"the run's broker {error.summary}") from None
    except RuntimeError as error:  # it never listened
        raise PipelineError(f"the run's {error}; see {broker.log_path}") from None


def _start(spark, settings: PipelineSettings) -> tuple[list, str | None]:
    """Start both queries (from their checkpoints when they have some): the queries, or no
    queries and Spark's error when a Python worker missed its connect-back limit; any other
    error is raised."""
    try:
        return start_queries(spark, settings), None
    except Exception as error:  # noqa: BLE001 - Py4J and analysis errors alike
        if WORKER_MISSED not in str(error):
            raise
        return [], str(error)


def _follow(console, settings, generator, queries, lookups, started) -> None:
    """Show progress until every record in the log reached both sinks (or time runs out)."""
    orders_query, revenue_query = queries
    with _progress_display(console) as show:
        while True:
            time.sleep(0.5)
            latest = to_json(lookups.latest())
            state = sink_state(settings)
            lag = sum(max(0, offset - int(state.end_offsets.get(topic, {}).get(part, 0)))
                      for topic, parts in latest.items() for part, offset in parts.items())
            show(generator, state, lag, time.monotonic() - started)
            failed = [q for q in queries if q.exception() is not None or not q.isActive]
            if failed or generator.error:
                return
            if generator.done.is_set() and lag == 0 and _caught_up(revenue_query, latest):
                return
            if time.monotonic() - started > settings.timeout_s:
                raise PipelineError(f"the pipeline did not catch up within "
                                    f"{settings.timeout_s:.0f} s (lag {lag})")


def _caught_up(query, latest: dict) -> bool:
    progress = query.lastProgress
    if not progress or not progress.get("sources"):
        return False
    end = progress["sources"][0].get("endOffset")
    end = json.loads(end) if isinstance(end, str) else end
    return end == latest


@contextmanager
def _progress_display(console: Console):
    """``show(generator, state, lag, elapsed)``: on a terminal, a live table; anywhere else (a
    file, a pipe, CI) plain lines (``ProgressLines``), since a live table is only written
    out when it stops and the log would stay empty for the whole run."""
    if not console.is_terminal:
        yield ProgressLines(console).show
        return
    with Live(console=console, refresh_per_second=2, transient=False) as live:
        yield lambda *progress: live.update(_progress_table(*progress))


class ProgressLines:
    """One line per committed batch, at most one a second, and at least one every
    ``every_s`` while nothing is committed (Spark starting, a slow batch)."""

    def __init__(self, console: Console, every_s: float = PROGRESS_LINE_S) -> None:
        self.console = console
        self.every_s = every_s
        self.printed_at: float | None = None
        self.batches = -1

    def show(self, generator, state, lag: int, elapsed: float) -> None:
        since = None if self.printed_at is None else elapsed - self.printed_at
        new_batch = state.batches != self.batches
        if since is not None and since < (1.0 if new_batch else self.every_s):
            return
        self.printed_at, self.batches = elapsed, state.batches
        # rich writes and flushes each print; soft_wrap keeps a line one line in a log
        self.console.print(
            f"pipeline {elapsed:.0f} s: produced {generator.acknowledged + generator.failed}/"
            f"{generator.records}, acknowledged {generator.acknowledged}, rows in sink "
            f"{state.rows}, batches committed {state.batches}, lag {lag}",
            highlight=False, soft_wrap=True)


def _progress_table(generator, state, lag: int, elapsed: float) -> Table:
    table = Table(title=f"pipeline running ({elapsed:.0f} s)", title_justify="left")
    for column in ("produced", "acknowledged", "rows in sink", "batches committed", "lag"):
        table.add_column(column, justify="right")
    table.add_row(f"{generator.acknowledged + generator.failed}/{generator.records}",
                  str(generator.acknowledged), str(state.rows), str(state.batches), str(lag))
    return table


def print_report(console: Console, report: Report) -> None:
    table = Table(title="pipeline report")
    table.add_column("check")
    table.add_column("value", justify="right")
    table.add_row("records in the topic", str(report.in_topic))
    table.add_row("orders read from", report.orders_source)
    table.add_row("order rows in the sink", str(report.rows))
    table.add_row("distinct orders", str(report.distinct_orders))
    table.add_row("missing", str(report.missing))
    table.add_row("duplicated", str(report.duplicated))
    table.add_row("batches committed", str(report.batches))
    table.add_row("revenue table: orders / EUR",
                  f"{report.revenue_orders} / {report.revenue_eur:,.2f}")
    table.add_row("order rows: EUR", f"{report.rows_eur:,.2f}")
    table.add_row("elapsed", f"{report.elapsed_s:.1f} s "
                  f"({report.rows / max(report.elapsed_s, 1e-9):,.0f} rows/s)")
    console.print(table)
    if report.ok:
        console.print("[green]every record in the topic is in the sink exactly once, and the "
                      "revenue table agrees[/]")
    else:
        console.print("[red]the sink does not match the topic[/]")


def check_output_topic(settings: PipelineSettings) -> None:
    """Create the output topic if it is missing, and start (then close) the orders sink's
    transactional producer: a broker without transactions is one sentence, not a failed
    query."""
    from .pipeline import orders_kafka_sink
    from .sinks import SinkError
    if settings.output_topic == settings.topic:
        raise PipelineError(f"the output topic must not be the input topic {settings.topic!r}")
    assert settings.output_topic is not None  # asked for only with an output topic
    Lookups(settings.bootstrap, settings.output_topic,
            settings.security).ensure_topic(partitions=3)
    try:
        orders_kafka_sink(settings).check()
    except SinkError as error:
        raise PipelineError(str(error).rstrip(".")) from None


def check_sink(url: str) -> None:
    from .sinks import SinkError, open_database
    try:
        open_database(url).close()
    except SinkError as error:
        raise PipelineError(str(error).rstrip(".")) from None


def hide(url: str) -> str:
    from .sinks.database import hide_password
    return hide_password(url)


class Lookups:
    """The topic's partitions and offsets, for the lag and the final count."""

    def __init__(self, bootstrap: str, topic: str,
                 security: dict[str, str] | None = None) -> None:
        from confluent_kafka.admin import AdminClient
        from ..client.librdkafka import quiet_logger
        self.bootstrap = bootstrap
        self.topic = topic
        self.admin = AdminClient({"bootstrap.servers": bootstrap, **(security or {}),
                                  "logger": quiet_logger()})  # type: ignore[dict-item]

    def ensure_topic(self, partitions: int) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewTopic
        try:
            metadata = self.admin.list_topics(timeout=10)
        except KafkaException as error:
            raise PipelineError(f"cannot reach a broker at {self.bootstrap}: "
                                f"{error.args[0].str()}") from None
        if self.topic not in metadata.topics:
            future = self.admin.create_topics([NewTopic(self.topic, partitions, 1)])[self.topic]
            future.result(15)

    def _partitions(self) -> list[int]:
        metadata = self.admin.list_topics(topic=self.topic, timeout=10)
        return sorted(metadata.topics[self.topic].partitions)

    def _offsets(self, spec) -> dict[tuple[str, int], int]:
        from confluent_kafka import TopicPartition
        futures = self.admin.list_offsets({TopicPartition(self.topic, p): spec
                                           for p in self._partitions()}, request_timeout=10)
        return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

    def latest(self) -> dict[tuple[str, int], int]:
        from confluent_kafka.admin import OffsetSpec
        return self._offsets(OffsetSpec.latest())

    def earliest(self) -> dict[tuple[str, int], int]:
        from confluent_kafka.admin import OffsetSpec
        return self._offsets(OffsetSpec.earliest())
