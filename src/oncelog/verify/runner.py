"""Running a scenario: workload + nemesis, then the checker, one semantics after another.

``preflight(scenario)`` checks everything that can be checked before a process starts (the
schedule fits the duration, Spark and Java are there for the pipeline, ``--bootstrap``
answers, ``--out`` and every sink can be written) and raises ``BadInput`` with one
sentence. ``Runner.run()`` then, for each semantics, on a topic of its own:

1. starts the delivery stage (a consumer, or the Spark copy job) and waits until it is up;
2. starts the producers (through the fault proxy when ``drop-acks`` is scheduled) - the
   schedule's clock starts here - and plays the fault schedule while they run;
3. stops the producers (they flush), then *drains*: waits, at most ``drain_timeout_s``,
   until the sink has caught up with the log end of every partition;
4. stops the stage, scans the sink into ``Delivered`` records and checks the history.

The semantics run one after another (on two cores, a Spark JVM next to two other
workloads would turn CPU starvation into false alarms) against the same broker, each with
the same fault schedule.

**A Spark cluster** (``--spark-master``): ``standalone`` starts a ``StandaloneCluster`` of two
workers (one core each) in ``--out/spark-cluster`` before the first semantics and stops it
with everything else; ``spark://HOST:PORT`` is checked to answer before anything starts.
The copy job connects to it (``--master``) and prints, per batch, the tasks each executor
ran; the run records that in ``runs.exactly_once.spark`` and is *inconclusive* if no task ran
on an executor (the stage did not really run on the cluster). ``kill-executor``
(``faults.executor``) kills one of the copy job's executors mid-batch.

**A broker it did not start** (``--bootstrap``: an Apache Kafka, say): nothing is started or
stopped on the broker's side; each run's topics are created with the broker's own
``default.replication.factor`` (CreateTopics' -1, KIP-464), and everything else - groups,
transactions, offsets, the proxy's address rewriting - goes through the Kafka protocol as
any client's would. ``tests/fault/test_verify_apache_kafka.py`` runs every semantics so
against a real Apache Kafka.

**A cluster** (``--brokers N``, N >= 2): the run starts a ``LocalCluster`` - its own
ZooKeeper and N broker processes - with ``CLUSTER_SETTINGS``; each run's topic gets
replication factor min(3, N), ``min.insync.replicas=2`` and unclean election off, and the
run waits until every partition has a leader and a full ISR before the delivery stage
starts. The at-least-once and exactly-once producer presets already use ``acks=all``
(``client.producer``), so they need no change to mean it on a cluster; at-most-once keeps
``acks=0``. The workloads get the cluster's bootstrap list. Every process is started from
this thread and tracked in ``Children``; whatever happens (an error, Ctrl-C, SIGTERM)
``run()``'s ``finally`` stops them all before it returns or raises.

Output folder (``--out``)::

    result.json  chart.png  schedule.json
    history/<semantics>/producer-N.jsonl  faults.jsonl  sink.jsonl
    <semantics>/sink.db (unless --sink names a database)  [<semantics>/checkpoint/]
    logs/broker.log  logs/<semantics>-*.log
    broker/data/                 (one broker)
    cluster/zookeeper/  cluster/broker-N/data/  cluster/broker-N/broker.log   (--brokers N)
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from ..broker.process import BrokerProcess
from ..client.security import from_environment
from .checker import CheckResult, UnplannedExit, check
from .faults.partitions import CutLink, IsolateZooKeeper, PartitionLeader, SlowNet, Split
from .faults import (ClusterTarget, DropAcks, KillBroker, KillClusterBroker, KillDelivery,
                     KillExecutor, KillLeader, Nemesis, PauseBroker)
from .faults.nemesis import MAX_DELAY_S
from .history import History, HistoryWriter
from .processes import ChildProcess, Children
from .progress import HistoryTally, ProgressView, describe_event
from .proxy import ProxyGroup, ProxyThread
from .report import ChartUnavailable, results_document, write_chart
from .scenario import STANDALONE, BadInput, RunFailed, Scenario
from .schedule import FaultSchedule
from .workloads import producer as producer_worker
from .workloads import transform as transform_worker
from .workloads.delivery import ConsumerStage, PipelineStage, ReaderStage, TransformStage
from .workloads.sinks import (DeliveriesTable, PipelineTable, ReadTable, SinkUnavailable,
                              remove_sink_files, sqlite_url)

if TYPE_CHECKING:  # imported where a run needs them
    from ..cluster.local import LocalCluster
    from ..spark.standalone import StandaloneCluster

__all__ = ["RunFailed", "RunOutcome", "Runner", "preflight", "write_outputs"]

PRODUCER_FLUSH_S = 30.0
MAX_UNEXPECTED_RESTARTS = 5
CLUSTER_READY_TIMEOUT_S = 60.0
DEFAULT_REPLICATION = -1   # CreateTopics: the broker's default.replication.factor (KIP-464)

# A verify cluster's broker settings (on top of Scenario.broker_settings). The ZooKeeper
# session is short (Kafka's default is 18 s) so a killed or paused broker is noticed within
# a run of tens of seconds, and pause-broker's 2-9 s pauses sometimes outlast it; a follower
# that stops fetching leaves the ISR after 3 s, so acks=all writes go on without it.
SESSION_TIMEOUT_MS = 5000
CLUSTER_SETTINGS = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": "3000",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "offsets.topic.num.partitions": "3",   # fewer elections per kill on a 2-core machine
}
# The static consumers' session.timeout.ms (consumer, transform). On a cluster it must outlast
# the group coordinator's failover (the ZooKeeper session, an election, the group's reload)
# and a pause of the coordinator's broker: librdkafka times a session out by itself while no
# coordinator answers, drops its member id, and the commit it sends next without one is
# fenced with FENCED_INSTANCE_ID, a fatal error (librdkafka#3437; Kafka answers the same).
CONSUMER_SESSION_TIMEOUT_MS = 6000
CLUSTER_CONSUMER_SESSION_TIMEOUT_MS = 3 * SESSION_TIMEOUT_MS


def prose(semantics: str) -> str:
    return semantics.replace("_", "-")


# -- before anything runs -----------------------------------------------------------------

def preflight(scenario: Scenario) -> FaultSchedule:
    """Everything checkable before a process starts; ``BadInput`` with one sentence."""
    schedule = scenario.schedule()
    if scenario.uses_pipeline:
        _check_spark()
    if scenario.is_cluster:
        _check_zookeeper()
    if scenario.network_faults:
        _check_isolation(scenario.network_faults)
    if scenario.bootstrap is not None:
        _check_reachable(scenario.bootstrap)
    if scenario.on_spark_cluster and scenario.spark_master != STANDALONE:
        _check_spark_master(scenario)
    _prepare_out(scenario)
    return schedule


def _check_isolation(faults: list[str]) -> None:
    from ..cluster.isolation import missing_prerequisites
    missing = missing_prerequisites()
    if missing:
        raise BadInput(f"{' and '.join(faults)} cut a cluster the run starts in network "
                       f"namespaces, which needs {', '.join(missing)}")


def _check_spark() -> None:
    import importlib.util
    if importlib.util.find_spec("pyspark") is None:
        raise BadInput("exactly-once runs the PySpark pipeline, which needs the spark extra: "
                       "pip install 'oncelog[spark]' (or leave exactly-once out of --semantics)")
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and Path(java_home, "bin", "java").exists()):
        raise BadInput("exactly-once runs the PySpark pipeline, which needs Java 17 or later "
                       "on the PATH (or JAVA_HOME)")


def _check_spark_master(scenario: Scenario) -> None:
    """A user's ``spark://`` master answers; with ``kill-executor``, it is on this machine
    (the fault kills an executor's JVM by its pid, which a remote worker's is not)."""
    master = scenario.spark_master or ""  # checked only for a spark:// master
    addresses = [part.rpartition(":") for part in master[len("spark://"):].split(",")]
    for host, _, port in addresses:
        try:
            with socket.create_connection((host, int(port)), timeout=3.0):
                pass
        except OSError as error:
            reason = error.strerror or str(error) or type(error).__name__
            raise BadInput(f"cannot reach the Spark master at {host}:{port}: {reason}") from None
    if "kill-executor" in scenario.faults:
        remote = [host for host, _, _ in addresses if not _is_this_machine(host)]
        if remote:
            raise BadInput(f"kill-executor kills an executor's JVM by its pid, which works "
                           f"only when the Spark workers run on this machine, and "
                           f"{remote[0]} is another one; drop kill-executor or use "
                           "--spark-master standalone")


def _is_this_machine(host: str) -> bool:
    """Whether ``host`` resolves to an address of this machine (one we can bind to)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, _, _, _, address in infos:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((address[0], 0))
            return True
        except OSError:
            continue
    return False


def _check_zookeeper() -> None:
    from ..cluster.zookeeper_process import ZooKeeperNotInstalled, find_classpath, find_java
    try:
        find_java()
        find_classpath()
    except ZooKeeperNotInstalled as error:
        raise BadInput(f"--brokers starts a ZooKeeper, but {error}") from None


def _check_reachable(bootstrap: str, timeout_s: float = 3.0) -> None:
    from ..client.bootstrap import BrokerUnreachable, check_bootstrap
    try:  # over TLS when --command-config says so
        check_bootstrap(bootstrap, timeout_s, security=from_environment())
    except (ValueError, BrokerUnreachable) as error:
        raise BadInput(str(error)) from None
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap, **from_environment(),
                         "socket.timeout.ms": 5000, "logger": _quiet()})  # type: ignore[dict-item]
    try:
        admin.list_topics(timeout=5)
    except KafkaException as error:
        raise BadInput(f"{bootstrap} accepts connections but does not answer as a Kafka "
                       f"broker: {error.args[0].str()}") from None


def _prepare_out(scenario: Scenario) -> None:
    """Make ``--out`` (removing only what a previous run wrote) and open every sink."""
    out = scenario.out_dir
    if out.exists() and not out.is_dir():
        raise BadInput(f"cannot use --out {out}: it exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".oncelog-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        for name in ("result.json", "chart.png", "schedule.json"):
            (out / name).unlink(missing_ok=True)
        for folder in ("history", "logs", "broker", "cluster", "spark-cluster"):
            if (out / folder).is_dir():
                shutil.rmtree(out / folder)
    except OSError as error:
        raise BadInput(f"cannot write to --out {out}: {error.strerror or error}") from None
    for semantics in scenario.semantics:
        semantics_dir = out / prose(semantics)
        try:
            semantics_dir.mkdir(exist_ok=True)
            if (semantics_dir / "checkpoint").is_dir():
                shutil.rmtree(semantics_dir / "checkpoint")
            sink = _sink(scenario, semantics)
            if scenario.sink is None:
                assert sink.path is not None  # the default sink: a SQLite file
                remove_sink_files(sink.path)
            else:
                sink.drop()
            sink.create()
        except SinkUnavailable as error:
            raise BadInput(str(error)) from None
        except OSError as error:
            raise BadInput(f"cannot write to {folder}: {error.strerror or error}") from None


def _sink(scenario: Scenario, semantics: str) -> DeliveriesTable | PipelineTable:
    """The semantics' sink: its own SQLite file in ``--out``, or its own table in ``--sink``."""
    pipeline = semantics == "exactly_once" and scenario.exactly_once_stage == "pipeline"
    control = scenario.control_of(semantics)
    kind = PipelineTable if pipeline else DeliveriesTable
    if semantics == "transactional" or (semantics == "exactly_once"
                                        and scenario.exactly_once_stage == "transform"):
        kind = ReadTable
    if control is not None and control.anomaly == "reordered":
        kind = ReadTable  # the exactly-once reader, not the pipeline
    elif control is not None and control.anomaly in ("lost", "duplicated"):
        kind = DeliveriesTable  # a consumer
    if scenario.sink is None:
        return kind(sqlite_url(scenario.out_dir / prose(semantics) / "sink.db"))
    return kind(scenario.sink, f"oncelog_verify_{semantics}")


def _quiet() -> logging.Logger:
    quiet = logging.getLogger("oncelog.verify.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    return quiet


# -- the run ------------------------------------------------------------------------------

@dataclass
class RunOutcome:
    scenario: Scenario
    schedule: FaultSchedule
    results: list[CheckResult] = field(default_factory=list)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)   # per semantics: topic, ...
    wall_time_s: float = 0.0

    @property
    def verdict(self) -> str:
        """``broken`` if a semantics broke its contract, else ``inconclusive`` if one proved
        nothing (``CheckResult.verdict``), else ``kept``."""
        verdicts = {result.verdict for result in self.results}
        for verdict in ("broken", "inconclusive"):
            if verdict in verdicts:
                return verdict
        return "kept"

    @property
    def inconclusive(self) -> list[str]:
        """Semantics whose run proved nothing (see ``CheckResult.inconclusive_because``)."""
        return [prose(result.semantics) for result in self.results
                if result.verdict == "inconclusive"]


class Runner:
    def __init__(self, scenario: Scenario, schedule: FaultSchedule, *,
                 console: Console | None = None) -> None:
        self.scenario = scenario
        self.schedule = schedule
        self.console = console or Console()
        self.out = scenario.out_dir
        self.run_tag = f"s{scenario.seed}-{secrets.token_hex(3)}"
        self.children = Children()
        self.broker: BrokerProcess | None = None
        self.cluster: LocalCluster | None = None  # with --brokers 2 or more
        self.spark_cluster: StandaloneCluster | None = None  # --spark-master standalone
        self.spark_master: str | None = scenario.spark_master  # the URL the copy job gets
        self._proxies: list[ProxyThread | ProxyGroup] = []
        self.view: ProgressView | None = None

    def run(self) -> RunOutcome:
        outcome = RunOutcome(self.scenario, self.schedule)
        started = time.monotonic()
        previous_term = signal.signal(signal.SIGTERM, signal.default_int_handler)
        interrupted = False
        self.view = ProgressView(self.console)
        try:
            bootstrap = self._start_broker()
            self._start_spark_cluster()
            for semantics in self.scenario.semantics:
                result, run = self._run_semantics(semantics, bootstrap)
                outcome.results.append(result)
                outcome.runs[semantics] = run
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            self.view.close()
            # Stopping must not be interrupted half-way by a second Ctrl-C.
            previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                self._stop_everything(graceful=not interrupted)
            finally:
                signal.signal(signal.SIGINT, previous_int)
                signal.signal(signal.SIGTERM, previous_term)
        outcome.wall_time_s = round(time.monotonic() - started, 1)
        return outcome

    def _stop_everything(self, *, graceful: bool) -> None:
        for proxy in self._proxies:
            proxy.stop()
        self.children.stop_all(graceful=graceful)

    def _start_broker(self) -> str:
        if self.scenario.bootstrap is not None:
            return self.scenario.bootstrap
        if self.scenario.is_cluster:
            return self._start_cluster()
        self.broker = BrokerProcess(self.out / "broker" / "data",
                                    settings=self.scenario.broker_settings,
                                    log_path=self.out / "logs" / "broker.log")
        self.children.add_broker(self.broker)
        self.broker.log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.broker.start()
        except RuntimeError as error:
            raise RunFailed(f"the broker did not start: {error}") from None
        assert self.view is not None  # made by run()
        self.view.event(f"broker pid {self.broker.pid} on {self.broker.bootstrap}, "
                        f"log {self.broker.log_path}")
        return self.broker.bootstrap

    def _start_cluster(self) -> str:
        from ..cluster.local import LocalCluster
        scenario = self.scenario
        replication = str(scenario.replication_factor)
        settings = {**scenario.broker_settings, **CLUSTER_SETTINGS,
                    "default.replication.factor": replication,
                    "offsets.topic.replication.factor": replication}
        # network partitions: every broker and ZooKeeper node in a namespace of its own,
        # and three ZooKeeper nodes (a minority cut off must change nothing)
        isolated = bool(scenario.network_faults)
        cluster = self.cluster = LocalCluster(self.out / "cluster", scenario.brokers,
                                              settings=settings, isolated=isolated,
                                              zookeepers=3 if isolated else 1)
        self.children.add_cluster(cluster)  # before start: a half-started one is stopped
        try:
            cluster.start()
        except (RuntimeError, TimeoutError) as error:  # ZooKeeper's errors are RuntimeErrors
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise RunFailed(f"the cluster did not start: {first} (logs in "
                            f"{self.out / 'cluster'})") from None
        view = self.view
        assert cluster.ensemble is not None and view is not None  # started; made by run()
        for server_id, node in cluster.ensemble.nodes.items():
            view.event(f"ZooKeeper {server_id} pid {node.pid} on {node.connect_string}, "
                       f"session timeout {SESSION_TIMEOUT_MS} ms")
        if cluster.network is not None:
            view.event(f"isolated: every broker and ZooKeeper node in a network namespace of "
                       f"its own on bridge {cluster.network.bridge}")
        for node_id, broker in cluster.brokers.items():
            view.event(f"broker {node_id} pid {broker.pid} on {broker.bootstrap}, "
                       f"log {broker.log_path}")
        return cluster.bootstrap

    def _start_spark_cluster(self) -> None:
        if self.scenario.spark_master != STANDALONE:
            return
        from ..spark.standalone import SparkClusterError, StandaloneCluster
        spark = self.spark_cluster = StandaloneCluster(self.out / "spark-cluster", workers=2)
        self.children.add_spark_cluster(spark)  # stopped even half-started
        try:
            spark.start()
        except SparkClusterError as error:
            raise RunFailed(f"the Spark standalone cluster did not start: {error}") from None
        self.spark_master = spark.master_url
        workers = ", ".join(f"pid {worker.pid}" for worker in spark.workers)
        assert self.view is not None and spark.master is not None  # made by run(); started
        self.view.event(f"Spark master pid {spark.master.pid} on {self.spark_master} (UI "
                        f"{spark.master_ui}), workers {workers}; logs in {spark.directory}")

    def _run_semantics(self, semantics: str, bootstrap: str) -> tuple[CheckResult, dict]:
        return _SemanticsRun(self, semantics, bootstrap).execute()


class _SemanticsRun:
    """One semantics, start to verdict: its topic, delivery stage, producers, proxy and
    nemesis, and the notes that end up as the result's warnings."""

    def __init__(self, runner: Runner, semantics: str, bootstrap: str) -> None:
        self.runner = runner
        self.scenario = runner.scenario
        self.semantics = semantics
        self.name = prose(semantics)
        self.bootstrap = bootstrap
        assert runner.view is not None  # made by run() before any semantics runs
        self.view = runner.view
        self.topic = f"verify-{self.name}-{runner.run_tag}"
        self.history_dir = runner.out / "history" / self.name
        self.notes: list[str] = []
        self.details: dict[str, Any] = {"topic": self.topic, "history": str(self.history_dir)}
        self.unplanned_exits: list[UnplannedExit] = []
        self.noted_producers: set[str] = set()
        self.tally = HistoryTally([self.history_dir / f"producer-{index}.jsonl"
                                   for index in range(self.scenario.producers)])
        self.delivered = 0
        self.counted_at = 0.0
        self.nemesis: Nemesis | None = None
        self.t0 = time.monotonic()
        self.target: ClusterTarget | None = None
        if runner.cluster is not None:
            self.target = ClusterTarget(runner.cluster, self.topic, self.scenario.partitions,
                                        seed=self.scenario.seed,
                                        session_timeout_ms=SESSION_TIMEOUT_MS)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def execute(self) -> tuple[CheckResult, dict]:
        scenario, runner = self.scenario, self.runner
        self._create_topic()
        self.history_dir.mkdir(parents=True, exist_ok=True)
        proxy = None
        if "drop-acks" in scenario.faults:
            # a cluster: a proxy per broker, so clients still follow leaders (proxy.py)
            if self.target is not None:
                proxy = ProxyGroup(self.bootstrap.split(",")).start()
            elif scenario.bootstrap is not None:
                # a broker it did not start may be a cluster: a proxy per broker it names
                proxy = ProxyGroup(_advertised_brokers(self.bootstrap)).start()
            else:
                proxy = ProxyThread(self.bootstrap).start()
            runner._proxies.append(proxy)
        self.stage = stage = self._stage()
        self.details.update(stage=stage.description, stage_log=str(stage.log_path))

        self.view.begin(self.name, scenario.duration_s)
        self._start_stage()

        producers = self._producers(proxy.bootstrap if proxy else self.bootstrap)
        with HistoryWriter(self.history_dir / "faults.jsonl") as faults_history:
            self.nemesis = Nemesis(
                runner.schedule, self._faults(proxy), faults_history,
                on_event=lambda event: self.view.event(describe_event(self.name, event)))
            for child in producers:
                child.start()
            self.t0 = time.monotonic()  # the schedule's clock
            self._workload(producers)
        self._stop_producers(producers)
        self.details["drain_s"] = self._drain()
        stage.stop()
        unproved = self._spark_evidence(stage)
        if proxy is not None:
            self.details["proxy_dropped_responses"] = proxy.stats.dropped_responses
            if isinstance(proxy, ProxyGroup):  # which brokers it stood in front of
                self.details["proxy_dropped_by_broker"] = {
                    f"{one.proxy.upstream_host}:{one.proxy.upstream_port}":
                        one.stats.dropped_responses for one in proxy.proxies}
            proxy.stop()
            runner._proxies.remove(proxy)

        with HistoryWriter(self.history_dir / "sink.jsonl") as sink_history:
            self.details["sink_rows"] = stage.sink.scan(sink_history)
        self.details["sink"] = stage.sink.display
        control = scenario.control_of(self.semantics)
        result = check(History.load(self.history_dir), self.semantics,
                       planned=runner.schedule.faults,
                       control=control.anomaly if control else None)
        result.run_inconclusive_because = unproved
        result.unplanned_exits = list(self.unplanned_exits)
        result.warnings.extend(self.notes)
        self.counted_at = 0.0
        self._show("checked")
        verdict = {"kept": "contract kept", "broken": "contract [bold red]BROKEN[/]",
                   "inconclusive": "[yellow]inconclusive[/]"}[result.verdict]
        landed = len(result.faults_landed)
        self.view.event(f"{self.name}: checked, {verdict} ({landed} of "
                        f"{len(result.fault_outcomes or ())} faults landed)")
        return result, self.details

    def _spark_evidence(self, stage) -> str | None:
        """On a Spark cluster: record where the copy job's tasks ran (``details["spark"]``);
        the reason the run proved nothing if none ran on an executor."""
        if not isinstance(stage, PipelineStage) or not self.scenario.on_spark_cluster:
            return None
        evidence = stage.executor_evidence()
        self.details["spark"] = {"master": self.runner.spark_master, **evidence}
        if evidence["tasks_on_executors"]:
            return None
        return (f"--spark-master {self.scenario.spark_master} was given, but no task of the "
                f"copy job ran on an executor (see {stage.log_path})")

    def _create_topic(self) -> None:
        scenario = self.scenario
        topics = [self.topic]
        if self.semantics == "exactly_once" and scenario.exactly_once_stage == "transform":
            topics.append(transform_worker.output_topic(self.topic))
        if self.target is None and scenario.bootstrap is not None:
            # A broker the run did not start keeps its own durability settings: its
            # default.replication.factor (and min.insync.replicas), not a replica of one.
            for topic in topics:
                _create_topic(self.bootstrap, topic, scenario.partitions, DEFAULT_REPLICATION)
            self.details["replication_factor"] = _replication_factor(self.bootstrap, self.topic)
            return
        if self.target is None:
            for topic in topics:
                _create_topic(self.bootstrap, topic, scenario.partitions)
            return
        replication = scenario.replication_factor
        config = {"min.insync.replicas": str(min(2, replication)),
                  "unclean.leader.election.enable": "false"}
        for topic in topics:
            _create_topic(self.bootstrap, topic, scenario.partitions, replication, config)
        self.details.update(brokers=scenario.brokers, replication_factor=replication, **config)
        deadline = time.monotonic() + CLUSTER_READY_TIMEOUT_S
        while not self.target.recovered():
            if time.monotonic() > deadline:
                raise RunFailed(f"topic {self.topic} had no leader with a full ISR on every "
                                f"partition within {CLUSTER_READY_TIMEOUT_S:g} s")
            time.sleep(0.2)

    def _start_stage(self) -> None:
        stage = self.stage
        stage.start()
        deadline = time.monotonic() + stage.ready_timeout_s
        while not stage.wait_ready(timeout_s=0.5):
            if not stage.alive:
                raise RunFailed(f"the {stage.description} exited with status "
                                f"{stage.child.returncode} while starting; see {stage.log_path}")
            if time.monotonic() > deadline:
                raise RunFailed(f"the {stage.description} did not start within "
                                f"{stage.ready_timeout_s:g} s; see {stage.log_path}")
            self._show("starting")

    def _workload(self, producers: list[ChildProcess]) -> None:
        """Play the schedule while the producers run; heal whatever is open at the end."""
        nemesis = self.nemesis
        assert nemesis is not None  # made by execute()
        try:
            # the schedule may shift later while a target recovers (see faults.nemesis)
            while self.elapsed() < self.scenario.duration_s + nemesis.delay_s:
                nemesis.run_due(self.elapsed)
                self._watch(producers)
                self._show("running")
                end = self.scenario.duration_s + nemesis.delay_s
                next_at = nemesis.next_at_s if nemesis.next_at_s is not None else end
                time.sleep(max(0.0, min(0.25, next_at - self.elapsed(), end - self.elapsed())))
        finally:
            nemesis.heal_all(self.elapsed())
        self.details["schedule_delay_s"] = round(nemesis.delay_s, 1)

    def _stage(self):
        sink = _sink(self.scenario, self.semantics)
        logs = self.runner.out / "logs"
        session_timeout_ms = (CLUSTER_CONSUMER_SESSION_TIMEOUT_MS if self.scenario.brokers > 1
                              else CONSUMER_SESSION_TIMEOUT_MS)
        if isinstance(sink, PipelineTable):
            return PipelineStage(bootstrap=self.bootstrap, topic=self.topic, sink=sink,
                                 checkpoint=self.runner.out / self.name / "checkpoint",
                                 log_path=logs / f"{self.name}-copy-job.log",
                                 children=self.runner.children,
                                 max_offsets_per_trigger=max(1000, int(5 * self.scenario.rate)),
                                 master=self.runner.spark_master)
        control = self.scenario.control_of(self.semantics)
        if control is not None:
            self.notes.append(f"deliberately misconfigured (--control {self.scenario.control}, a "
                              f"negative control: {control.anomaly.replace('_', ' ')} records "
                              f"must show): {control.broken}")
        if control is not None and control.anomaly == "reordered":
            return ReaderStage(bootstrap=self.bootstrap, topic=self.topic,
                               partitions=self.scenario.partitions, isolation="read_committed",
                               sink=sink, log_path=logs / f"{self.name}-reader.log",
                               children=self.runner.children)
        if control is not None and control.anomaly == "lost":
            return ConsumerStage("at_most_once", bootstrap=self.bootstrap, topic=self.topic,
                                 sink=sink, log_path=logs / f"{self.name}-consumer.log",
                                 children=self.runner.children,
                                 session_timeout_ms=session_timeout_ms)
        if isinstance(sink, ReadTable) and self.semantics == "exactly_once":
            return TransformStage(bootstrap=self.bootstrap, topic=self.topic,
                                  partitions=self.scenario.partitions, sink=sink, log_dir=logs,
                                  name=self.name, children=self.runner.children,
                                  session_timeout_ms=session_timeout_ms)
        if isinstance(sink, ReadTable):
            isolation = self.scenario.isolation
            return ReaderStage(bootstrap=self.bootstrap, topic=self.topic,
                               partitions=self.scenario.partitions, isolation=isolation,
                               sink=sink, log_path=logs / f"{self.name}-reader.log",
                               children=self.runner.children)
        guarantee = self.semantics
        if self.semantics == "exactly_once":  # --control duplicated
            guarantee = "at_least_once"
        return ConsumerStage(guarantee, bootstrap=self.bootstrap, topic=self.topic, sink=sink,
                             log_path=logs / f"{self.name}-consumer.log",
                             children=self.runner.children,
                             session_timeout_ms=session_timeout_ms)

    def _faults(self, proxy: ProxyThread | ProxyGroup | None) -> dict:
        stage = self.stage
        faults: dict[str, Any] = {}
        if self.runner.broker is not None:
            faults["kill-broker"] = KillBroker(self.runner.broker)
        if self.target is not None:
            faults["kill-broker"] = KillClusterBroker(self.target)
            faults["kill-leader"] = KillLeader(self.target)
            faults["pause-broker"] = PauseBroker(self.target)
            if self.runner.cluster is not None and self.runner.cluster.network is not None:
                for fault in (PartitionLeader, IsolateZooKeeper, Split, CutLink, SlowNet):
                    faults[fault.name] = fault(self.target)
        if proxy is not None:
            control = self.scenario.control_of(self.semantics)
            silent = control is not None and control.anomaly == "reordered"  # see CONTROLS
            faults["drop-acks"] = DropAcks(proxy, mode="request" if silent else None, note=(
                "acks=0: the broker sends no acknowledgements to drop"
                if self.semantics == "at_most_once" else None))
        if isinstance(stage, PipelineStage) and self.scenario.on_spark_cluster:
            faults["kill-executor"] = KillExecutor(stage, seed=self.scenario.seed)
        if isinstance(stage, PipelineStage):
            faults["kill-driver"] = KillDelivery("kill-driver", stage, timed=True)
            faults["kill-consumer"] = KillDelivery(
                "kill-consumer", stage, timed=False,
                note="the copy job is this stage's consumer: kill -9 at a random moment")
        elif isinstance(stage, TransformStage):
            faults["kill-consumer"] = KillDelivery("kill-consumer", stage, timed=True)
            faults["kill-driver"] = KillDelivery(
                "kill-driver", stage.reader, timed=False,
                note="no Spark driver in this stage: kill -9 of the output topic's "
                     "read_committed reader instead")
        else:
            faults["kill-consumer"] = KillDelivery("kill-consumer", stage, timed=True)
            faults["kill-driver"] = KillDelivery(
                "kill-driver", stage, timed=False,
                note="no Spark driver in this stage: kill -9 of the consumer instead")
        return faults

    def _producers(self, bootstrap: str) -> list[ChildProcess]:
        scenario, runner = self.scenario, self.runner
        producers = []
        for index in range(scenario.producers):
            argv = producer_worker.command(
                bootstrap=bootstrap, topic=self.topic,
                semantics=scenario.producer_preset(self.semantics),
                producer=f"p{index}", history=str(self.history_dir / f"producer-{index}.jsonl"),
                rate=scenario.rate / scenario.producers,
                # only a bound: the runner stops it when the (maybe shifted) schedule is done
                duration_s=scenario.duration_s + MAX_DELAY_S * len(runner.schedule) + 120,
                partitions=scenario.partitions, flush_timeout_s=PRODUCER_FLUSH_S,
                seed=scenario.seed, abort_probability=scenario.abort_probability,
                socket_timeout_ms=scenario.producer_socket_timeout_ms(self.semantics))
            producers.append(runner.children.add(ChildProcess(
                f"producer p{index}", argv,
                runner.out / "logs" / f"{self.name}-producer-{index}.log", watch=True)))
        return producers

    def _watch(self, producers: list[ChildProcess]) -> None:
        """A stage that died without a fault is recorded as an unplanned exit (a finding of
        the result, with the first line of its error) and restarted, so the run completes;
        a producer that failed is noted (not restarted: its history stands)."""
        stage = self.stage
        status = stage.exited_unexpectedly()
        if status is not None:
            description, log_path = stage.exited_process()
            ended = UnplannedExit(process=description, status=status,
                                  at_s=round(self.elapsed(), 1), error=stage.exit_error(),
                                  log=str(log_path))
            self.unplanned_exits.append(ended)
            said = (f"the {description} exited unplanned with status {status} at "
                    f"{ended.at_s:g} s: {ended.error or 'no error line'} (see {log_path})")
            if len(self.unplanned_exits) > MAX_UNEXPECTED_RESTARTS:
                raise RunFailed(f"{said}, {len(self.unplanned_exits)} times; giving up")
            self.view.event(f"[bold red]![/bold red] {self.name}: {escape(said)}; restarting it")
            stage.restart()
        for child in producers:
            code = child.returncode
            if code not in (None, 0) and child.name not in self.noted_producers:
                self.noted_producers.add(child.name)
                self.notes.append(f"{child.name} exited with status {code} at "
                                  f"{self.elapsed():.1f} s (see {child.log_path})")

    def _stop_producers(self, producers: list[ChildProcess]) -> None:
        for child in producers:
            child.signal(signal.SIGTERM)
        deadline = time.monotonic() + PRODUCER_FLUSH_S + 15
        while any(child.alive for child in producers) and time.monotonic() < deadline:
            self._show("flushing")
            time.sleep(0.25)
        for child in producers:
            if child.alive:
                self.notes.append(f"{child.name} did not finish flushing; killed")
                child.kill()
        self._watch(producers)

    def _drain(self) -> float:
        """Wait until the sink has caught up with the log end of every partition."""
        ends = _log_end_offsets(self.bootstrap, self.topic, self.scenario.partitions)
        timeout_s = self.scenario.drain_timeout_s
        started = time.monotonic()
        while True:
            self._watch([])
            try:
                behind = self.stage.behind(ends)
            except SinkUnavailable:  # busy: look again in a moment
                behind = sum(ends.values())
            self._show("draining")
            if behind == 0:
                return round(time.monotonic() - started, 1)
            if time.monotonic() - started > timeout_s:
                self.notes.append(f"the sink had not caught up with the log after {timeout_s:g} "
                                  f"s of draining: {behind} offsets behind (see "
                                  f"{self.stage.log_path})")
                return round(time.monotonic() - started, 1)
            time.sleep(0.5)

    def _show(self, phase: str) -> None:
        counts = self.tally.update()
        if time.monotonic() - self.counted_at >= 1.0:  # spare the sink's writer
            self.counted_at = time.monotonic()
            try:
                self.delivered = self.stage.sink.count()
            except SinkUnavailable:  # busy: show the next count later
                pass
        elapsed = 0.0 if phase == "starting" else self.elapsed()
        total = self.scenario.duration_s + (self.nemesis.delay_s if self.nemesis else 0.0)
        self.view.update(phase=phase, elapsed_s=min(elapsed, total), total_s=total,
                         produced=counts["produced"], acknowledged=counts["acknowledged"],
                         delivered=self.delivered,
                         faults_done=self.nemesis.injected if self.nemesis else 0,
                         faults_total=len(self.runner.schedule))


def _create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1,
                  config: dict[str, str] | None = None) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap, **from_environment(), "logger": _quiet()})  # type: ignore[dict-item]
    try:
        admin.create_topics([NewTopic(topic, partitions, replication_factor,
                                      config=config or {})])[topic].result(30)
    except KafkaException as error:
        raise RunFailed(f"cannot create topic {topic}: {error.args[0].str()}") from None


def _advertised_brokers(bootstrap: str) -> list[str]:
    """Every broker's HOST:PORT as the cluster advertises it in Metadata (what the fault
    proxies must rewrite); one proxy in front of a cluster's first broker would send every
    request there, to partitions it does not lead."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap, **from_environment(), "logger": _quiet()})  # type: ignore[dict-item]
    try:
        brokers = admin.list_topics(timeout=15).brokers
    except KafkaException as error:
        raise RunFailed(f"cannot read the brokers of {bootstrap}: {error.args[0].str()}") \
            from None
    return [f"{broker.host}:{broker.port}" for _, broker in sorted(brokers.items())]


def _replication_factor(bootstrap: str, topic: str) -> int | None:
    """How many replicas the broker gave ``topic``'s first partition (None: not seen)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap, **from_environment(), "logger": _quiet()})  # type: ignore[dict-item]
    try:
        metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
    except KafkaException:
        return None
    if metadata is None or 0 not in metadata.partitions:
        return None
    return len(metadata.partitions[0].replicas)


def _log_end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, **from_environment(),
                         "group.id": "oncelog-verify-ends", "enable.auto.commit": False,
                         "logger": _quiet()})
    try:
        return {partition: consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=15)[1]
                for partition in range(partitions)}
    except KafkaException as error:
        raise RunFailed(f"cannot read the log end offsets of {topic}: "
                        f"{error.args[0].str()}") from None
    finally:
        consumer.close()


# -- results ------------------------------------------------------------------------------

def write_outputs(outcome: RunOutcome) -> dict[str, Path | str]:
    """result.json (with the scenario and per-run details), schedule.json, chart.png."""
    import json
    out = outcome.scenario.out_dir
    document = results_document(outcome.results, outcome.schedule, outcome.scenario.seed)
    document["scenario"] = outcome.scenario.to_dict()
    document["runs"] = dict(outcome.runs)  # keyed like "results": at_least_once, ...
    document["wall_time_s"] = outcome.wall_time_s
    document["verdict"] = outcome.verdict
    written: dict[str, Path | str] = {}
    result_path = written["result"] = out / "result.json"
    result_path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    schedule_path = written["schedule"] = out / "schedule.json"
    schedule_path.write_text(outcome.schedule.to_json() + "\n")
    try:
        written["chart"] = write_chart(outcome.results, out / "chart.png",
                                       seed=outcome.scenario.seed)
    except ChartUnavailable as error:
        written["chart"] = f"not written: {error}"
    return written
