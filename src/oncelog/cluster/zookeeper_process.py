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
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from ..served_process import ServedProcess, free_port, listens_itself, tied_to_this_process

JAR_DIRECTORIES = (Path("/usr/share/zookeeper"), Path("/usr/share/zookeeper/lib"),
                   Path("/usr/share/java"))
SERVER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
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


class ZooKeeperProcess(ServedProcess):
    NAME = "ZooKeeper"
    START_ERROR = ZooKeeperStartError

    def __init__(self, directory: Path, *, port: int | None = None, host: str = "127.0.0.1",
                 tick_time_ms: int = 100, max_session_timeout_ms: int = 60_000,
                 log_path: Path | None = None, heap_mb: int = 256) -> None:
        # Absolute: the server runs in ``directory`` and reads every path from there.
        self.directory = Path(directory).absolute()
        self.host = host
        self.requested_port = port
        self.port = port or 0
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.log_path = Path(log_path).absolute() if log_path else self.directory / "zookeeper.log"
        self.heap_mb = heap_mb
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
        return [find_java(), f"-Xmx{self.heap_mb}m", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",  # starts faster; the server is not the bottleneck
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS",
                "-Dzookeeper.jmx.log4j.disable=true",
                "-cp", os.pathsep.join(find_classpath()), SERVER_MAIN, str(self.config_path)]

    def write_config(self) -> None:
        data_dir = self.directory / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
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
            "",
        ]))

    def start(self, timeout_s: float = 30.0) -> ZooKeeperProcess:
        command = self.command()  # ZooKeeperNotInstalled before anything is written
        self.directory.mkdir(parents=True, exist_ok=True)
        attempts = 1 if self.requested_port else 3  # a free port can be taken before we bind
        for attempt in range(attempts):
            if not self.requested_port:
                self.port = free_port(self.host)
            self.write_config()
            with open(self.log_path, "ab") as log:
                self.process = subprocess.Popen(tied_to_this_process(command), stdout=log,
                                                stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, cwd=self.directory,
                                                start_new_session=True)
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

    def is_serving(self) -> bool:
        try:
            # "Mode: standalone" only once it serves; before, "not currently serving requests"
            if "Mode:" not in four_letter_word(self.host, self.port, "srvr", timeout_s=1.0):
                return False
        except OSError:
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
