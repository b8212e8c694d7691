"""Throughput, latency and memory of a Kafka-protocol broker, measured with confluent-kafka.

    .venv/bin/python benchmarks/throughput.py [--runs 3] [--scale 1.0] [--cases ...]
    .venv/bin/python benchmarks/throughput.py --bootstrap HOST:PORT   # any Kafka broker
    .venv/bin/python benchmarks/throughput.py --against-kafka         # side by side

Without ``--bootstrap`` it starts an oncelog broker in a temporary directory (and, for the
fsync case, a second one with ``log.flush.policy=ack``) and samples each broker's resident
memory and CPU time from /proc. Every client runs in its own process (multiprocessing, spawn;
see ``clients.py``), never in a broker's. Each case runs ``--runs`` times; the table shows the
median and the min-max, and every raw run goes to ``benchmarks/results/<timestamp>.json``.

``--against-kafka`` also starts Apache Kafka (one KRaft node, ``oncelog.testing.apache_kafka``,
clients on its own port, no wire proxy; Kafka's own JVM options) and runs every selected
case against both brokers, run by run in turn (oncelog, Kafka, oncelog, ...) so that drift on
a busy machine hits both; the last table gives each figure for both, the ratio
oncelog/Kafka, and each broker's CPU seconds per MB.

This is a measuring tool: nothing here passes or fails on a figure. The timeouts below only
stop a hung client. See README.md for what each case measures and how to read it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
SPAWN = multiprocessing.get_context("spawn")

CASES = ("produce", "consume", "latency", "idempotence", "fsync")
DEFAULT_COUNTS = {100: 3_000_000, 1024: 1_000_000, 16384: 100_000}  # ~2-5 s each at scale 1
ACKS = ("0", "1", "all")
CONSUME_VALUE_BYTES = 1024


def message_count(value_size: int, scale: float) -> int:
    return max(1, round(DEFAULT_COUNTS.get(value_size, 1_000_000_000 // value_size) * scale))


def size_label(value_size: int) -> str:
    return f"{value_size // 1024} KiB" if value_size % 1024 == 0 else f"{value_size} B"


# -- the broker side -----------------------------------------------------------------------

class BrokerMonitor:
    """Samples one process's VmRSS and CPU time every ``interval`` s from /proc."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        # (time.time(), rss bytes, cpu s, of which in the kernel (stime) s)
        self.samples: list[tuple[float, int, float, float]] = []
        self.peak_rss_hwm: int | None = None  # VmHWM: the kernel's own peak
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ticks = os.sysconf("SC_CLK_TCK")

    def _read(self) -> tuple[int, int, float, float] | None:
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return None
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        rss = int(fields["VmRSS"].split()[0]) * 1024
        hwm = int(fields["VmHWM"].split()[0]) * 1024
        after_name = stat.rsplit(")", 1)[1].split()
        cpu = (int(after_name[11]) + int(after_name[12])) / self._ticks  # utime + stime
        return rss, hwm, cpu, int(after_name[12]) / self._ticks

    def _run(self) -> None:
        while not self._stop.is_set():
            reading = self._read()
            if reading is not None:
                rss, hwm, cpu, system = reading
                self.samples.append((time.time(), rss, cpu, system))
                self.peak_rss_hwm = hwm
            self._stop.wait(self.interval)

    def start(self) -> BrokerMonitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def peak_rss(self, start: float | None = None, end: float | None = None) -> int | None:
        values = [rss for t, rss, _, _ in self.samples
                  if (start is None or t >= start) and (end is None or t <= end)]
        return max(values) if values else None

    def cpu_percent(self, start: float, end: float) -> float | None:
        window = [(t, cpu) for t, _, cpu, _ in self.samples if start <= t <= end]
        if len(window) < 2 or window[-1][0] <= window[0][0]:
            return None
        return 100 * (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])

    def system_share(self, start: float, end: float) -> float | None:
        """Of the CPU time used in the window, the part spent in the kernel (system calls,
        page-cache allocation and reclaim, copies to sockets): 0-1."""
        total = self.cpu_seconds(start, end)
        window = [system for t, _, _, system in self.samples if start <= t <= end]
        if not total or len(window) < 2:
            return None
        return (window[-1] - window[0]) / total

    def cpu_seconds(self, start: float, end: float) -> float | None:
        """CPU time (all threads) used between the first and last sample in the window."""
        window = [cpu for t, _, cpu, _ in self.samples if start <= t <= end]
        return window[-1] - window[0] if len(window) >= 2 else None


class Target:
    """A broker to measure: one we started (with a monitor) or one we were pointed at."""

    def __init__(self, name: str, bootstrap: str, process=None) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.process = process
        self.monitor = BrokerMonitor(process.pid).start() if process is not None else None
        self.topics: Topics | None = None  # set by main() once the broker serves

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def annotate(self, result: dict) -> dict:
        """Add the broker's peak RSS and CPU use over the run's measured window."""
        if self.monitor is not None and "window" in result:
            start, end = result["window"]
            result["broker_peak_rss_bytes"] = self.monitor.peak_rss(start, end)
            result["broker_cpu_percent"] = self.monitor.cpu_percent(start, end)
            cpu_seconds = self.monitor.cpu_seconds(start, end)
            megabytes = result.get("megabytes")
            if megabytes is None and "mb_per_s" in result and "seconds" in result:
                megabytes = result["mb_per_s"] * result["seconds"]
            result["broker_system_share"] = self.monitor.system_share(start, end)
            if cpu_seconds is not None and megabytes:
                result["broker_cpu_seconds"] = cpu_seconds
                result["broker_cpu_s_per_mb"] = cpu_seconds / megabytes
        if "window" in result and "client_cpu_seconds" in result:
            result["client_cpu_percent"] = (100 * result["client_cpu_seconds"]
                                            / (result["window"][1] - result["window"][0]))
        return result

    def close(self) -> dict:
        summary = {"name": self.name, "bootstrap": self.bootstrap, "pid": self.pid}
        if self.monitor is not None:
            self.monitor.stop()
            summary["peak_rss_bytes_sampled"] = self.monitor.peak_rss()
            summary["peak_rss_bytes_vmhwm"] = self.monitor.peak_rss_hwm
        if isinstance(self.process, KafkaProcess):
            summary["command"] = self.process.jvm_command
        if self.process is not None:
            summary["exit_status"] = self.process.stop()
            summary["log_tail"] = self.process.log_tail()  # the log goes with the temp dir
        return summary


class KafkaProcess:
    """An ``ApacheKafka`` single node seen as ``Target`` sees a ``BrokerProcess``."""

    def __init__(self, kafka) -> None:
        self.kafka = kafka
        self.pid = kafka.pid  # the JVM itself: the tie to this process exec()s java
        self._log_tail = ""
        # What the JVM really runs with (the tie exec()s java once it is set up).
        self.jvm_command = _command_line(self.pid) if self.pid else []

    def stop(self) -> str:
        self._log_tail = self.log_tail()  # close() removes the folder the log is in
        self.kafka.close()
        return "closed"

    def log_tail(self, lines: int = 20) -> str:
        if self._log_tail:
            return self._log_tail
        try:
            return "\n".join(self.kafka.log_path.read_text(errors="replace")
                             .splitlines()[-lines:])
        except OSError:
            return ""


KAFKA_NAME = "apache-kafka"


def _command_line(pid: int, timeout_s: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return []
        command = [part.decode(errors="replace") for part in argv if part]
        if any(Path(part).name == "java" for part in command[:1]) or \
                time.monotonic() > deadline:
            return command
        time.sleep(0.05)


def start_kafka(data_dir: Path) -> Target:
    """Apache Kafka, one node: its defaults, with what a single node needs (replication
    factor 1 for internal topics, set by the kit) and its own start script's JVM options;
    flushing is left to the OS, as oncelog's default ``log.flush.policy=os`` does."""
    from oncelog.testing.apache_kafka import KAFKA_SCRIPT_JVM_OPTIONS, ApacheKafka
    kafka = ApacheKafka(data_dir / KAFKA_NAME, 1, wire_faults=False,
                        jvm_options=KAFKA_SCRIPT_JVM_OPTIONS)
    kafka.start()
    return Target(KAFKA_NAME, kafka.direct_bootstrap, KafkaProcess(kafka))


def start_oncelog(name: str, data_dir: Path, settings: dict[str, str]) -> Target:
    from oncelog.broker.process import BrokerProcess
    process = BrokerProcess(data_dir / name, settings=settings,
                            log_path=data_dir / f"{name}.log",
                            extra_args=["--log-level", "WARNING"])
    process.start()
    return Target(name, process.bootstrap, process)


# -- topics and client processes -------------------------------------------------------------

class Topics:
    def __init__(self, bootstrap: str, run_id: str) -> None:
        import logging
        from confluent_kafka.admin import AdminClient
        quiet = logging.getLogger("bench.admin")
        quiet.setLevel(logging.CRITICAL)
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet})
        self.run_id = run_id
        self.serial = 0

    def create(self, purpose: str, partitions: int = 1) -> str:
        from confluent_kafka.admin import NewTopic
        self.serial += 1
        name = f"bench-{self.run_id}-{self.serial}-{purpose}"
        futures = self.admin.create_topics([NewTopic(name, num_partitions=partitions,
                                                     replication_factor=1)])
        futures[name].result(60)
        return name

    def delete(self, name: str) -> None:
        """Free the disk between runs; a broker without DeleteTopics keeps the topic."""
        try:
            self.admin.delete_topics([name])[name].result(60)
        except Exception as error:  # noqa: BLE001 - only housekeeping
            print(f"  (could not delete {name}: {error})", file=sys.stderr)


class ClientProcess:
    """One ``clients.<name>(**kwargs)`` in a fresh spawned process."""

    def __init__(self, name: str, **kwargs) -> None:
        self.name = name
        self._receive, send = SPAWN.Pipe(duplex=False)
        self.process = SPAWN.Process(target=_client_entry, args=(send, name, kwargs),
                                     name=f"bench-{name}", daemon=True)
        self.process.start()
        send.close()

    def result(self, timeout: float) -> dict:
        try:
            if self._receive.poll(timeout):
                return self._receive.recv()
            return {"error": f"{self.name}: no result within {timeout:.0f} s (hang guard)"}
        except EOFError:
            self.process.join(5)
            return {"error": f"{self.name}: client process exited with {self.process.exitcode}"}

    def stop(self, grace: float = 10.0) -> None:
        """Let it finish (a consumer's close()), then terminate it, then kill it, by pid."""
        self.process.join(grace)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self._receive.close()


def _client_entry(connection, name: str, kwargs: dict) -> None:
    import clients
    clients.run(connection, name, kwargs)


def run_client(name: str, timeout: float, **kwargs) -> dict:
    client = ClientProcess(name, **kwargs)
    try:
        return client.result(timeout)
    finally:
        client.stop()


# -- profiling (optional) ---------------------------------------------------------------------

@contextmanager
def profiled(target: Target, options: argparse.Namespace, label: str):
    """py-spy record the broker while the block runs; the output is collapsed stacks."""
    directory, native, rate = options.profile, options.profile_native, options.profile_rate
    if directory is None or target.pid is None or target.name == KAFKA_NAME:  # py-spy: Python
        yield None
        return
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    directory.mkdir(parents=True, exist_ok=True)
    output = directory / (label.replace(" ", "_").replace("=", "") + ".txt")
    command = [py_spy, "record", "--pid", str(target.pid), "--format", "raw",
               "--rate", str(rate),
               "--output", str(output)]
    # Native frames need the process paused while sampled; Python-only sampling does not.
    command += ["--native"] if native else ["--nonblocking"]
    recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)  # attached before the client starts
    try:
        yield output
    finally:
        recorder.send_signal(signal.SIGINT)
        try:
            _, errors = recorder.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            recorder.kill()
            _, errors = recorder.communicate()
        if not output.exists():
            print(f"  py-spy wrote no profile: {errors.decode(errors='replace').strip()}",
                  file=sys.stderr)


def summarize_profile(path: Path, top: int = 15) -> dict:
    """Self and inclusive shares per function, and self shares per line, from py-spy's
    collapsed stacks (one line per stack: frames joined by ';', then a sample count)."""
    own: Counter = Counter()
    own_lines: Counter = Counter()
    inclusive: Counter = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = stack.split(";")
        functions = [_function_of(frame) for frame in frames]
        own[functions[-1]] += samples
        own_lines[_function_of(frames[-1], keep_line=True)] += samples
        for function in set(functions):
            inclusive[function] += samples

    def shares(counter: Counter) -> list:
        return [(name, n, n / total) for name, n in counter.most_common(top)] if total else []
    return {"samples": total, "self": shares(own), "self_lines": shares(own_lines),
            "inclusive": shares(inclusive)}


def _function_of(frame: str, keep_line: bool = False) -> str:
    """'handle (oncelog/broker/handlers/produce.py:42)' -> 'handle (oncelog/.../produce.py)'."""
    name, _, where = frame.partition(" (")
    file, _, line = where.rstrip(")").rpartition(":")
    for prefix in ("site-packages/", "/src/"):
        if prefix in file:
            file = file.split(prefix, 1)[1]
    if keep_line and line:
        file = f"{file}:{line}"
    return f"{name} ({file})" if file else name


# -- the cases --------------------------------------------------------------------------------

# Every case takes the list of brokers to measure and runs them in turn within each run
# (A, B, A, B, ...), so that drift on a shared machine hits each alike.

def case_produce(targets, options, record) -> None:
    for value_size in options.sizes:
        for acks in options.acks:
            count = message_count(value_size, options.scale)
            label = f"produce {size_label(value_size)} acks={acks}"
            cases = {target.name: record.begin("produce", label, broker=target.name,
                                               value_bytes=value_size, acks=acks,
                                               messages=count, client=options.client_mode)
                     for target in targets}
            for run in range(options.runs):
                for target in targets:
                    topic = target.topics.create(f"p{value_size}-a{acks}")
                    with profiled(target, options, f"{label} run{run + 1}") as profile:
                        result = run_client("produce", options.client_timeout,
                                            bootstrap=target.bootstrap, topic=topic,
                                            value_size=value_size, count=count, acks=acks,
                                            defaults=options.client_defaults)
                    record.add(target.annotate(result), profile, cases[target.name])
                    target.topics.delete(topic)


def settle_disk() -> None:
    """Write back what earlier cases left dirty in the page cache before timing the next one.

    Otherwise the kernel flushes the gigabyte just produced while a consume or latency run is
    being timed, and that run measures the disk, not the broker (seen here: a first consume
    run at a third of the next ones, with broker and client both idle)."""
    started = time.monotonic()
    os.sync()
    print(f"  sync: {time.monotonic() - started:.1f} s of writeback before timing",
          file=sys.stderr)


def case_consume(targets, options, record) -> None:
    count = message_count(CONSUME_VALUE_BYTES, options.scale)
    label = f"consume {size_label(CONSUME_VALUE_BYTES)}"
    topics, cases = {}, {}
    for target in targets:
        topic = topics[target.name] = target.topics.create("consume")
        print(f"  preparing {topic} on {target.name}: {count:,} x 1 KiB, acks=1",
              file=sys.stderr)
        filled = run_client("produce", options.client_timeout, bootstrap=target.bootstrap,
                            topic=topic, value_size=CONSUME_VALUE_BYTES, count=count, acks="1")
        cases[target.name] = record.begin("consume", label, broker=target.name,
                                          value_bytes=CONSUME_VALUE_BYTES, messages=count,
                                          fill=filled, client=options.client_mode)
    settle_disk()
    for run in range(options.runs):
        for target in targets:
            with profiled(target, options, f"{label} run{run + 1}") as profile:
                result = run_client("consume", options.client_timeout,
                                    bootstrap=target.bootstrap, topic=topics[target.name],
                                    defaults=options.client_defaults)
            record.add(target.annotate(result), profile, cases[target.name])
    for target in targets:
        target.topics.delete(topics[target.name])


def case_latency(targets, options, record) -> None:
    rate = options.latency_rate
    count = max(1, round(rate * options.latency_seconds * options.scale))
    warmup = min(count // 10, round(rate * 0.5))  # the first 0.5 s: connections, first fetches
    label = f"latency 1 KiB acks=all @{rate:g}/s"
    cases = {target.name: record.begin("latency", label, broker=target.name, value_bytes=1024,
                                       acks="all", rate_per_s=rate, messages=count,
                                       warmup_messages=warmup)
             for target in targets}
    settle_disk()
    for _ in range(options.runs):
        for target in targets:
            record.add(target.annotate(latency_run(target, options, count, rate, warmup)),
                       None, cases[target.name])


def latency_run(target, options, count: int, rate: float, warmup: int) -> dict:
    """One latency run: a consumer waiting on a fresh topic, then a paced producer."""
    topics = target.topics
    topic = topics.create("latency")
    ready = SPAWN.Event()
    consumer = ClientProcess("latency_consumer", bootstrap=target.bootstrap, topic=topic,
                             count=count, ready=ready)
    producer = None
    try:
        ready.wait(60)
        started = time.time()
        producer = ClientProcess("latency_producer", bootstrap=target.bootstrap,
                                 topic=topic, count=count, rate=rate)
        sent = producer.result(options.client_timeout)
        received = consumer.result(options.client_timeout)
        ended = time.time()
    finally:
        for client in (producer, consumer):
            if client is not None:
                client.stop()
    result = {"producer": sent, "window": [started, ended]}
    if "error" in received:
        result["error"] = received["error"]
    else:
        measured = [ms for ms in received["latencies_ms"][warmup:] if ms is not None]
        result.update(latency_summary(measured), received=received["received"],
                      errors=received["errors"], latencies_ms=received["latencies_ms"],
                      megabytes=received["received"] * 1024 / 1e6)
    topics.delete(topic)
    return result


def latency_summary(values: list[float]) -> dict:
    if not values:
        return {"measured": 0}
    ordered = sorted(values)

    def percentile(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]
    return {"measured": len(ordered), "p50_ms": percentile(50), "p95_ms": percentile(95),
            "p99_ms": percentile(99), "max_ms": ordered[-1],
            "mean_ms": statistics.fmean(ordered)}


def case_idempotence(targets, options, record) -> None:
    """1 KiB acks=all, plain vs idempotent producer, runs interleaved so that noise on the
    shared machine hits both alike; the table's ratio line compares their medians."""
    count = message_count(1024, options.scale)
    labels = {False: "produce 1 KiB acks=all, plain", True: "produce 1 KiB acks=all, idempotent"}
    cases = {(target.name, idempotent): record.begin(
                 "idempotence", label, broker=target.name, value_bytes=1024, acks="all",
                 messages=count, idempotent=idempotent, client=options.client_mode)
             for target in targets for idempotent, label in labels.items()}
    for _run in range(options.runs):
        for target in targets:
            for idempotent in labels:
                topic = target.topics.create(f"idem-{int(idempotent)}")
                result = run_client("produce", options.client_timeout,
                                    bootstrap=target.bootstrap, topic=topic, value_size=1024,
                                    count=count, acks="all",
                                    extra={"enable.idempotence": idempotent},
                                    defaults=options.client_defaults)
                record.add(target.annotate(result), None, cases[(target.name, idempotent)])
                target.topics.delete(topic)


def case_fsync(target, options, record) -> None:
    count = message_count(1024, options.scale)
    label = "produce 1 KiB acks=all, log.flush.policy=ack"
    case = record.begin("fsync", label, broker=target.name, value_bytes=1024, acks="all",
                        messages=count, client=options.client_mode)
    for run in range(options.runs):
        topic = target.topics.create("fsync")
        with profiled(target, options, f"fsync run{run + 1}") as profile:
            result = run_client("produce", options.client_timeout, bootstrap=target.bootstrap,
                                topic=topic, value_size=1024, count=count, acks="all",
                                defaults=options.client_defaults)
        record.add(target.annotate(result), profile, case)
        target.topics.delete(topic)


# -- results ----------------------------------------------------------------------------------

class Record:
    """Every raw run, grouped by case, as it will be written to JSON."""

    def __init__(self) -> None:
        self.cases: list[dict] = []

    def begin(self, case: str, label: str, **parameters) -> dict:
        print(f"{label} ({parameters.get('broker')}) ...", file=sys.stderr)
        self.cases.append({"case": case, "label": label, "parameters": parameters, "runs": []})
        return self.cases[-1]

    def add(self, result: dict, profile: Path | None, case: dict | None = None) -> None:
        """Add a run to ``case`` (default: the case begun last)."""
        if profile is not None and profile.exists():
            result["profile"] = {"path": str(profile), **summarize_profile(profile)}
        case = case or self.cases[-1]
        case["runs"].append(result)
        print(f"  {case['parameters'].get('broker')}: " + describe_run(result), file=sys.stderr)


def describe_run(result: dict) -> str:
    if "error" in result:
        return "FAILED: " + result["error"].strip().splitlines()[-1]
    parts = []
    if "msgs_per_s" in result:
        parts.append(f"{result['msgs_per_s']:,.0f} msgs/s, {result['mb_per_s']:.1f} MB/s "
                     f"in {result['seconds']:.2f} s")
    if "p50_ms" in result:
        parts.append(f"p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, "
                     f"max {result['max_ms']:.1f} ms")
    for key in ("undelivered", "failed"):
        if result.get(key):
            parts.append(f"{key} {result[key]}")
    if result.get("expected") not in (None, result.get("messages")):
        parts.append(f"expected {result['expected']}")
    if result.get("broker_cpu_percent") is not None:
        system = result.get("broker_system_share")
        parts.append(f"broker CPU {result['broker_cpu_percent']:.0f}%"
                     + (f" ({100 * system:.0f}% of it in the kernel)" if system is not None
                        else ""))
    if result.get("client_cpu_percent") is not None:
        parts.append(f"client CPU {result['client_cpu_percent']:.0f}%")
    return ", ".join(parts)


def median_range(values: list[float], fmt: str = ".1f") -> str:
    """"median (min-max)", each formatted with ``fmt``: how every table here shows runs."""
    return (f"{format(statistics.median(values), fmt)} "
            f"({format(min(values), fmt)}-{format(max(values), fmt)})")


def spread(values: list[float]) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(case: dict) -> dict:
    runs = [r for r in case["runs"] if "error" not in r]
    keys = ("msgs_per_s", "mb_per_s", "p50_ms", "p95_ms", "p99_ms", "max_ms",
            "broker_cpu_percent", "broker_cpu_s_per_mb", "client_cpu_percent",
            "broker_peak_rss_bytes")
    summary = {key: spread([r.get(key) for r in runs]) for key in keys}
    summary["failed_runs"] = len(case["runs"]) - len(runs)
    return {key: value for key, value in summary.items() if value is not None}


def print_tables(record: Record, brokers: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    def cell(summary: dict, key: str, fmt: str, scale: float = 1.0) -> str:
        s = summary.get(key)
        if s is None:
            return "-"
        return (f"{format(s['median'] / scale, fmt)} "
                f"[dim]({format(s['min'] / scale, fmt)}-{format(s['max'] / scale, fmt)})[/dim]")

    console = Console(width=max(shutil.get_terminal_size((150, 24)).columns, 120))
    throughput = Table(title="Throughput: median (min-max)", title_justify="left")
    for column in ("case", "msgs/s", "MB/s", "broker CPU %", "client CPU %", "broker RSS MB",
                   "failed"):
        throughput.add_column(column, justify="left" if column == "case" else "right")
    latency = Table(title="End-to-end latency, ms: median of runs (min-max)",
                    title_justify="left")
    for column in ("case", "p50", "p95", "p99", "max", "broker CPU %", "failed"):
        latency.add_column(column, justify="left" if column == "case" else "right")
    several = len({case["parameters"].get("broker") for case in record.cases}) > 1
    for case in record.cases:
        s = case["summary"]
        failed = str(s.get("failed_runs", 0))
        name = f"{case['label']}, {case['parameters'].get('broker')}" if several \
            else case["label"]
        if case["case"] == "latency":
            latency.add_row(name, *(cell(s, k, ".1f") for k in
                                               ("p50_ms", "p95_ms", "p99_ms", "max_ms")),
                            cell(s, "broker_cpu_percent", ".0f"), failed)
        else:
            throughput.add_row(name, cell(s, "msgs_per_s", ",.0f"),
                               cell(s, "mb_per_s", ".1f"), cell(s, "broker_cpu_percent", ".0f"),
                               cell(s, "client_cpu_percent", ".0f"),
                               cell(s, "broker_peak_rss_bytes", ".0f", 1e6), failed)
    if throughput.row_count:
        console.print(throughput)
    if latency.row_count:
        console.print(latency)
    for broker in brokers:
        if broker.get("peak_rss_bytes_sampled") is not None:
            console.print(f"broker [bold]{broker['name']}[/bold] peak RSS: "
                          f"{broker['peak_rss_bytes_sampled'] / 1e6:.0f} MB sampled "
                          f"(VmHWM {broker['peak_rss_bytes_vmhwm'] / 1e6:.0f} MB)")
    for case in record.cases:
        for number, run in enumerate(case["runs"], 1):
            profile = run.get("profile")
            if not profile or not profile["samples"]:
                continue
            console.print(f"\n[bold]py-spy: {case['label']} run {number}[/bold] "
                          f"({profile['samples']} samples, {profile['path']})")
            for name, _, share in profile["self"][:12]:
                console.print(f"  self {share:6.1%}  {name}")
            console.print("  hottest lines:")
            for name, _, share in profile["self_lines"][:6]:
                console.print(f"  self {share:6.1%}  {name}")


# -- oncelog against Apache Kafka -------------------------------------------------------------

def warm_up(targets, scale: float, timeout_s: float = 900.0) -> None:
    """One untimed 1 KiB acks=1 produce run per broker before any case: a fresh JVM runs
    interpreted and C1-compiled code for its first seconds, which would be measured as
    Kafka's figures in the first runs (seen at --scale 0.02: 421 ms p50 latency)."""
    for target in targets:
        topic = target.topics.create("warmup")
        result = run_client("produce", timeout_s, bootstrap=target.bootstrap, topic=topic,
                            value_size=1024, count=message_count(1024, scale), acks="1")
        print(f"  warm-up {target.name}: {describe_run(result)}", file=sys.stderr)
        target.topics.delete(topic)

# (summary key, column, format): what the side-by-side table compares, medians of runs.
COMPARED = (("mb_per_s", "MB/s", ".1f"), ("p50_ms", "p50 ms", ".1f"),
            ("p99_ms", "p99 ms", ".1f"), ("broker_cpu_s_per_mb", "CPU s/MB", ".4f"),
            ("broker_peak_rss_bytes", "RSS MB", ".0f"))


def compare(record: Record, ours: str = "oncelog", theirs: str = KAFKA_NAME) -> list[dict]:
    """Per case measured on both brokers: each compared figure's median for each, and the
    ratio ours/theirs (above 1 is better for oncelog in MB/s, worse in the others)."""
    by_key: dict[tuple, dict[str, dict]] = {}
    for case in record.cases:
        parameters = case["parameters"]
        key = (case["case"], case["label"])
        by_key.setdefault(key, {})[parameters.get("broker")] = case
    rows = []
    for (kind, label), cases in by_key.items():
        if ours not in cases or theirs not in cases:
            continue
        row: dict = {"case": kind, "label": label,
                     "client": cases[ours]["parameters"].get("client")}
        for key, _, _ in COMPARED:
            a = cases[ours]["summary"].get(key)
            b = cases[theirs]["summary"].get(key)
            if a is None and b is None:
                continue
            row[key] = {ours: a and a["median"], theirs: b and b["median"],
                        "ratio": (a["median"] / b["median"]) if a and b and b["median"]
                        else None}
        rows.append(row)
    return rows


def print_comparison(rows: list[dict], client_mode: str) -> None:
    """One line per case and figure (MB/s; p50 and p99 for latency), then the broker's CPU
    seconds per MB and peak RSS over the same runs, each as oncelog, Kafka, ratio."""
    if not rows:
        return
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"oncelog vs Apache Kafka {kafka_version()}, medians of runs; "
                        f"clients: {client_mode}; ratio = oncelog / Kafka",
                  title_justify="left")
    table.add_column("case")
    table.add_column("figure")
    for column in ("oncelog", "Kafka", "ratio", "CPU s/MB oncelog", "CPU s/MB Kafka",
                   "CPU ratio", "RSS MB oncelog", "RSS MB Kafka"):
        table.add_column(column, justify="right")

    def cells(figures: dict | None, fmt: str, scale: float = 1.0,
              ratio: bool = True) -> list[str]:
        figures = figures or {}
        values = [figures.get(who) for who in ("oncelog", KAFKA_NAME)]
        out = ["-" if v is None else format(v / scale, fmt) for v in values]
        if ratio:
            out.append("-" if figures.get("ratio") is None else f"{figures['ratio']:.2f}")
        return out
    for row in rows:
        per_mb = cells(row.get("broker_cpu_s_per_mb"), ".4f")
        rss = cells(row.get("broker_peak_rss_bytes"), ".0f", 1e6, ratio=False)
        for key, figure, fmt in COMPARED[:3]:
            if key in row:
                table.add_row(row["label"], figure, *cells(row[key], fmt), *per_mb, *rss)
    Console(width=max(shutil.get_terminal_size((160, 24)).columns, 160)).print(table)


def kafka_version() -> str:
    from oncelog.testing.apache_kafka import KAFKA_VERSION
    return KAFKA_VERSION


# -- main -------------------------------------------------------------------------------------

def print_idempotence_ratio(record: Record) -> None:
    medians: dict[str, dict[bool, float]] = {}
    for case in record.cases:
        if case["case"] == "idempotence" and case.get("summary", {}).get("mb_per_s"):
            medians.setdefault(case["parameters"]["broker"], {})[
                case["parameters"]["idempotent"]] = case["summary"]["mb_per_s"]["median"]
    for broker, pair in medians.items():
        if len(pair) == 2 and pair[False]:
            print(f"{broker}: idempotent / plain producer throughput (1 KiB, acks=all, "
                  f"medians): {pair[True] / pair[False]:.3f}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="Measure this broker instead of starting an oncelog broker.")
    parser.add_argument("--fsync-bootstrap", metavar="HOST:PORT",
                        help="With --bootstrap: a broker that fsyncs before acks=all, for the "
                             "fsync case (skipped otherwise).")
    parser.add_argument("--against-kafka", action="store_true",
                        help="Also start Apache Kafka (one node) and run every case against "
                             "both brokers in turn; prints a side-by-side table with ratios.")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="With --against-kafka: skip the untimed warm-up produce run "
                             "per broker (it lets Kafka's JIT compile before timing).")
    parser.add_argument("--client-defaults", action="store_true",
                        help="Clients at librdkafka's default settings instead of the tuned "
                             "ones (see README.md, Client settings).")
    parser.add_argument("--runs", type=int, default=3, help="Runs per case (default 3).")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="Multiply every message count (default 1.0; 0.1 for a quick run).")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"Comma-separated subset of {','.join(CASES)}.")
    parser.add_argument("--sizes", default="100,1024,16384",
                        help="Produce-case value sizes in bytes (default 100,1024,16384).")
    parser.add_argument("--acks", default=",".join(ACKS),
                        help="Produce-case acks values (default 0,1,all).")
    parser.add_argument("--latency-rate", type=float, default=2000.0,
                        help="Messages per second in the latency case (default 2000).")
    parser.add_argument("--latency-seconds", type=float, default=10.0,
                        help="Length of a latency run at scale 1 (default 10).")
    parser.add_argument("--data-dir", type=Path,
                        help="Where started brokers keep their data (default: a temp dir, "
                             "removed afterwards).")
    parser.add_argument("--output", type=Path, help="The JSON file (default "
                        "benchmarks/results/<timestamp>.json).")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="py-spy record the started broker during each measured run into "
                             "DIR (needs py-spy: pip install -e '.[bench]'). Perturbs figures.")
    parser.add_argument("--profile-native", action="store_true",
                        help="With --profile: include native (C) frames.")
    parser.add_argument("--profile-rate", type=int, default=250,
                        help="With --profile: samples per second (default 250).")
    parser.add_argument("--client-timeout", type=float, default=900.0,
                        help="Hang guard per client process, in seconds (default 900).")
    options = parser.parse_args(argv)
    options.cases = [c.strip() for c in options.cases.split(",") if c.strip()]
    unknown = set(options.cases) - set(CASES)
    if unknown:
        parser.error(f"unknown case(s) {', '.join(sorted(unknown))}; choose from "
                     f"{', '.join(CASES)}")
    options.sizes = [int(s) for s in options.sizes.split(",") if s.strip()]
    options.acks = [a.strip() for a in options.acks.split(",") if a.strip()]
    if set(options.acks) - set(ACKS) - {"-1"}:
        parser.error("--acks takes 0, 1, all")
    if options.runs < 1 or options.scale <= 0:
        parser.error("--runs must be at least 1 and --scale positive")
    if options.against_kafka and options.bootstrap:
        parser.error("--against-kafka starts both brokers itself; it does not take --bootstrap")
    options.client_mode = "librdkafka defaults" if options.client_defaults else "tuned"
    return options


def source_version() -> dict:
    """Which oncelog code the started brokers ran (they import what this process imports)."""
    import oncelog
    root = Path(oncelog.__file__).resolve().parent
    version = {"package": str(root)}
    try:
        version["commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, text=True,
                                           capture_output=True, check=True).stdout.strip()
        version["dirty"] = bool(subprocess.run(["git", "status", "--porcelain", "."], cwd=root,
                                               text=True, capture_output=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        pass  # not a git checkout (an installed package, or an exported snapshot)
    return version


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_id = f"{stamp}-{uuid.uuid4().hex[:6]}"
    output = options.output or HERE / "results" / f"{stamp}.json"
    own_dir = options.data_dir is None and options.bootstrap is None
    data_dir = (Path(tempfile.mkdtemp(prefix="oncelog-bench-")) if own_dir
                else options.data_dir)
    record = Record()
    brokers: list[dict] = []
    targets: list[Target] = []
    try:
        throughput_cases = [c for c in ("produce", "consume", "latency", "idempotence")
                            if c in options.cases]
        if throughput_cases:
            targets.append(Target("external", options.bootstrap) if options.bootstrap
                           else start_oncelog("oncelog", data_dir, {}))
            if options.against_kafka:
                from oncelog.testing.apache_kafka import KafkaUnavailable
                try:
                    targets.append(start_kafka(data_dir))
                except KafkaUnavailable as error:
                    print(str(error), file=sys.stderr)
                    return 1
            for target in targets:
                target.topics = Topics(target.bootstrap, run_id)
            if options.against_kafka and options.warmup:
                warm_up(targets, options.scale, options.client_timeout)
            for case in throughput_cases:
                globals()[f"case_{case}"](targets, options, record)
            while targets:
                brokers.append(targets.pop().close())
        if "fsync" in options.cases:
            if options.bootstrap and not options.fsync_bootstrap:
                print("fsync: skipped (with --bootstrap, give --fsync-bootstrap)",
                      file=sys.stderr)
            else:
                target = (Target("external-fsync", options.fsync_bootstrap)
                          if options.bootstrap
                          else start_oncelog("oncelog-flush-ack", data_dir,
                                             {"log.flush.policy": "ack"}))
                targets.append(target)
                target.topics = Topics(target.bootstrap, run_id)
                case_fsync(target, options, record)
                brokers.append(target.close())
                targets.remove(target)
    except KeyboardInterrupt:
        print("interrupted; writing what was measured", file=sys.stderr)
    finally:
        for target in targets:
            brokers.append(target.close())
        if own_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
    for case in record.cases:
        case["summary"] = summarize(case)
    comparison = compare(record) if options.against_kafka else []
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({
        "started": stamp, "argv": sys.argv[1:], "options": {
            k: (str(v) if isinstance(v, Path) else v) for k, v in vars(options).items()},
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count()},
        "oncelog": source_version(),
        "brokers": brokers, "cases": record.cases, "comparison": comparison}, indent=1))
    print_tables(record, brokers)
    print_idempotence_ratio(record)
    print_comparison(comparison, options.client_mode)
    print(f"raw runs: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
