"""``oncelog pipeline run``: the example PySpark pipeline, from a generator to an exactly-once
sink."""

from __future__ import annotations


import click

from . import main
from .common import (Failure, absolute_sqlite_url, check_bootstrap, command_config_option,
                     read_command_config, user_path)


@main.group()
def pipeline() -> None:
    """The PySpark data pipeline (see docs/pipeline.md)."""


@pipeline.command()
@click.option("--bootstrap", "-b", metavar="HOST:PORT", default=None,
              help="Use this broker [default: start one for the run in the work directory].")
@command_config_option
@click.option("--sink", "sink_url", metavar="URL", default=None,
              help="sqlite:///path.db or postgresql://user@host:port/db "
                   "[default: sqlite in the work directory].")
@click.option("--output-topic", metavar="TOPIC", default=None,
              help="Write the enriched orders to this topic (created if missing), one Kafka "
                   "transaction per batch with its batch id, instead of the orders table; "
                   "the revenue table stays in --sink.")
@click.option("--work-dir", type=user_path(file_okay=False),
              default="pipeline-out", show_default=True,
              help="Checkpoints, the default SQLite sink and the broker's data. Run again with "
                   "the same folder to continue where the last run stopped.")
@click.option("--records", "-n", type=click.IntRange(min=0), default=20_000, show_default=True,
              help="Orders the generator produces.")
@click.option("--rate", type=click.FloatRange(min=1), default=5_000, show_default=True,
              help="Orders per second.")
@click.option("--topic", default="orders", show_default=True)
@click.option("--max-offsets-per-trigger", type=click.IntRange(min=1), default=5_000,
              show_default=True)
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True,
              help="Give up if the sink has not caught up after this many seconds.")
@click.option("--master", default="local[2]", show_default=True, metavar="URL",
              help="Where Spark runs: any master URL Spark accepts, e.g. spark://HOST:7077 for "
                   "a standalone cluster (whose workers need oncelog: see docs/pipeline.md).")
@click.option("--conf", "spark_conf", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting for the run, e.g. spark.submit.pyFiles=oncelog.zip or "
                   "spark.executor.memory=1g; repeatable.")
def run(bootstrap, command_config, sink_url, output_topic, work_dir, records, rate, topic,
        max_offsets_per_trigger, timeout, master, spark_conf) -> None:
    """Produce orders, enrich and aggregate them on Spark, write them exactly once, report."""
    import sys

    from ..spark.pipeline import PipelineSettings
    from ..spark.pipeline_runner import PipelineError, print_report, run_pipeline
    from rich.console import Console

    security = read_command_config(command_config)
    if security and not bootstrap:
        raise Failure("--command-config is for a broker of yours (--bootstrap); the broker "
                      "the run starts listens in PLAINTEXT")
    sink_url = absolute_sqlite_url(sink_url) or f"sqlite:///{work_dir / 'pipeline.db'}"
    settings = PipelineSettings(
        bootstrap=bootstrap or "", sink_url=sink_url,
        work_dir=work_dir, topic=topic, records=records, rate=rate,
        max_offsets_per_trigger=max_offsets_per_trigger, timeout_s=timeout,
        output_topic=output_topic, master=master, spark_conf=parse_conf(spark_conf),
        security=security)
    console = Console()
    if bootstrap:
        # unreachable, untrusted, a wrong password: one sentence before Spark starts
        check_bootstrap(bootstrap, security)
    check_master(master)
    try:
        report = run_pipeline(settings, start_broker=not bootstrap, console=console)
    except PipelineError as error:
        raise Failure(str(error)) from None
    print_report(console, report)
    if not report.ok:
        sys.exit(1)


def parse_conf(settings: tuple[str, ...]) -> dict[str, str]:
    parsed = {}
    for setting in settings:
        name, equals, value = setting.partition("=")
        if not equals or not name.strip():
            raise click.BadParameter(f"{setting!r} is not KEY=VALUE", param_hint="--conf")
        parsed[name.strip()] = value
    return parsed


def check_master(master: str) -> None:
    """A standalone master that does not answer is one sentence now, not a minute of Spark
    retrying to register and a Java stack trace."""
    import socket
    if not master.startswith("spark://"):
        return
    for address in master[len("spark://"):].split(","):     # HA masters: host1:7077,host2:7077
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=5):
                return
        except (OSError, ValueError):
            continue
    raise Failure(f"cannot reach the Spark master at {master}: is it running? "
                  f"(docs/pipeline.md, \"On a Spark standalone cluster\", shows how to start one)")
