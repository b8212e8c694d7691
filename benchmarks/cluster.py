"""Figures for the replicated cluster (issue 11): RF 3 throughput, and the gap producers see
when a leader dies (kill -9) or steps down (SIGTERM, controlled shutdown).

    .venv/bin/python benchmarks/cluster.py [--runs 3] [--scale 1.0] [--cases ...]
    .venv/bin/python benchmarks/cluster.py --set replica.fetch.wait.max.ms=100   # try a setting

It starts, in a temporary directory, one single broker (``BrokerProcess``, no ZooKeeper: the
embedded default of today) and one cluster (``LocalCluster``: a ZooKeeper and three brokers on
loopback), all on this machine, and stops every one of them at the end, also on failure.

- ``throughput``: per run, interleaved so that noise on the shared machine hits all alike:
  1 KiB values, ``acks=1`` and ``acks=all`` into the single broker, then ``acks=all`` into a
  topic of RF 3 with ``min.insync.replicas=2`` on the cluster. The producer is the one of
  ``throughput.py`` (``clients.produce``: same settings, same message count, own process),
  or with ``--client java`` the Apache Kafka Java client's with the same settings
  (``java/ProducerBench.java``, one JVM per run, warmed up with 100,000 untimed records).
- ``failover``: a producer sends 1 KiB values at ``--rate`` msg/s (acks=all, linger.ms=0);
  after 2 s the partition's leader is killed with SIGKILL. Figures: kill -> the first
  acknowledgement of a record *sent after the kill* (the new leader's first acknowledged
  produce), and the longest gap between successive acknowledgements around it.
- ``controlled``: the same producer; the leader gets SIGTERM (controlled shutdown: leadership
  moves away before it exits). Figure: the longest gap between successive acknowledgements.

``--against-kafka`` adds Apache Kafka to the throughput case, in the same run: a single
node and a 3-node KRaft cluster (``oncelog.testing.apache_kafka``, clients on the nodes' own
ports, Kafka's own JVM options), the same three producer runs against each, interleaved with
oncelog's run by run, and the ratio RF 3 acks=all / single acks=1 for each broker. With
``failover`` or ``controlled`` it then starts a 3-node Kafka of its own (broker sessions of
``--session-timeout-ms``, as long as oncelog's ZooKeeper sessions) and runs the same faults
on it, after oncelog's.

After each fault the broker is restarted and every run uses a fresh topic whose ISR is full
before the producer starts. Medians of ``--runs`` runs with min-max; raw runs go to
``benchmarks/results/cluster-<timestamp>.json``. A measuring tool: nothing passes or fails,
though the table shows each figure's target from the issue next to it. See README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import java_producer  # noqa: E402
from throughput import (SPAWN, BrokerMonitor, Topics, run_client,  # noqa: E402
                        settle_disk, source_version, spread, start_kafka, start_oncelog)

CASES = ("throughput", "failover", "controlled")
VALUE_BYTES = 1024
MESSAGES_AT_SCALE_1 = 1_000_000  # throughput.py's count for 1 KiB values
WARMUP_S = 2.0      # steady producing before the fault
SETTLE_S = 2.0      # steady producing after the first post-fault acknowledgement
GAP_WINDOW_S = 1.0  # gaps are looked for from this long before the fault onwards


# -- topics on the cluster ---------------------------------------------------------------------

class ClusterTopics(Topics):
    """``throughput.Topics`` with RF 3 and min.insync.replicas=2, and a view of the partition."""

    def __init__(self, cluster, run_id: str) -> None:
        super().__init__(cluster.bootstrap, run_id)
        self.cluster = cluster

    def create(self, purpose: str, partitions: int = 1) -> str:
        from confluent_kafka.admin import NewTopic
        self.serial += 1
        name = f"bench-{self.run_id}-{self.serial}-{purpose}"
        topic = NewTopic(name, num_partitions=partitions, replication_factor=3,
                         config={"min.insync.replicas": "2"})
        self.admin.create_topics([topic])[name].result(60)
        for index in range(partitions):
            self.wait_for_full_isr(name, index)
        return name

    def partition(self, topic: str, index: int = 0) -> tuple[int, list[int], int]:
        """(leader, isr, controller id) of a partition, asked of a running broker."""
        from confluent_kafka.admin import AdminClient
        running = [n for n in self.cluster.brokers if self.cluster.is_running(n)]
        admin = AdminClient({"bootstrap.servers": ",".join(
            self.cluster.broker(n).bootstrap for n in running)})
        metadata = admin.list_topics(topic, timeout=10)
        partition = metadata.topics[topic].partitions.get(index)
        if partition is None:
            return -1, [], metadata.controller_id
        return partition.leader, sorted(partition.isrs), metadata.controller_id

    def wait_for_full_isr(self, topic: str, index: int = 0, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        leader, isr = -1, []
        while time.monotonic() < deadline:
            try:
                leader, isr, _ = self.partition(topic, index)
            except Exception:  # noqa: BLE001 - a broker still starting; ask again
                leader, isr = -1, []
            if leader > 0 and len(isr) == 3:
                return
            time.sleep(0.1)
        raise TimeoutError(f"{topic}-{index}: ISR not full within {timeout_s:g} s "
                           f"(leader {leader}, isr {isr})")


class KafkaClusterView:
    """An ``ApacheKafka`` of several nodes, seen as ``ClusterTopics`` sees a
    ``LocalCluster``: its brokers' ids, whether each runs, each one's (direct) address."""

    def __init__(self, kafka) -> None:
        self.kafka = kafka
        self.brokers = kafka.node_ids
        self.bootstrap = kafka.direct_bootstrap

    def is_running(self, node_id: int) -> bool:
        return self.kafka.is_running(node_id)

    def broker(self, node_id: int):
        return self.kafka.nodes[node_id]

    # what case_fault does to a LocalCluster

    def kill(self, node_id: int) -> None:
        self.kafka.kill(node_id)

    def stop_broker(self, node_id: int) -> None:
        self.kafka.stop(node_id)  # SIGTERM: Kafka's controlled shutdown, as oncelog's

    def restart(self, node_id: int) -> None:
        self.kafka.restart(node_id)  # starts a stopped node; back once it serves

    def wait_for_brokers(self, node_ids: set[int], timeout_s: float) -> None:
        self.kafka.wait_for_brokers(sorted(node_ids), timeout_s)


def start_kafka_cluster(data_dir: Path, settings: dict[str, str] | None = None,
                        name: str = "apache-kafka-3"):
    """Apache Kafka, 3 KRaft nodes: RF 3 and min.insync.replicas=2 by the kit's settings,
    otherwise Kafka's defaults and its own JVM options, as ``throughput.start_kafka``."""
    from oncelog.testing.apache_kafka import KAFKA_SCRIPT_JVM_OPTIONS, ApacheKafka
    kafka = ApacheKafka(data_dir / name, 3, wire_faults=False, settings=settings,
                        jvm_options=KAFKA_SCRIPT_JVM_OPTIONS)
    return kafka.start()


# -- the steady producer (its own process) -------------------------------------------------

def steady_producer(connection, stop, acked_sent, bootstrap: str, topic: str, rate: float,
                    value_size: int, extra: dict | None = None) -> None:
    """Send ``rate`` values/s (acks=all, linger.ms=0) until ``stop``; report every
    acknowledgement as (sequence, send time, acknowledgement time), ``time.time()``, which the
    parent's fault timestamps share (same machine, same clock)."""
    import logging
    import traceback

    from clients import LATENCY_HEADER
    from confluent_kafka import Producer
    try:
        acks: list[tuple[int, float, float]] = []
        errors: list[tuple[float, str]] = []

        def on_delivery(error, message) -> None:
            now = time.time()
            if error is not None:
                errors.append((now, str(error)))
                return
            sequence, sent_ns = LATENCY_HEADER.unpack_from(message.value())
            acks.append((sequence, sent_ns / 1e9, now))
            if sent_ns / 1e9 > acked_sent.value:
                acked_sent.value = sent_ns / 1e9

        quiet = logging.getLogger("bench.librdkafka")
        quiet.setLevel(logging.CRITICAL)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                             "enable.idempotence": False, "compression.type": "none",
                             "message.timeout.ms": 120_000, "logger": quiet,
                             **(extra or {})})
        producer.list_topics(topic, timeout=30)
        padding = os.urandom(value_size - LATENCY_HEADER.size)
        interval = 1.0 / rate
        sequence = 0
        next_send = time.time()
        while not stop.is_set():
            now = time.time()
            if now >= next_send:
                value = LATENCY_HEADER.pack(sequence, time.time_ns()) + padding
                try:
                    producer.produce(topic, value, partition=0, on_delivery=on_delivery)
                except BufferError:
                    producer.poll(0.01)
                    continue
                sequence += 1
                next_send = max(next_send + interval, now - 0.1)  # no burst after a stall
            producer.poll(max(0.0, min(next_send - time.time(), 0.005)))
        remaining = producer.flush(60)
        connection.send({"sent": sequence, "acks": acks, "errors": errors[:50],
                         "error_count": len(errors), "undelivered": remaining})
    except BaseException:
        connection.send({"error": traceback.format_exc()})
    finally:
        connection.close()


class SteadyProducer:
    def __init__(self, bootstrap: str, topic: str, rate: float,
                 extra: dict | None = None) -> None:
        self.stop_event = SPAWN.Event()
        self.acked_sent = SPAWN.Value("d", 0.0, lock=False)
        self._receive, send = SPAWN.Pipe(duplex=False)
        self.process = SPAWN.Process(
            target=steady_producer, name="bench-steady-producer", daemon=True,
            args=(send, self.stop_event, self.acked_sent, bootstrap, topic, rate, VALUE_BYTES,
                  extra))
        self.process.start()
        send.close()

    def wait_for_ack_of_record_sent_after(self, moment: float, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.acked_sent.value > moment:
                return True
            if not self.process.is_alive():
                return False
            time.sleep(0.02)
        return False

    def finish(self, timeout_s: float = 90.0) -> dict:
        self.stop_event.set()
        try:
            if self._receive.poll(timeout_s):
                return self._receive.recv()
            return {"error": f"steady producer: no result within {timeout_s:g} s"}
        except EOFError:
            return {"error": f"steady producer exited with {self.process.exitcode}"}

    def close(self) -> None:
        self.stop_event.set()
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self._receive.close()


def gap_figures(result: dict, fault_at: float) -> dict:
    """What the producer saw around ``fault_at`` (seconds, time.time())."""
    acks = result["acks"]
    after = [acked for _, sent, acked in acks if sent >= fault_at]
    figures = {"first_ack_sent_after_fault_ms":
               (min(after) - fault_at) * 1000 if after else None}
    times = sorted(acked for _, _, acked in acks if acked >= fault_at - GAP_WINDOW_S)
    gaps = [(b - a, a) for a, b in zip(times, times[1:])]
    if gaps:
        gap, starts = max(gaps)
        figures["longest_gap_ms"] = gap * 1000
        figures["longest_gap_starts_after_fault_ms"] = (starts - fault_at) * 1000
    sequences = {sequence for sequence, _, _ in acks}
    figures["acknowledged"] = len(sequences)
    figures["not_acknowledged"] = result["sent"] - len(sequences)
    figures["acknowledged_twice"] = len(acks) - len(sequences)
    return figures


# -- the cases ---------------------------------------------------------------------------------

ONCELOG_LABELS = {"single-1": "single broker, 1 KiB acks=1",
                  "single-all": "single broker, 1 KiB acks=all",
                  "cluster-all": "RF 3 cluster, 1 KiB acks=all, min.insync.replicas=2"}
KAFKA_LABELS = {"kafka-single-1": "Apache Kafka single node, 1 KiB acks=1",
                "kafka-single-all": "Apache Kafka single node, 1 KiB acks=all",
                "kafka-cluster-all": "Apache Kafka RF 3, 1 KiB acks=all, min.insync.replicas=2"}


def case_throughput(single, cluster, cluster_topics, options, record,
                    kafka_single=None, kafka_cluster=None) -> None:
    """oncelog's three runs, then (``--against-kafka``) Kafka's three, within each run."""
    count = max(1, round(MESSAGES_AT_SCALE_1 * options.scale))
    labels = dict(ONCELOG_LABELS)
    if kafka_single is not None:
        labels.update(KAFKA_LABELS)
    cases = {key: record.begin("throughput", label, messages=count, value_bytes=VALUE_BYTES,
                               broker="apache-kafka" if key.startswith("kafka") else "oncelog")
             for key, label in labels.items()}
    singles = {"oncelog": single, "apache-kafka": kafka_single}
    single_topics = {name: Topics(target.bootstrap, options.run_id)
                     for name, target in singles.items() if target is not None}
    clusters = {"oncelog": (cluster, cluster_topics)}
    if kafka_cluster is not None:
        view = KafkaClusterView(kafka_cluster)
        clusters["apache-kafka"] = (view, ClusterTopics(view, options.run_id))
    java_classes = (java_producer.compile_bench(options.work_dir) if options.client == "java"
                    else None)
    monitors = {name: {n: BrokerMonitor(each.broker(n).pid).start() for n in each.brokers}
                for name, (each, _) in clusters.items()}
    try:
        for _run in range(options.runs):
            for key in labels:
                name = cases[key]["parameters"]["broker"]
                on_cluster = "cluster" in key
                target = singles[name]
                topics = clusters[name][1] if on_cluster else single_topics[name]
                topic = topics.create(key, options.partitions)
                leader = topics.partition(topic)[0] if on_cluster else None
                bootstrap = clusters[name][0].bootstrap if on_cluster else target.bootstrap
                acks = "all" if key.endswith("all") else "1"
                settle_disk()
                if java_classes is None:
                    result = run_client("produce", options.client_timeout, bootstrap=bootstrap,
                                        topic=topic, value_size=VALUE_BYTES, count=count,
                                        acks=acks, spread=options.partitions > 1)
                else:
                    result = java_producer.produce(
                        java_classes, topics, bootstrap=bootstrap, topic=topic, mode="plain",
                        count=count, value_size=VALUE_BYTES, per_transaction=count, acks=acks,
                        timeout_s=options.client_timeout)
                if on_cluster and "window" in result:
                    start, end = result["window"]
                    result["leader"] = leader
                    watched = monitors[name]
                    result["cluster_cpu_percent"] = sum(
                        m.cpu_percent(start, end) or 0 for m in watched.values())
                    result["leader_cpu_percent"] = watched[leader].cpu_percent(start, end)
                    cpu_seconds = sum(m.cpu_seconds(start, end) or 0 for m in watched.values())
                    if result.get("mb_per_s") and result.get("seconds"):
                        result["broker_cpu_s_per_mb"] = cpu_seconds / (result["mb_per_s"]
                                                                       * result["seconds"])
                else:
                    target.annotate(result)
                record.add(cases[key], result)
                topics.delete(topic)
    finally:
        for watched in monitors.values():
            for monitor in watched.values():
                monitor.stop()


def case_fault(kind: str, cluster, topics, options, record, broker: str = "oncelog") -> None:
    """``failover`` (SIGKILL the leader) or ``controlled`` (SIGTERM the leader), on oncelog's
    cluster or (``broker`` "apache-kafka") a ``KafkaClusterView``."""
    label = ("failover: leader kill -9" if kind == "failover"
             else "controlled shutdown: leader SIGTERM")
    if broker != "oncelog":
        label = f"Apache Kafka {label}"
    case = record.begin(kind, label, rate_per_s=options.rate, value_bytes=VALUE_BYTES,
                        session_timeout_ms=options.session_timeout_ms, broker=broker)
    for _ in range(options.runs):
        topic = topics.create(kind)
        leader, isr, controller = topics.partition(topic)
        producer = SteadyProducer(cluster.bootstrap, topic, options.rate)
        try:
            if not producer.wait_for_ack_of_record_sent_after(0.0, 60):
                raise RuntimeError("the steady producer got no acknowledgement within 60 s")
            time.sleep(WARMUP_S)
            fault_at = time.time()
            if kind == "failover":
                cluster.kill(leader)
            else:
                cluster.stop_broker(leader)
            fault_returned = time.time()
            recovered = producer.wait_for_ack_of_record_sent_after(
                fault_at, options.session_timeout_ms / 1000 * 3 + 30)
            time.sleep(SETTLE_S)
            result = producer.finish()
        finally:
            producer.close()
        result = {"topic": topic, "leader": leader, "isr_before": isr,
                  "controller_before": controller, "leader_was_controller": leader == controller,
                  "fault_at": fault_at, "fault_call_ms": (fault_returned - fault_at) * 1000,
                  "recovered": recovered, **result}
        if "error" not in result:
            result.update(gap_figures(result, fault_at))
            result["acks"] = len(result["acks"])  # the count in the JSON, not every tuple
        cluster.restart(leader)
        cluster.wait_for_brokers(set(cluster.brokers), 60)
        record.add(case, result)
        topics.delete(topic)


# -- results -----------------------------------------------------------------------------------

class Record:
    def __init__(self) -> None:
        self.cases: list[dict] = []

    def begin(self, case: str, label: str, **parameters) -> dict:
        print(f"{label} ...", file=sys.stderr)
        self.cases.append({"case": case, "label": label, "parameters": parameters, "runs": []})
        return self.cases[-1]

    def add(self, case: dict, result: dict) -> None:
        case["runs"].append(result)
        print(f"  {case['label']}: {describe(result)}", file=sys.stderr)


def describe(result: dict) -> str:
    if "error" in result:
        return "FAILED: " + result["error"].strip().splitlines()[-1]
    if "msgs_per_s" in result:
        text = (f"{result['msgs_per_s']:,.0f} msgs/s, {result['mb_per_s']:.1f} MB/s in "
                f"{result['seconds']:.2f} s")
        for key in ("broker_cpu_percent", "cluster_cpu_percent", "client_cpu_percent"):
            if result.get(key) is not None:
                text += f", {key.replace('_percent', '').replace('_', ' ')} {result[key]:.0f}%"
        if result.get("failed") or result.get("undelivered"):
            text += f", failed {result['failed']}, undelivered {result['undelivered']}"
        return text
    first = result.get("first_ack_sent_after_fault_ms")
    return (f"leader {result['leader']} (controller: {result['leader_was_controller']}), "
            f"first ack after fault {first if first is None else round(first)} ms, "
            f"longest gap {result.get('longest_gap_ms', float('nan')):.0f} ms, "
            f"not acknowledged {result['not_acknowledged']}, errors {result['error_count']}")


def summarize(case: dict) -> dict:
    runs = [r for r in case["runs"] if "error" not in r]
    keys = ("msgs_per_s", "mb_per_s", "broker_cpu_percent", "broker_cpu_s_per_mb",
            "cluster_cpu_percent",
            "leader_cpu_percent", "client_cpu_percent", "first_ack_sent_after_fault_ms",
            "longest_gap_ms", "not_acknowledged", "acknowledged_twice")
    summary = {key: spread([r.get(key) for r in runs]) for key in keys}
    summary["failed_runs"] = len(case["runs"]) - len(runs)
    return {key: value for key, value in summary.items() if value is not None}


def throughput_ratios(record: Record, labels: dict = ONCELOG_LABELS) -> dict | None:
    """RF 3 acks=all over single-broker acks=1: per run (same run) and of the medians."""
    by_label = {case["label"]: case for case in record.cases if case["case"] == "throughput"}
    single = by_label.get(labels.get("single-1") or labels["kafka-single-1"])
    rf3 = by_label.get(labels.get("cluster-all") or labels["kafka-cluster-all"])
    if not single or not rf3:
        return None
    per_run = [c["mb_per_s"] / s["mb_per_s"] for s, c in zip(single["runs"], rf3["runs"])
               if "mb_per_s" in s and "mb_per_s" in c]
    medians = (single["summary"].get("mb_per_s"), rf3["summary"].get("mb_per_s"))
    if not per_run or None in medians:
        return None
    return {"per_run": per_run, "per_run_spread": spread(per_run),
            "of_medians": medians[1]["median"] / medians[0]["median"]}


def print_table(record: Record, ratios: dict | None, options,
                kafka_ratios: dict | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    def cell(summary: dict, key: str, fmt: str) -> str:
        s = summary.get(key)
        if s is None:
            return "-"
        return (f"{format(s['median'], fmt)} "
                f"[dim]({format(s['min'], fmt)}-{format(s['max'], fmt)})[/dim]")

    console = Console(width=max(shutil.get_terminal_size((150, 24)).columns, 120))
    table = Table(title=f"Cluster figures ({options.client} producer, {options.partitions} "
                        f"partition(s) for throughput): "
                        f"median (min-max) of {options.runs} runs",
                  title_justify="left")
    for column in ("case", "figure", "median (min-max)", "target", "broker CPU %", "failed"):
        table.add_column(column, justify="left" if column in ("case", "figure") else "right")
    session = options.session_timeout_ms
    for case in record.cases:
        s, failed = case["summary"], str(case["summary"].get("failed_runs", 0))
        if case["case"] == "throughput":
            on_cluster = case["label"] in (ONCELOG_LABELS["cluster-all"],
                                           KAFKA_LABELS["kafka-cluster-all"])
            cpu = cell(s, "cluster_cpu_percent" if on_cluster else "broker_cpu_percent", ".0f")
            table.add_row(case["label"], "MB/s", cell(s, "mb_per_s", ".1f"), "", cpu, failed)
            table.add_row("", "msgs/s", cell(s, "msgs_per_s", ",.0f"), "", "", "")
            if "broker_cpu_s_per_mb" in s:
                table.add_row("", "brokers' CPU s per MB", cell(s, "broker_cpu_s_per_mb", ".4f"),
                              "", "", "")
        else:
            ours = case["parameters"].get("broker", "oncelog") == "oncelog"  # the targets
            if case["case"] == "failover":
                table.add_row(case["label"], "kill -> first ack of a record sent after, ms",
                              cell(s, "first_ack_sent_after_fault_ms", ",.0f"),
                              f"<= {session + 1000:,}" if ours else "", "", failed)
                table.add_row("", "longest gap between acks, ms",
                              cell(s, "longest_gap_ms", ",.0f"), "", "", "")
            else:
                table.add_row(case["label"], "longest gap between acks, ms",
                              cell(s, "longest_gap_ms", ",.0f"), "<= 500" if ours else "", "",
                              failed)
            table.add_row("", "records never acknowledged",
                          cell(s, "not_acknowledged", ".0f"), "", "", "")
    if ratios:
        spread_ = ratios["per_run_spread"]
        table.add_row("RF 3 acks=all / single acks=1", "ratio of medians (per-run range)",
                      f"{ratios['of_medians']:.2f} [dim]({spread_['min']:.2f}-"
                      f"{spread_['max']:.2f})[/dim]", ">= 0.5", "", "")
    if kafka_ratios:
        spread_ = kafka_ratios["per_run_spread"]
        table.add_row("Apache Kafka: RF 3 acks=all / single acks=1",
                      "ratio of medians (per-run range)",
                      f"{kafka_ratios['of_medians']:.2f} [dim]({spread_['min']:.2f}-"
                      f"{spread_['max']:.2f})[/dim]", "", "", "")
    console.print(table)
    console.print("README's single-broker figure (2026-11-22): 1 KiB acks=all, plain producer, "
                  "412 MB/s (median of 3).")


# -- main --------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="Runs per case (default 3).")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="Multiply the throughput message count, 1,000,000 x 1 KiB "
                             "(default 1.0).")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"Comma-separated subset of {','.join(CASES)}.")
    parser.add_argument("--session-timeout-ms", type=int, default=6000,
                        help="The cluster's zookeeper.session.timeout.ms (default 6000).")
    parser.add_argument("--rate", type=float, default=1000.0,
                        help="Messages per second of the steady producer (default 1000).")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="Another broker setting for the cluster's brokers (repeatable), "
                             "e.g. replica.fetch.wait.max.ms=100.")
    parser.add_argument("--output", type=Path, help="The JSON file (default "
                        "benchmarks/results/cluster-<timestamp>.json).")
    parser.add_argument("--data-dir", type=Path,
                        help="Keep the brokers' data and logs here (default: a temp dir, "
                             "removed afterwards).")
    parser.add_argument("--partitions", type=int, default=1,
                        help="Partitions of the throughput case's topics, single broker and "
                             "cluster alike (default 1); with more, librdkafka's sticky "
                             "partitioner spreads the batches (the Java client: partition 0).")
    parser.add_argument("--client", choices=("confluent", "java"), default="confluent",
                        help="The throughput case's producer: confluent-kafka's (librdkafka, "
                             "default) or the Apache Kafka Java client's.")
    parser.add_argument("--client-timeout", type=float, default=900.0,
                        help="Hang guard per throughput client process, s (default 900).")
    parser.add_argument("--against-kafka", action="store_true",
                        help="Throughput case: also Apache Kafka, one node and three (RF 3), "
                             "runs interleaved with oncelog's; prints Kafka's own ratio. "
                             "Fault cases: the same faults on a 3-node Kafka afterwards, its "
                             "broker sessions as long as oncelog's ZooKeeper sessions.")
    options = parser.parse_args(argv)
    options.cases = [c.strip() for c in options.cases.split(",") if c.strip()]
    if set(options.cases) - set(CASES):
        parser.error(f"--cases takes a subset of {','.join(CASES)}")
    if options.runs < 1 or options.scale <= 0 or options.rate <= 0 or options.partitions < 1:
        parser.error("--runs and --partitions must be at least 1, --scale and --rate "
                     "positive")
    try:
        options.settings = dict(item.split("=", 1) for item in options.set)
    except ValueError:
        parser.error("--set takes KEY=VALUE")
    return options


def main(argv: list[str] | None = None) -> int:
    from oncelog.cluster.local import LocalCluster
    options = parse_args(argv)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    options.run_id = f"{stamp}-{uuid.uuid4().hex[:6]}"
    output = options.output or HERE / "results" / f"cluster-{stamp}.json"
    own_dir = options.data_dir is None
    data_dir = (Path(tempfile.mkdtemp(prefix="oncelog-bench-cluster-")) if own_dir
                else options.data_dir)
    settings = {"zookeeper.session.timeout.ms": str(options.session_timeout_ms),
                **options.settings}
    options.work_dir = data_dir
    record = Record()
    single = cluster = kafka_single = kafka_cluster = None
    try:
        cluster = LocalCluster(data_dir / "cluster", 3, settings=settings)
        cluster.start()
        topics = ClusterTopics(cluster, options.run_id)
        if "throughput" in options.cases:
            single = start_oncelog("single", data_dir, {})
            if options.against_kafka:
                from oncelog.testing.apache_kafka import KafkaUnavailable
                try:
                    kafka_single = start_kafka(data_dir)
                    kafka_cluster = start_kafka_cluster(data_dir)
                except KafkaUnavailable as error:
                    print(str(error), file=sys.stderr)
                    return 1
            case_throughput(single, cluster, topics, options, record, kafka_single,
                            kafka_cluster)
            for started in (single, kafka_single, kafka_cluster):
                if started is not None:
                    started.close()  # idle JVMs would share the CPU with the fault cases
            single = kafka_single = kafka_cluster = None
        faults = [kind for kind in ("failover", "controlled") if kind in options.cases]
        for kind in faults:
            case_fault(kind, cluster, topics, options, record)
        if faults and options.against_kafka:
            # oncelog's cluster idles meanwhile; Kafka's brokers are fenced after the same
            # session as oncelog's ZooKeeper sessions (Kafka's default is 9 s)
            kafka_cluster = start_kafka_cluster(data_dir, {
                "broker.session.timeout.ms": str(options.session_timeout_ms)},
                name="apache-kafka-faults")
            view = KafkaClusterView(kafka_cluster)
            for kind in faults:
                case_fault(kind, view, ClusterTopics(view, options.run_id), options, record,
                           broker="apache-kafka")
    except KeyboardInterrupt:
        print("interrupted; writing what was measured", file=sys.stderr)
    finally:
        if single is not None:
            single.close()
        if kafka_single is not None:
            kafka_single.close()
        if kafka_cluster is not None:
            kafka_cluster.close()
        if cluster is not None:
            cluster.stop()
        if own_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
    for case in record.cases:
        case["summary"] = summarize(case)
    ratios = throughput_ratios(record)
    kafka_ratios = throughput_ratios(record, KAFKA_LABELS) if options.against_kafka else None
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({
        "started": stamp, "argv": sys.argv[1:],
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(options).items()},
        "cluster_settings": settings,
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "loadavg": os.getloadavg()},
        "oncelog": source_version(), "ratios": ratios, "kafka_ratios": kafka_ratios,
        "cases": record.cases}, indent=1))
    print_table(record, ratios, options, kafka_ratios)
    print(f"raw runs: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
