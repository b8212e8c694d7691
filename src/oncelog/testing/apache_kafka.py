"""A real Apache Kafka for a user's tests, next to oncelog's own broker.

``with apache_kafka() as k:`` starts Apache Kafka (KRaft, every node a combined broker and
controller) from its own jars on free loopback ports in a temporary folder, puts a
``WireProxy`` in front of each broker and gives ``k.bootstrap`` - the proxies' addresses - so
the kit's wire faults (``k.fail_next(...)`` and the rest, as on ``Broker``), ``read_all`` and
``assert_delivered`` work in front of Apache Kafka as they do in front of oncelog.
``apache_kafka(brokers=3)`` is three nodes forming one controller quorum, with replication
factor 3 for new and internal topics (``min.insync.replicas`` 2); one node has all of them 1.

The jars: ``org.apache.kafka:kafka_2.13`` at ``KAFKA_VERSION`` and what it needs at run time
(plus log4j2's binding for the slf4j API Kafka logs through), fetched once by Maven from Maven
Central - a generated pom and ``mvn dependency:copy-dependencies`` - into a per-user cache,
``$XDG_CACHE_HOME/oncelog/apache-kafka/<version>/`` (``~/.cache`` without it). Two test
workers fetching at once are safe: the fetch holds a file lock, Maven writes into a
temporary folder beside the cache, and the folder is renamed into place when complete, so a
cache folder that exists is whole. ``make setup`` fetches it ahead (``python -m
oncelog.testing.fetch_apache_kafka``), so tests never download.

Start-up: ``kafka.tools.StorageTool format`` (a random cluster id, the static quorum of all
nodes in ``controller.quorum.voters``), then ``java -cp <jars> kafka.Kafka server.properties``
per node; ready when an AdminClient sees every broker. Small heap and the client compiler
(``JVM_OPTIONS``) for a quick start: a node answers in a few seconds. Kafka logs through
log4j2 to ``server.log`` in each node's folder (``k.log_path``: node 1's;
``k.nodes[n].log_path``), never to the terminal; the JVM's own output goes to ``stdout.log``
beside it.

Stopping: every JVM runs in a process group of its own, is tied to the starting process
(killed if it dies, ``served_process.tied_to_this_process``) and recorded by pid with the
kit's other processes (killed at interpreter exit if nothing stopped it); ``close()`` sends
SIGTERM to every node's group, SIGKILL to any still running after ``STOP_TIMEOUT_S``, and
removes the folder it made. Process faults: ``kill(node_id)`` (SIGKILL),
``restart(node_id)`` (same ports and data), ``pause(node_id)``/``resume(node_id)``
(SIGSTOP/SIGCONT).

Without Java 17+ (``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``), or without Maven when
the jars are not cached yet, ``start()`` raises ``KafkaUnavailable`` with one line saying
what to install; the pytest fixtures fail with that line (they do not skip).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..served_process import free_port, tied_to_this_process
from .broker import _track, _untrack, _WireFaultMethods, unique_name, wait_until_in_sync

if TYPE_CHECKING:
    from .wire import WireProxy

__all__ = ["ApacheKafka", "KAFKA_SCRIPT_JVM_OPTIONS", "KAFKA_VERSION", "KafkaUnavailable",
           "apache_kafka", "kafka_jars"]

# The one place the version is pinned. 4.1.1: the newest 4.x patch release of a line that has
# had one (4.2+ are newer than the clients oncelog tests with), and it runs on Java 17, the
# JDK setup installs (Kafka 4 brokers need 17+).
KAFKA_VERSION = "4.1.1"
SCALA_VERSION = "2.13"
# Kafka's distribution ships log4j2's binding for the slf4j 1.7 API its code logs through;
# the kafka_2.13 pom does not name it, so the cache adds it (the version Kafka 4.1 ships).
LOG4J_VERSION = "2.24.3"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

INSTALL_HINT = ("oncelog: Apache Kafka needs Java 17+ and Maven (on Debian/Ubuntu: "
                "`sudo apt-get install openjdk-17-jre-headless maven`, or `make setup`)")

# A small heap and C1 only: a test broker starts in seconds and never holds much.
JVM_OPTIONS = ["-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-XX:-UsePerfData", "-Djava.awt.headless=true"]
# What Apache Kafka's own kafka-server-start.sh / kafka-run-class.sh give a broker: a 1 GiB
# heap, G1 and the full JIT. For measuring Kafka (benchmarks/), not for starting it quickly.
KAFKA_SCRIPT_JVM_OPTIONS = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC",
                            "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                            "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
                            "-Djava.awt.headless=true"]
STOP_TIMEOUT_S = 15.0
# A port free_port() found free can be taken before Kafka binds it: start again on new ports.
BIND_ATTEMPTS = 3

# Quick to use in tests, as oncelog's FAST_SETTINGS: no rebalance wait, one-partition
# internal topics (Kafka's 50 partitions of __consumer_offsets take seconds to create); short
# broker sessions, as the kit's oncelog cluster has: a node back from kill -9 registers again
# only once the controller has fenced its previous incarnation (9 s by default).
FAST_SETTINGS = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "2000",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "num.partitions": "1",
}

LOG4J2_PROPERTIES = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
"""


class KafkaUnavailable(RuntimeError):
    """Java or Maven is missing, or the jars could not be fetched: one line saying why."""


# -- the jars ----------------------------------------------------------------------------------

def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "oncelog" / "apache-kafka"


def kafka_jars(version: str = KAFKA_VERSION) -> list[Path]:
    """The class path of Apache Kafka ``version``, from the cache; fetched with Maven first
    if the cache does not hold it yet."""
    jars = cache_root() / version / "jars"
    if not jars.is_dir():
        _fetch(version)
    return sorted(jars.glob("*.jar"))


def _fetch(version: str) -> None:
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second worker waits here, then finds it done
        final = root / version
        if (final / "jars").is_dir():
            return
        mvn = shutil.which("mvn")
        if mvn is None:
            raise KafkaUnavailable(f"{INSTALL_HINT}: `mvn` is not on PATH, and the jars of "
                                   f"Apache Kafka {version} are not in {root} yet")
        java_command()  # Maven runs on Java too: say that first if it is missing
        staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=root))
        try:
            (staging / "pom.xml").write_text(_pom(version))
            log_path = staging / "mvn.log"
            with open(log_path, "wb") as log:
                completed = subprocess.run(
                    [mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(staging / "pom.xml"),
                     f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
                     f"-DoutputDirectory={staging / 'jars'}"],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env={**os.environ, "JAVA_HOME": str(Path(java_command()).parents[1])})
            if completed.returncode != 0 or not any((staging / "jars").glob("kafka_*.jar")):
                raise KafkaUnavailable(
                    f"oncelog: Maven could not fetch Apache Kafka {version}: "
                    f"{_last_error(log_path.read_text(errors='replace'))}")
            os.rename(staging, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _pom(version: str) -> str:
    def dependency(group: str, artifact: str, dependency_version: str) -> str:
        return (f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
                f"<version>{dependency_version}</version></dependency>")
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>oncelog.testing</groupId>
  <artifactId>apache-kafka-jars</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>
    {dependency("org.apache.kafka", f"kafka_{SCALA_VERSION}", version)}
    {dependency("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION)}
  </dependencies>
</project>
"""


def _last_error(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("[ERROR]")]
    return (errors or lines or ["mvn exited without a word"])[0][:300]


def java_command() -> str:
    """The ``java`` to run: ``$JAVA_HOME/bin/java`` when JAVA_HOME is set (as Kafka's own
    scripts choose), else ``java`` on PATH; checked to be Java 17 or newer."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java: str | None = str(Path(java_home) / "bin" / "java")
        where = f"JAVA_HOME={java_home} has no bin/java"
    else:
        java = shutil.which("java")
        where = "`java` is not on PATH"
    if java is None or not os.access(java, os.X_OK):
        raise KafkaUnavailable(f"{INSTALL_HINT}: {where}")
    try:
        output = subprocess.run([java, "-version"], capture_output=True, text=True,
                                timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired) as error:
        raise KafkaUnavailable(f"{INSTALL_HINT}: {java} -version failed ({error})") from None
    found = re.search(r'version "(\d+)', output)
    if found is None or int(found.group(1)) < 17:
        shown = output.splitlines()[0] if output else "no version"
        raise KafkaUnavailable(f"{INSTALL_HINT}: {java} is {shown}")
    return str(Path(java).resolve())


# -- nodes -------------------------------------------------------------------------------------

class KafkaNode:
    """One combined broker+controller JVM: its folder, ports and process."""

    def __init__(self, node_id: int, directory: Path,
                 jvm_options: list[str] | None = None) -> None:
        self.node_id = node_id
        self.directory = directory
        self.jvm_options = JVM_OPTIONS if jvm_options is None else jvm_options
        self.port = free_port()
        self.controller_port = free_port()
        self.process: subprocess.Popen | None = None
        self.paused = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def java(self, java: str, classpath: str, main: list[str],
             output: Path) -> subprocess.Popen:
        with open(output, "ab") as log:
            return subprocess.Popen(
                tied_to_this_process([java, *self.jvm_options,
                                      f"-Dlog4j2.configurationFile={self.directory}/log4j2"
                                      ".properties",
                                      f"-Dkafka.logs.dir={self.directory}",
                                      "-cp", classpath, *main]),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.directory, start_new_session=True)

    def signal_group(self, signum: int) -> None:
        if self.is_running() and self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signum)

    def kill_at_exit(self) -> None:
        """Interpreter exit with the node still running: its process group, by SIGKILL."""
        self.signal_group(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()


class ApacheKafka(_WireFaultMethods):
    def __init__(self, directory: Path | None = None, brokers: int = 1, *,
                 settings: dict[str, str] | None = None, wire_faults: bool = True,
                 version: str = KAFKA_VERSION, jvm_options: list[str] | None = None) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be 1 or more, not {brokers}")
        self._own_dir = directory is None
        self.directory = Path(directory) if directory else Path(tempfile.mkdtemp(
            prefix="oncelog-apache-kafka-"))
        self.version = version
        self.jvm_options = jvm_options  # None: JVM_OPTIONS, a quick start
        self.nodes = {n: KafkaNode(n, self.directory / f"node-{n}", jvm_options)
                      for n in range(1, brokers + 1)}
        replication_factor = min(3, brokers)
        self.settings = {
            **FAST_SETTINGS,
            "default.replication.factor": str(replication_factor),
            "offsets.topic.replication.factor": str(replication_factor),
            "transaction.state.log.replication.factor": str(replication_factor),
            "transaction.state.log.min.isr": str(max(1, replication_factor - 1)),
            "share.coordinator.state.topic.replication.factor": str(replication_factor),
            "share.coordinator.state.topic.min.isr": str(max(1, replication_factor - 1)),
            "min.insync.replicas": str(max(1, replication_factor - 1)),
            **(settings or {}),
        }
        from .wire import WireFaults
        self.faults = WireFaults()
        self._wire_faults = wire_faults
        self._addresses: dict[tuple[str, int], tuple[str, int]] = {}
        self.proxies: dict[int, WireProxy] = {}
        self._java = ""
        self._classpath = ""
        self._admin = None

    # -- addresses ---------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Where clients connect: the fault proxies (or the brokers without ``wire_faults``)."""
        if self.proxies:
            return ",".join(proxy.bootstrap for proxy in self.proxies.values())
        return self.direct_bootstrap

    @property
    def direct_bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes.values())

    @property
    def node_ids(self) -> list[int]:
        return sorted(self.nodes)

    @property
    def pid(self) -> int | None:
        """The first node's pid (a single-node Kafka's only one)."""
        return self.nodes[1].pid

    def pids(self) -> list[int]:
        return [node.pid for node in self.nodes.values() if node.pid is not None]

    @property
    def log_path(self) -> Path:
        """Node 1's ``server.log`` (``nodes[n].log_path`` for node n's)."""
        return self.nodes[1].log_path

    def is_running(self, node_id: int = 1) -> bool:
        return self.nodes[node_id].is_running()

    # -- life cycle --------------------------------------------------------------------------

    def start(self, timeout_s: float = 90.0) -> ApacheKafka:
        try:
            self._java = java_command()
            self._classpath = ":".join(map(str, kafka_jars(self.version)))
            for attempt in range(1, BIND_ATTEMPTS + 1):
                try:
                    self._format()
                    for node in self.nodes.values():
                        self._start_node(node)
                    self.wait_for_brokers(self.node_ids, timeout_s)
                    break
                except KafkaUnavailable:
                    if attempt == BIND_ATTEMPTS or not self._lost_a_port():
                        raise
                    self._start_over()
            if self._wire_faults:
                self._start_proxies()
        except BaseException:
            self.close()
            raise
        return self

    def _lost_a_port(self) -> bool:
        """Whether a node failed because another process took a port ``free_port()`` gave
        it, between the two (another test worker starting a server)."""
        for node in self.nodes.values():
            with contextlib.suppress(OSError):
                if "Address already in use" in node.log_path.read_text(errors="replace"):
                    return True
        return False

    def _start_over(self) -> None:
        """Every node stopped and forgotten, new folders and ports for another attempt."""
        for node in self.nodes.values():
            node.signal_group(signal.SIGKILL)
            if node.process is not None:
                node.process.wait()
            _untrack(node.pid)
            shutil.rmtree(node.directory, ignore_errors=True)
        self.nodes = {n: KafkaNode(n, self.directory / f"node-{n}", self.jvm_options)
                      for n in self.nodes}

    def _configure(self, node: KafkaNode) -> Path:
        node.directory.mkdir(parents=True, exist_ok=True)
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}"
                          for n in self.nodes.values())
        properties = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                         f"CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.directory / "data"),
            **self.settings,
        }
        config = node.directory / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        (node.directory / "log4j2.properties").write_text(
            LOG4J2_PROPERTIES.format(log=node.log_path))
        return config

    def _format(self) -> None:
        """``kafka-storage format`` on every node at once, one cluster id for all."""
        cluster_id = _cluster_id()
        formats = []
        for node in self.nodes.values():
            config = self._configure(node)
            formats.append((node, node.java(
                self._java, self._classpath,
                ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)],
                node.directory / "format.log")))
        for node, process in formats:
            try:
                status = process.wait(120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                status = -9
            if status != 0:
                raise KafkaUnavailable(
                    f"oncelog: formatting Apache Kafka node {node.node_id}'s storage failed "
                    f"(exit {status}): {_tail(node.directory / 'format.log')}")

    def _start_node(self, node: KafkaNode) -> None:
        self._admin = None
        node.process = node.java(self._java, self._classpath,
                                 ["kafka.Kafka", str(node.directory / "server.properties")],
                                 node.directory / "stdout.log")
        _track(node)

    def wait_for_brokers(self, node_ids: list[int], timeout_s: float = 60.0) -> None:
        """Until every node of ``node_ids`` is listed in Metadata; KafkaUnavailable with
        its log's tail if one exited, TimeoutError after ``timeout_s``."""
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": self.direct_bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout_s
        while True:
            for node_id in node_ids:
                node = self.nodes[node_id]
                if not node.is_running():
                    raise KafkaUnavailable(
                        f"oncelog: Apache Kafka node {node_id} exited with "
                        f"{node.process.returncode if node.process else '?'} while starting: "
                        f"{_tail(node.log_path, node.directory / 'stdout.log')}")
            try:
                brokers = admin.list_topics(timeout=1).brokers
                if set(node_ids) <= set(brokers):
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Apache Kafka nodes {node_ids} not all serving after "
                                   f"{timeout_s:g} s (logs in {self.directory})")
            time.sleep(0.1)

    def _start_proxies(self) -> None:
        from .wire import WireProxy
        for node_id, node in self.nodes.items():
            proxy = WireProxy(node.bootstrap, faults=self.faults,
                              addresses=self._addresses).start()
            self.proxies[node_id] = proxy
            self._addresses[("127.0.0.1", node.port)] = (proxy.proxy.listen_host,
                                                         proxy.proxy.listen_port)

    def close(self) -> None:
        """Stop the proxies and every node (SIGTERM to its process group, then SIGKILL), and
        remove a folder the kit made."""
        self._admin = None
        for proxy in self.proxies.values():
            proxy.stop()
        self.proxies.clear()
        nodes = [node for node in self.nodes.values() if node.is_running()]
        for node in nodes:  # all at once: a quorum stopping one by one waits on itself
            self.resume(node.node_id)
            node.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for node in nodes:
            assert node.process is not None
            try:
                node.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.signal_group(signal.SIGKILL)
                node.process.wait()
        for node in self.nodes.values():
            _untrack(node.pid)
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- process faults ----------------------------------------------------------------------

    def kill(self, node_id: int = 1) -> None:
        """kill -9 of node ``node_id``'s process group."""
        node = self.nodes[node_id]
        self._admin = None
        node.signal_group(signal.SIGKILL)  # a stopped (paused) process dies of it too
        node.paused = False
        if node.process is not None:
            node.process.wait()

    def pause(self, node_id: int = 1) -> None:
        """SIGSTOP to node ``node_id``'s JVM: it holds its connections and answers nothing (a
        long GC pause, a stalled disk)."""
        node = self.nodes[node_id]
        assert node.is_running(), f"pause a running node, not node {node_id}"
        node.signal_group(signal.SIGSTOP)
        node.paused = True

    def resume(self, node_id: int = 1) -> None:
        """SIGCONT to a paused node."""
        node = self.nodes[node_id]
        if node.paused:
            node.signal_group(signal.SIGCONT)
        node.paused = False

    def stop(self, node_id: int = 1) -> None:
        """SIGTERM to node ``node_id`` (resumed first if paused): Kafka's controlled shutdown,
        its leaderships moved before it exits; kill -9 if it has not exited after
        ``STOP_TIMEOUT_S``. Nothing for a node that is not running."""
        node = self.nodes[node_id]
        if not node.is_running():
            return
        self.resume(node_id)
        node.signal_group(signal.SIGTERM)
        assert node.process is not None
        try:
            node.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill(node_id)

    def restart(self, node_id: int = 1, *, hard: bool = False, timeout_s: float = 60.0) -> None:
        """Stop node ``node_id`` (SIGTERM, or SIGKILL with ``hard``) if running, then start it
        on the same ports and data; back once it serves. The proxies stay."""
        node = self.nodes[node_id]
        if hard:
            self.kill(node_id)
        else:
            self.stop(node_id)
        _untrack(node.pid)
        self._start_node(node)
        self.wait_for_brokers([node_id], timeout_s)

    def reset(self) -> None:
        """Back to a healthy Kafka for the next test: faults cleared, every node resumed and
        running."""
        self.clear_faults()
        for node_id in self.node_ids:
            self.resume(node_id)
        stopped = [n for n in self.node_ids if not self.is_running(n)]
        for node_id in stopped:
            _untrack(self.nodes[node_id].pid)
            self._start_node(self.nodes[node_id])
        if stopped:
            self.wait_for_brokers(stopped, 60.0)

    # -- topics ------------------------------------------------------------------------------

    def admin(self):
        """A cached AdminClient talking to the running brokers directly (never through
        faults); a new one after a node is killed or restarted."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            running = [self.nodes[n].bootstrap for n in self.node_ids if self.is_running(n)]
            self._admin = AdminClient({"bootstrap.servers": ",".join(running), "log_level": 0})
        return self._admin

    def topic(self, prefix: str = "test", partitions: int = 1,
              config: dict[str, str] | None = None, timeout_s: float = 30.0, *,
              replication_factor: int | None = None) -> str:
        """Create a topic named ``<prefix>-<random>`` (replication factor 3 on three or more
        brokers, else one per broker), wait until each partition has a leader and all its
        replicas in sync, and return its name."""
        from confluent_kafka.admin import NewTopic
        name = unique_name(prefix)
        replicas = replication_factor or min(3, len(self.nodes))
        admin = self.admin()
        admin.create_topics([NewTopic(name, partitions, replicas, config=dict(config or {}))],
                            operation_timeout=timeout_s)[name].result(timeout_s)
        return wait_until_in_sync(admin, name, partitions, replicas, timeout_s)

    def group(self, prefix: str = "group") -> str:
        return unique_name(prefix)

    def read_all(self, topic: str, *, isolation: str = "read_committed",
                 timeout_s: float = 10.0) -> list:
        """Every record of ``topic`` now, read from the brokers directly (not through
        faults); see ``oncelog.testing.assertions.read_all``."""
        from .assertions import read_all
        running = [self.nodes[n].bootstrap for n in self.node_ids if self.is_running(n)]
        return read_all(",".join(running), topic, isolation=isolation, timeout_s=timeout_s)


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes in URL-safe base64, as ``kafka-storage
    random-uuid`` prints (which also avoids a leading '-', read as an option)."""
    while True:
        encoded = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not encoded.startswith("-"):
            return encoded


def _tail(*paths: Path) -> str:
    for path in paths:
        try:
            lines = [line for line in path.read_text(errors="replace").splitlines()
                     if line.strip()]
        except OSError:
            continue
        errors = [line for line in lines if " ERROR " in line or "Exception" in line]
        if errors or lines:
            return (errors or lines)[-1][:300]
    return "no output"


@contextlib.contextmanager
def apache_kafka(brokers: int = 1, data_dir: Path | str | None = None, *,
                 settings: dict[str, str] | None = None,
                 wire_faults: bool = True,
                 jvm_options: list[str] | None = None) -> Iterator[ApacheKafka]:
    """Apache Kafka (``brokers`` KRaft nodes) and its fault proxies for the ``with`` block,
    in ``data_dir`` or a temporary folder removed afterwards; every JVM stopped by pid after
    it. ``settings`` are Kafka's config names, added to every node's server.properties;
    ``jvm_options`` replace ``JVM_OPTIONS`` (``KAFKA_SCRIPT_JVM_OPTIONS``: Kafka's own)."""
    started = ApacheKafka(Path(data_dir) if data_dir else None, brokers, settings=settings,
                          wire_faults=wire_faults, jvm_options=jvm_options)
    started.start()
    try:
        yield started
    finally:
        started.close()
