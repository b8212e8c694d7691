"""``benchmarks/throughput.py --against-kafka`` (issue 32): oncelog and a real Apache Kafka
measured in one run, side by side.

The benchmark runs as a user runs it, a subprocess from the repository, at a tiny scale
(one run, a few hundred messages: the figures mean nothing, the plumbing is what is
checked): both brokers started, every case run against each, the JSON holding both brokers'
figures and the ratio oncelog/Kafka of their medians, each broker's CPU per MB, Kafka's JVM
running with Kafka's own JVM options (its command line, read from /proc), and neither
broker's process left running afterwards (checked by the pids the JSON records). The
subprocess runs in a process group of its own, killed whole if the test fails or overruns.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import pid_alive

ROOT = Path(__file__).resolve().parents[2]
KAFKA = "apache-kafka"


@pytest.mark.slow
def test_throughput_against_kafka_records_both_brokers_and_the_ratio(tmp_path):
    output = tmp_path / "side-by-side.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "throughput.py"), "--against-kafka",
               "--runs", "1", "--scale", "0.01", "--cases", "produce,latency",
               "--sizes", "1024", "--acks", "1", "--output", str(output)]
    bench = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        printed, _ = bench.communicate(timeout=180)
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.wait()
    assert bench.returncode == 0, printed[-3000:]
    assert "oncelog vs Apache Kafka" in printed  # the side-by-side table was printed

    results = json.loads(output.read_text())
    brokers = {broker["name"]: broker for broker in results["brokers"]}
    assert set(brokers) == {"oncelog", KAFKA}
    for broker in brokers.values():
        assert broker["pid"] and not pid_alive(broker["pid"]), broker["name"]
    # Kafka measured with its own start script's JVM options, not the kit's quick-start ones.
    assert "-XX:+UseG1GC" in brokers[KAFKA]["command"], brokers[KAFKA]["command"]
    assert "-XX:TieredStopAtLevel=1" not in brokers[KAFKA]["command"]

    by_broker = {(case["label"], case["parameters"]["broker"]): case
                 for case in results["cases"]}
    labels = {"produce 1 KiB acks=1", "latency 1 KiB acks=all @2000/s"}
    assert {label for label, _ in by_broker} == labels
    for label in labels:
        for name in ("oncelog", KAFKA):
            runs = by_broker[(label, name)]["runs"]
            assert len(runs) == 1 and "error" not in runs[0], (label, name, runs)

    rows = {row["label"]: row for row in results["comparison"]}
    assert set(rows) == labels
    produce = rows["produce 1 KiB acks=1"]["mb_per_s"]
    ours = by_broker[("produce 1 KiB acks=1", "oncelog")]["summary"]["mb_per_s"]["median"]
    theirs = by_broker[("produce 1 KiB acks=1", KAFKA)]["summary"]["mb_per_s"]["median"]
    assert produce == {"oncelog": ours, KAFKA: theirs, "ratio": pytest.approx(ours / theirs)}
    p99 = rows["latency 1 KiB acks=all @2000/s"]["p99_ms"]
    assert p99["oncelog"] > 0 and p99[KAFKA] > 0
    assert p99["ratio"] == pytest.approx(p99["oncelog"] / p99[KAFKA])
    # The JVM's CPU was sampled: Kafka cannot have served a latency run on no CPU at all.
    assert rows["latency 1 KiB acks=all @2000/s"]["broker_cpu_s_per_mb"][KAFKA] > 0
    # ... and how much of it the kernel did (page cache, sockets): a share of that CPU
    latency_kafka = by_broker[("latency 1 KiB acks=all @2000/s", KAFKA)]["runs"][0]
    assert 0 <= latency_kafka["broker_system_share"] <= 1, latency_kafka
