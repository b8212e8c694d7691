"""``oncelog verify``: prove the delivery guarantees under faults (docs/verifier.md).

Exit status: 0 every contract kept (and each semantics' faults landed); 1 a contract broken
(a negative control caught, too); 2 bad input (nothing ran); 3 inconclusive: nothing broken,
but a semantics proved nothing (none of its faults landed, nothing was acknowledged or
delivered, or a negative control showed nothing); 4 the run could not complete (a process
would not start or restart); 130 interrupted (every process the run started is stopped
first).
"""

from __future__ import annotations

import os
import sys

import click

from . import main
from .common import Failure, absolute_sqlite_url, command_config_option, user_path

EXIT_BROKEN, EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_RUN_FAILED = 1, 2, 3, 4
EXIT_INTERRUPTED = 130


class BadInputFailure(Failure):
    exit_code = EXIT_BAD_INPUT


class RunFailure(Failure):
    exit_code = EXIT_RUN_FAILED


class InconclusiveFailure(Failure):
    exit_code = EXIT_INCONCLUSIVE


@main.command()
@click.option("--semantics", "-s", default=None,
              metavar="at-most-once|at-least-once|exactly-once|transactional|all",
              help="Which semantics to verify (a comma-separated list works too); all is "
                   "the three guarantees, transactional is asked for by name "
                   "[default: all, or the --control's semantics].")
@click.option("--faults", "-f", default=None, metavar="LIST",
              help="Faults to inject: kill-broker, kill-consumer, kill-driver, drop-acks, "
                   "and with --brokers 2 or more kill-leader, pause-broker and the network "
                   "partitions partition-leader, isolate-zookeeper, split, cut-link, "
                   "slow-net (root on Linux: the cluster runs in network namespaces), with "
                   "--spark-master and --semantics exactly-once kill-executor "
                   "(comma-separated), or none: a plain run, reported as such "
                   "[default: kill-broker,kill-consumer,kill-driver,drop-acks; "
                   "with --bootstrap without kill-broker; or the --control's faults].")
@click.option("--duration", "duration_s", type=float, default=45.0, show_default=True,
              metavar="S", help="Seconds of workload per semantics.")
@click.option("--seed", type=int, default=None, metavar="N",
              help="Seed of the fault schedule; the same seed replays the same schedule "
                   "[default: a random one, printed].")
@click.option("--bootstrap", "-b", default=None, metavar="HOST:PORT",
              help="Use this broker instead of starting one, an Apache Kafka for one; "
                   "only kill-consumer, kill-driver, drop-acks (and kill-executor) apply to "
                   "a broker the run did not start.")
@command_config_option
@click.option("--brokers", type=click.IntRange(1, 9), default=None, metavar="N",
              help="Start a cluster of N brokers and a ZooKeeper (topics with replication "
                   "factor min(3, N), min.insync.replicas=2) [default: 1 broker, no "
                   "ZooKeeper].")
@click.option("--sink", "sink_url", default=None, metavar="URL",
              help="Deliver into this database, a table per semantics "
                   "(oncelog_verify_<semantics>): sqlite:///path.db or "
                   "postgresql://user@host:port/db [default: a SQLite file per semantics "
                   "in --out].")
@click.option("--out", "out_dir", type=user_path(),
              default="verify-out",
              show_default=True, help="Where result.json, chart.png, histories, sinks and "
                                      "logs go.")
@click.option("--rate", type=float, default=400.0, show_default=True, metavar="N",
              help="Records per second per semantics (all producers together).")
@click.option("--producers", type=int, default=2, show_default=True, metavar="N",
              help="Producer processes per semantics.")
@click.option("--partitions", type=int, default=3, show_default=True, metavar="N")
@click.option("--drain-timeout", "drain_timeout_s", type=float, default=120.0,
              show_default=True, metavar="S",
              help="After the workload, how long to wait for the sink to catch up.")
@click.option("--control", type=click.Choice(["lost", "duplicated", "reordered",
                                             "aborted-reads"]), default=None,
              help="Run a negative control: a deliberately broken configuration the checker "
                   "must catch (exit 1). lost: at-least-once delivered by the at-most-once "
                   "consumer under kill-consumer; duplicated: exactly-once delivered by the "
                   "at-least-once consumer under kill-consumer; reordered: exactly-once "
                   "produced without idempotence, 5 requests in flight, under drop-acks; "
                   "aborted-reads: transactional read with read_uncommitted.")
@click.option("--exactly-once-stage",
              type=click.Choice(["pipeline", "transform", "at-least-once-consumer"]),
              default="pipeline", show_default=True,
              help="What delivers the exactly-once run: the Spark pipeline, or a Kafka "
                   "consume-transform-produce worker into an output topic read with "
                   "read_committed. at-least-once-consumer is --control duplicated.")
@click.option("--spark-master", default=None, metavar="standalone|spark://HOST:PORT",
              help="Run the exactly-once stage's Spark copy job on a cluster: standalone "
                   "starts a Spark standalone master and 2 workers for the run (in "
                   "--out/spark-cluster) and stops them at the end; spark://HOST:PORT uses "
                   "yours (oncelog installed on its workers). Needed by kill-executor "
                   "[default: local[2], no executors].")
@click.option("--abort-probability", type=float, default=0.2, show_default=True, metavar="P",
              help="Transactional: the chance that a producer aborts a transaction.")
@click.option("--isolation", type=click.Choice(["read_committed", "read_uncommitted"]),
              default="read_committed", show_default=True,
              help="Transactional: how the run is read. read_uncommitted is --control "
                   "aborted-reads.")
def verify(semantics, faults, duration_s, seed, bootstrap, command_config, brokers, sink_url,
           out_dir, rate, producers, partitions, drain_timeout_s, control, exactly_once_stage,
           spark_master, abort_probability, isolation) -> None:
    """Run producers, a broker and a consumer or the PySpark pipeline under seeded faults,
    then report what was lost, duplicated or reordered per semantics."""
    from rich.console import Console

    from ..client.security import ENVIRONMENT, SecurityConfigError, client_security

    from ..verify.report import print_report
    from ..verify.runner import Runner, RunFailed, preflight, write_outputs
    from ..verify.scenario import BadInput, Scenario
    from ..verify.schedule import random_seed

    seed = random_seed() if seed is None else seed
    try:
        security = client_security(command_config)
    except SecurityConfigError as error:
        raise BadInputFailure(str(error)) from None
    if command_config is not None:
        # every client of the run, in this process and its children, reads the file
        os.environ[ENVIRONMENT] = str(command_config)
    try:
        scenario = Scenario.build(
            semantics=semantics, faults=faults, duration_s=duration_s, seed=seed,
            out_dir=out_dir, bootstrap=bootstrap, brokers=brokers,
            sink=absolute_sqlite_url(sink_url), rate=rate,
            producers=producers, partitions=partitions, drain_timeout_s=drain_timeout_s,
            exactly_once_stage=exactly_once_stage, spark_master=spark_master,
            abort_probability=abort_probability,
            isolation=isolation, control=control,
            security_protocol=security.get("security.protocol", "PLAINTEXT"))
        schedule = preflight(scenario)
    except BadInput as error:
        raise BadInputFailure(str(error)) from None

    console = Console() if Console().is_terminal else Console(width=110)
    names = ", ".join(name.replace("_", "-") for name in scenario.semantics)
    where = (f"; {scenario.brokers} brokers, replication factor "
             f"{scenario.replication_factor}" if scenario.is_cluster else "")
    if scenario.on_spark_cluster:
        where += ("; Spark on a standalone cluster of 2 workers started for the run"
                  if scenario.spark_master == "standalone" else
                  f"; Spark on {scenario.spark_master}")
    console.print(f"[bold]oncelog verify[/]: {names}; {scenario.duration_s:g} s each; "
                  f"seed {seed}{where}; output in {out_dir}")
    if scenario.control:
        console.print(f"  negative control {scenario.control}: a deliberately broken "
                      "configuration; the checker must catch it", highlight=False)
    if len(schedule):
        console.print("  planned faults (what each one did is reported at the end):")
    for fault in schedule:
        console.print(f"  {fault.at_s:7.3f} s  {fault.name:<13} for "
                      f"{fault.params.get('duration_s', 0):g} s", highlight=False)
    if not len(schedule):
        console.print("  no faults requested: a plain run")
    try:
        outcome = Runner(scenario, schedule, console=console).run()
    except KeyboardInterrupt:
        click.echo(f"oncelog: interrupted; every process the run started was stopped "
                   f"(seed {seed}, output in {out_dir})", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except RunFailed as error:
        raise RunFailure(f"{error} (seed {seed})") from None
    except Exception as error:  # a bug: still one sentence, with where to look
        raise RunFailure(f"verify failed: {type(error).__name__}: {error} (seed {seed}; "
                         f"logs in {out_dir / 'logs'})") from None

    written = write_outputs(outcome)
    workload_s = {semantics: scenario.duration_s + run.get("schedule_delay_s", 0.0)
                  for semantics, run in outcome.runs.items()}
    print_report(outcome.results, console=console, seed=seed, schedule=schedule,
                 workload_s=workload_s)
    console.print(f"result {written['result']}, chart {written['chart']}, "
                  f"histories in {out_dir / 'history'}; took {outcome.wall_time_s:g} s",
                  highlight=False)
    if outcome.verdict == "broken":
        sys.exit(EXIT_BROKEN)
    if outcome.verdict == "inconclusive":
        raise InconclusiveFailure(f"inconclusive: the run proved nothing for "
                                  f"{', '.join(outcome.inconclusive)} (seed {seed})")
