"""Run Spark's Connect server as a child process, from the PySpark installation itself.

``ConnectServer(directory).start()`` runs ``bin/spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer`` (what ``sbin/start-connect-server.sh``
runs, without its daemon wrapper) on a free loopback port (``spark.connect.grpc.binding.port``),
master ``local[2]`` unless another master URL is given, logs to ``directory/connect-server.log``,
waits until the server answers a gRPC client, and ``stop()`` ends it by process group: SIGTERM,
then SIGKILL. It is a context manager. A client then connects with
``SparkSession.builder.remote(server.url).getOrCreate()`` and registers the format with
``oncelog.spark.register(spark)`` as in classic PySpark.

The server runs in a session of its own (``start_new_session``): spark-submit is a shell
script that execs Java, and the JVM starts Python workers (data source readers, the
``foreachBatch`` runner) as its children; stopping the group stops them all, and a Ctrl-C
in the caller's terminal does not reach the server before the caller has stopped its queries.

The server's Python workers run this interpreter (``PYSPARK_PYTHON``), so they import the
same oncelog, and ``SPARK_LOCAL_IP=127.0.0.1`` keeps them connecting back over loopback
(``session.py`` explains both). The JVM logs only errors (``log4j2.properties``), has no
web UI and a small heap.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..broker.process import free_port
from ..served_process import ServedProcess
from .process_group import ProcessGroup, SparkNotInstalled, spark_environment, spark_home

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


class ConnectServerNotInstalled(RuntimeError):
    """PySpark (with its spark-submit and the spark-connect jar) or Java is missing."""


class ConnectServerStartError(RuntimeError):
    """The server exited or did not answer while starting."""


def connect_home() -> Path:
    """The Spark installation (``process_group.spark_home``), checked for what the server needs."""
    try:
        home = spark_home()
    except SparkNotInstalled:
        raise ConnectServerNotInstalled("the Spark Connect server cannot run: PySpark is not "
                                        "installed (pip install 'oncelog[spark]')") from None
    if not (home / "bin" / "spark-submit").is_file():
        raise ConnectServerNotInstalled(f"the Spark Connect server cannot run: no "
                                        f"bin/spark-submit in {home}")
    if not any((home / "jars").glob("spark-connect_*.jar")):
        raise ConnectServerNotInstalled(f"the Spark Connect server cannot run: no "
                                        f"spark-connect jar in {home / 'jars'}")
    return home


def server_environment() -> dict[str, str]:
    """``spark_environment`` plus, as start-connect-server.sh, a classic Spark server."""
    return {**spark_environment(), "SPARK_CONNECT_MODE": "0"}


class ConnectServer(ServedProcess):
    NAME = "the Spark Connect server"
    START_ERROR = ConnectServerStartError
    READY_POLL_S = 0.5

    def __init__(self, directory: Path, *, master: str = "local[2]", port: int | None = None,
                 host: str = "127.0.0.1", config: dict[str, str] | None = None,
                 driver_memory: str = "1g", log_path: Path | None = None) -> None:
        self.directory = Path(directory)
        self.master = master
        self.host = host
        self.requested_port = port
        self.port = port or 0
        self.config = dict(config or {})
        self.driver_memory = driver_memory
        self.log_path = Path(log_path) if log_path else self.directory / "connect-server.log"
        self.group: ProcessGroup | None = None

    @property
    def process(self) -> subprocess.Popen | None:
        return self.group.process if self.group else None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """What ``SparkSession.builder.remote`` takes: ``sc://host:port``."""
        return f"sc://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def command(self) -> list[str]:
        home = connect_home()
        config = {
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": self.host,
            "spark.driver.bindAddress": self.host,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.python.worker.reuse": "true",
            "spark.driver.extraJavaOptions":
                f"-Dlog4j2.configurationFile={_LOG_CONFIG} -XX:+UseSerialGC",
            **self.config,
        }
        args = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS,
                "--name", "oncelog connect server", "--master", self.master,
                "--driver-memory", self.driver_memory]
        for name, value in config.items():
            args += ["--conf", f"{name}={value}"]
        return args

    def start(self, timeout_s: float = 90.0) -> ConnectServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        attempts = 1 if self.requested_port else 3  # a free port can be taken before we bind
        for attempt in range(attempts):
            if not self.requested_port:
                self.port = free_port(self.host)
            command = self.command()  # ConnectServerNotInstalled before anything starts
            self.group = ProcessGroup("connect-server", command, self.log_path)
            self.group.start(server_environment(), self.directory)
            try:
                if self.wait_ready(timeout_s):
                    return self
            except BaseException:
                self.stop()
                raise
            status = self.process.returncode if self.process is not None else None
            self.stop()  # the JVM may have exited and left Python workers behind
            if attempt + 1 == attempts:
                raise ConnectServerStartError(
                    f"the Spark Connect server exited with status {status} while starting on "
                    f"{self.host}:{self.port}; see {self.log_path}")
        raise AssertionError("unreachable")

    def is_serving(self) -> bool:
        """The port speaks gRPC (HTTP/2): the server binds it once Spark is up."""
        import grpc

        channel = grpc.insecure_channel(f"{self.host}:{self.port}")
        try:
            grpc.channel_ready_future(channel).result(timeout=1.0)
            return True
        except grpc.FutureTimeoutError:
            return False
        finally:
            channel.close()

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM to the server's process group, then SIGKILL after ``timeout_s`` (Python
        workers the JVM left behind too)."""
        group, self.group = self.group, None
        if group is not None:
            group.stop(timeout_s)

    def kill(self) -> None:
        """SIGKILL to the whole group at once (a crashed server)."""
        group, self.group = self.group, None
        if group is not None:
            group.kill()
