"""The Apache Kafka Java producer as a benchmark client (``transactions.py --client java``).

``compile_bench(directory)`` builds ``java/ProducerBench.java`` against kafka-clients 3.9.1
(the jars the Java client tests use, from the ``java-client`` extra ``make setup`` installs);
``produce(classes, topics, ...)`` runs one case in a JVM of its own, warmed up on a topic of
its own (created and deleted with ``topics``, a ``throughput.Topics``), and returns what it
printed (one JSON object, the keys of ``clients.produce``), or ``{"error": ...}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.integration.java_client import _tool, client_jars  # noqa: E402

SOURCE = HERE / "java" / "ProducerBench.java"
WARMUP_RECORDS = 100_000  # untimed, same case, before the timed run: the JIT compiles first


def compile_bench(directory: Path) -> Path:
    classes = Path(directory) / "java-bench-classes"
    classes.mkdir(parents=True, exist_ok=True)
    subprocess.run([_tool("javac"), "-d", str(classes), "-cp", _class_path(),
                    str(SOURCE)], check=True, capture_output=True, text=True)
    return classes


def _class_path(*extra: Path) -> str:
    return os.pathsep.join(str(path) for path in (*client_jars(), *extra))


def produce(classes: Path, topics, *, bootstrap: str, topic: str, mode: str, count: int,
            value_size: int, per_transaction: int, acks: str = "all",
            timeout_s: float = 600, settings: dict[str, str] | None = None) -> dict:
    """``settings``: ``batch.size`` and ``linger.ms`` for the producer, passed as
    ``-Dbench.<name>`` (ProducerBench's defaults, 1000000 and 10, where missing)."""
    warmup = topics.create(f"{mode}-warmup")
    try:
        return _run(classes, bootstrap, topic, mode, count, value_size, per_transaction, warmup,
                    acks, timeout_s, settings or {})
    finally:
        topics.delete(warmup)


def _run(classes: Path, bootstrap: str, topic: str, mode: str, count: int, value_size: int,
         per_transaction: int, warmup_topic: str, acks: str, timeout_s: float,
         settings: dict[str, str]) -> dict:
    command = [_tool("java"), *(f"-Dbench.{name}={value}" for name, value in settings.items()),
               "-cp", _class_path(classes), "ProducerBench", bootstrap, topic,
               mode, str(count), str(value_size), str(per_transaction), warmup_topic,
               str(WARMUP_RECORDS), acks]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"the Java producer ({mode}) did not finish in {timeout_s:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": f"the Java producer ({mode}) exited {done.returncode}: "
                         f"{done.stderr.strip()[-2000:]}"}
    result = json.loads(lines[-1])
    if result.get("failures"):
        return {"error": f"the Java producer ({mode}): {result['failures']} records failed"}
    return result
