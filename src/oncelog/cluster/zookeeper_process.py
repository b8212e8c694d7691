"""Run a real Apache ZooKeeper 3.8 as a child process, from Debian's ``zookeeper`` jars or
from a ZooKeeper distribution named by ``ZOOKEEPER_HOME``.

``ZooKeeperProcess(directory).start()`` writes ``zoo.cfg`` into ``directory`` (data in
``directory/data``), starts ``java ... org.apache.zookeeper.server.ZooKeeperServerMain
zoo.cfg`` on a loopback port (a free one unless given), logs to ``directory/zookeeper.log``,
waits until the server answers the ``srvr`` four-letter word, and ``stop()`` ends it by process
id: SIGTERM, then SIGKILL. It is a context manager. Used by ``oncelog cluster start`` and the
tests (``tests/zookeeper_server.py``).

Where the jars come from (``find_classpath``): with ``ZOOKEEPER_HOME`` set, that folder only,
laid out like Apache's release tarball (``apache-zookeeper-X.Y.Z-bin``): every jar in
``lib/`` (and at the top, as older releases had the server jar), with ``conf/`` first so the
distribution's own ``logback.xml`` sends its log to stderr. A ``ZOOKEEPER_HOME`` without a
ZooKeeper server jar is one sentence naming it, never a fallback to other jars. Otherwise
Debian's ``zookeeper.jar`` (its manifest names the other jars of the package) and
``slf4j-simple.jar``, so the server logs to stderr, which goes to the log file; without a
binding slf4j would drop every line. The tick is short (100 ms by default) because
ZooKeeper allows session timeouts from 2 to 20 ticks unless told otherwise: with
``minSessionTimeout`` at 2 ticks, tests can use sessions of a second or less, and
``maxSessionTimeout`` is raised to 60 s so Kafka's default 18 s sessions are granted as asked.

The server runs in a session of its own (``start_new_session``): a Ctrl-C in the terminal of
an ``oncelog cluster start`` reaches that command, which stops its brokers first and
ZooKeeper last, instead of ZooKeeper dying under brokers still shutting down. A caller killed
outright (``kill -9``) takes the server along: it is started tied to the caller
(``served_process.tied_to_this_process``, Linux's parent-death signal).

**One node of an ensemble.** Given ``server_id`` and ``quorum`` (every node's ``QuorumPeer``:
``server.N=host:peer_port:election_port``), the process is one voting member instead:
``QuorumPeerMain``, a ``myid`` file in its data directory, ``initLimit``/``syncLimit`` in
ticks (5 s and 2 s at the default tick: short enough for tests, long enough for a JVM on a
busy machine), and ``zookeeper.cnxTimeout`` at 1 s so an election does not wait 5 s on a
peer that is unreachable rather than dead. ``ZooKeeperEnsemble``
(``zookeeper_ensemble.py``) builds and runs such nodes; ``mode()`` says what ``srvr`` says
(``standalone``, ``leader``, ``follower``; None while not serving).

**Where it runs.** ``host`` is the address it binds and advertises (loopback by default);
``command_prefix`` is put before the java command, e.g. ``["ip", "netns", "exec", "ns1"]``
to run it inside a network namespace whose address is ``host``. A port not given is a free
one on ``host`` when this process can bind that address, else ZooKeeper's usual one (2181,
and 2888/3888 for an ensemble's peers): an address this process cannot bind belongs to
another network namespace, whose ports are the node's own.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..served_process import ServedProcess, free_port, listens_itself, tied_to_this_process

JAR_DIRECTORIES = (Path("/usr/share/zookeeper"), Path("/usr/share/zookeeper/lib"),
                   Path("/usr/share/java"))
SERVER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
CLIENT_PORT, PEER_PORT, ELECTION_PORT = 2181, 2888, 3888  # ZooKeeper's usual ports
MODE = re.compile(r"^Mode: (\w+)", re.MULTILINE)
# zookeeper-3.8.4.jar, not zookeeper-jute-3.8.4.jar or zookeeper-prometheus-metrics-3.8.4.jar
SERVER_JAR = re.compile(r"zookeeper(-\d[\w.-]*)?\.jar")


class ZooKeeperNotInstalled(RuntimeError):
    """Java or the ZooKeeper jars are missing."""


class ZooKeeperStartError(RuntimeError):
    """The server exited or did not answer while starting."""


def find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperNotInstalled("ZooKeeper cannot run: no Java runtime found (java is not "
                                    "on PATH); run make setup")
    return java


def find_classpath() -> list[str]:
    """``ZOOKEEPER_HOME``'s jars when it is set; else Debian's ``zookeeper.jar`` and, when
    present, ``zookeeper-jute.jar`` and ``slf4j-simple.jar``."""
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        return distribution_classpath(Path(home))

    def first(name: str) -> Path | None:
        return next((directory / name for directory in JAR_DIRECTORIES
                     if (directory / name).is_file()), None)

    server_jar = first("zookeeper.jar")
    if server_jar is None:
        raise ZooKeeperNotInstalled("ZooKeeper is not installed (no zookeeper.jar in "
                                    + ", ".join(map(str, JAR_DIRECTORIES))
                                    + "); run make setup, or set ZOOKEEPER_HOME to an "
                                    "Apache ZooKeeper release folder (the one holding lib/)")
    return [str(jar) for jar in (server_jar, first("zookeeper-jute.jar"),
                                 first("slf4j-simple.jar")) if jar is not None]


def distribution_classpath(home: Path) -> list[str]:
    """``home/conf`` (when present), then every jar in ``home/lib`` and ``home``."""
    home = home.absolute()
    jars = sorted(home.glob("lib/*.jar")) + sorted(home.glob("*.jar"))
    if not any(SERVER_JAR.fullmatch(jar.name) for jar in jars):
        raise ZooKeeperNotInstalled(
            f"ZOOKEEPER_HOME={home} is not a ZooKeeper distribution: no zookeeper-*.jar in "
            f"{home / 'lib'} (Apache's release tarball, apache-zookeeper-X.Y.Z-bin, has one)")
    conf = [home / "conf"] if (home / "conf").is_dir() else []
    return [str(path) for path in conf + jars]


def four_letter_word(host: str, port: int, word: str = "srvr", timeout_s: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command and return its whole answer."""
    with socket.create_connection((host, port), timeout=timeout_s) as connection:
        connection.sendall(word.encode())
        chunks = []
        while chunk := connection.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def port_on(host: str, default: int) -> int:
    """A free port on ``host`` if this process can bind that address; else ``default`` (the
    address is another network namespace's, where the node has every port to itself)."""
    try:
        return free_port(host)
    except OSError:
        return default


@dataclass(frozen=True)
class QuorumPeer:
    """One voting member as every member's ``zoo.cfg`` names it."""
    server_id: int
    host: str
    peer_port: int
    election_port: int

    def config_line(self) -> str:
        return f"server.{self.server_id}={self.host}:{self.peer_port}:{self.election_port}"


class ZooKeeperProcess(ServedProcess):
    NAME = "ZooKeeper"
    START_ERROR = ZooKeeperStartError

    def __init__(self, directory: Path, *, port: int | None = None, host: str = "127.0.0.1",
                 tick_time_ms: int = 100, max_session_timeout_ms: int = 60_000,
                 log_path: Path | None = None, heap_mb: int = 256,
                 command_prefix: Sequence[str] = (), server_id: int | None = None,
                 quorum: Sequence[QuorumPeer] = (), init_limit_ticks: int = 50,
                 sync_limit_ticks: int = 20) -> None:
        # Absolute: the server runs in ``directory`` and reads every path from there.
        self.directory = Path(directory).absolute()
        self.host = host
        self.requested_port = port
        self.port = port or 0
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.log_path = Path(log_path).absolute() if log_path else self.directory / "zookeeper.log"
        self.heap_mb = heap_mb
        self.command_prefix = list(command_prefix)
        assert (server_id is None) == (not quorum), "an ensemble node has an id and a quorum"
        assert server_id is None or server_id in {peer.server_id for peer in quorum}
        self.server_id = server_id
        self.quorum = tuple(quorum)
        self.init_limit_ticks = init_limit_ticks
        self.sync_limit_ticks = sync_limit_ticks
        self.process: subprocess.Popen | None = None

    @property
    def connect_string(self) -> str:
        """``host:port``, to which a caller appends its chroot for ``zookeeper.connect``."""
        return f"{self.host}:{self.port}"

    address = connect_string

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def config_path(self) -> Path:
        return self.directory / "zoo.cfg"

    def command(self) -> list[str]:
        quorum_options = ["-Dzookeeper.cnxTimeout=1000"] if self.quorum else []
        return [*self.command_prefix, find_java(), f"-Xmx{self.heap_mb}m", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",  # starts faster; the server is not the bottleneck
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS",
                "-Dzookeeper.jmx.log4j.disable=true", *quorum_options,
                "-cp", os.pathsep.join(find_classpath()),
                QUORUM_MAIN if self.quorum else SERVER_MAIN, str(self.config_path)]

    def write_config(self) -> None:
        data_dir = self.directory / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        quorum_lines = []
        if self.quorum:
            (data_dir / "myid").write_text(f"{self.server_id}\n")
            quorum_lines = [f"initLimit={self.init_limit_ticks}",
                            f"syncLimit={self.sync_limit_ticks}",
                            *(peer.config_line() for peer in self.quorum)]
        self.config_path.write_text("\n".join([
            "# written by oncelog.cluster.zookeeper_process; rewritten at every start",
            f"tickTime={self.tick_time_ms}",
            f"dataDir={data_dir}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            f"minSessionTimeout={2 * self.tick_time_ms}",
            f"maxSessionTimeout={self.max_session_timeout_ms}",
            "maxClientCnxns=0",  # every broker and test client connects from 127.0.0.1
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
            *quorum_lines,
            "",
        ]))

    def launch(self) -> subprocess.Popen:
        """Write ``zoo.cfg`` and start the server, without waiting for it to serve (an
        ensemble's node serves only once a quorum runs)."""
        command = self.command()  # ZooKeeperNotInstalled before anything is written
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = port_on(self.host, CLIENT_PORT)
        self.write_config()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(tied_to_this_process(command), stdout=log,
                                            stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=self.directory,
                                            start_new_session=True)
        return self.process

    def start(self, timeout_s: float = 30.0) -> ZooKeeperProcess:
        self.command()  # ZooKeeperNotInstalled before anything is written
        attempts = 1 if self.requested_port else 3  # a free port can be taken before we bind
        for attempt in range(attempts):
            if not self.requested_port:
                self.port = 0  # a new one
            self.launch()
            assert self.process is not None
            try:
                if self.wait_ready(timeout_s):
                    return self
            except BaseException:
                self.stop()
                raise
            if attempt + 1 == attempts:
                status = self.process.returncode
                self.process = None
                raise ZooKeeperStartError(
                    f"ZooKeeper exited with status {status} while starting on "
                    f"{self.connect_string}; see {self.log_path}")
            self.process = None
        raise AssertionError("unreachable")

    def mode(self) -> str | None:
        """``standalone``, ``leader`` or ``follower`` (``srvr``'s "Mode:"); None while it
        does not serve (not started, an ensemble without a quorum, an election)."""
        try:
            # "Mode: ..." only once it serves; before, "not currently serving requests"
            found = MODE.search(four_letter_word(self.host, self.port, "srvr", timeout_s=1.0))
        except OSError:
            return None
        return found[1] if found else None

    def is_serving(self) -> bool:
        if self.mode() is None:
            return False
        # Another test's ZooKeeper may hold the port we were given (a restart on its old
        # port, a free port taken meanwhile): its answer is not ours.
        return self.process is None or listens_itself(self.process.pid, self.port) is not False

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s``; waits until the process is gone."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """SIGKILL at once (a crashed ZooKeeper)."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
