"""Figures for transactions (issue 12), on one broker this script starts:

    .venv/bin/python benchmarks/transactions.py [--runs 3] [--scale 1.0] [--client java]
    .venv/bin/python benchmarks/transactions.py --against-kafka   # and Apache Kafka, side by side

Per run, interleaved so that noise on the shared machine hits all alike, 1 KiB values to a
fresh one-partition topic each:

- ``plain``: ``throughput.py``'s producer (acks=all, no idempotence);
- ``idempotent``: the same with ``enable.idempotence`` (what a transactional producer is,
  plus transactions);
- ``plain_flushed`` and ``idempotent_flushed``: those two producers waiting for every record's
  acknowledgement after each 1,000 (``flush()``): the drain of the client's pipeline that
  every commit has, without a transaction - what separates the cost of committing (the
  broker's) from the cost of waiting (the client's);
- ``transactional``: the same values in transactions of 1,000 records, each committed
  (``clients.transactional_produce``); every ``commit_transaction`` call is timed;
- ``read_committed`` and ``read_uncommitted`` consumers over the transactional topic, which
  of them first alternating from run to run.

With ``--client java`` the producers are the Apache Kafka Java client's (kafka-clients 3.9.1,
``java/ProducerBench.java``, one JVM per case, warmed up with 100,000 untimed records of the
same case first): ``plain``, ``idempotent`` and ``transactional`` with the same settings
(``--batch-size`` and ``--linger-ms``, by default the client's own: 16,384 bytes and 0 ms in
kafka-clients 3.9, what a Java application gets unless it tunes them; the Java producer has
no ``flush_every`` cases); the consumers stay confluent-kafka's. The same
broker path, another client: what separates the broker's cost of transactions from one
client library's. With large batches (``--batch-size 1000000 --linger-ms 10``) the plain
producer goes ~4x faster and the Java client's own CPU dominates on a small machine (see
the CPU lines printed).

Printed: medians (min-max) of MB/s, the ratios transactional / plain and transactional /
idempotent, commit latency p50 and p99 over all commits of all runs, and read_committed /
read_uncommitted. Then, per producer case, the CPU that each MB cost the client process and
the broker (their CPU time over the timed window): when the two together keep every core of
the machine busy, the run is bound by CPU, and plain's CPU per MB over transactional's is
the most the ratio can reach on that machine, whatever the waits. Raw runs go to
``benchmarks/results/transactions-<timestamp>.json``. A measuring tool: nothing passes or
fails here; the targets of the issue are shown beside.

``--against-kafka`` starts Apache Kafka (one node, as ``throughput.py --against-kafka``:
direct, its defaults with replication factor 1, its own JVM options) next to oncelog, runs
every case against both in turn within each run, prints both brokers' figures and a
side-by-side of the medians with the ratio oncelog / Kafka.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import java_producer  # noqa: E402
from throughput import (KAFKA_NAME, Topics, median_range, run_client,  # noqa: E402
                        settle_disk, start_kafka, start_oncelog, warm_up)

VALUE_BYTES = 1024
MESSAGES_AT_SCALE_1 = 1_000_000
PER_TRANSACTION = 1000
CLIENT_TIMEOUT_S = 600


def confluent_cases(bootstrap: str, topics: Topics, count: int, run: int) -> dict:
    """confluent-kafka's producer runs, the transactional one last; its topic is kept (under
    ``"topic"``) for the consumers."""
    figures = {}
    for name, extra, flush_every in (
            ("plain", {}, 0), ("idempotent", {"enable.idempotence": True}, 0),
            ("plain_flushed", {}, PER_TRANSACTION),
            ("idempotent_flushed", {"enable.idempotence": True}, PER_TRANSACTION)):
        topic = topics.create(name)
        settle_disk()
        figures[name] = run_client("produce", CLIENT_TIMEOUT_S, bootstrap=bootstrap,
                                   topic=topic, value_size=VALUE_BYTES, count=count, acks="all",
                                   extra=extra, flush_every=flush_every)
        topics.delete(topic)
    topic = topics.create("transactional")
    settle_disk()
    figures["transactional"] = run_client(
        "transactional_produce", CLIENT_TIMEOUT_S, bootstrap=bootstrap, topic=topic,
        value_size=VALUE_BYTES, count=count, per_transaction=PER_TRANSACTION,
        transactional_id=f"bench-{run}")
    figures["transactional"]["topic"] = topic
    return figures


def java_cases(classes: Path, bootstrap: str, topics: Topics, count: int,
               settings: dict[str, str]) -> dict:
    """The Java producer's plain, idempotent and transactional runs, in the same shape."""
    figures = {}
    for mode in ("plain", "idempotent", "transactional"):
        topic = topics.create(mode)
        settle_disk()
        figures[mode] = java_producer.produce(
            classes, topics, bootstrap=bootstrap, topic=topic, mode=mode, count=count,
            value_size=VALUE_BYTES, per_transaction=PER_TRANSACTION, timeout_s=CLIENT_TIMEOUT_S,
            settings=settings)
        if mode == "transactional":
            figures[mode]["topic"] = topic
        else:
            topics.delete(topic)
    return figures


def cpu_ms_per_mb(result: dict) -> tuple[float, float] | None:
    """(client, broker) CPU milliseconds per MB produced, over the timed window."""
    if result.get("broker_cpu_percent") is None or result.get("client_cpu_percent") is None:
        return None
    seconds_per_mb = 1 / result["mb_per_s"]
    return (10 * result["client_cpu_percent"] * seconds_per_mb,
            10 * result["broker_cpu_percent"] * seconds_per_mb)


def print_cpu(runs: list[dict]) -> None:
    """Each producer case's CPU per MB (medians over runs), and the bound it sets."""
    cores = os.cpu_count() or 1
    print(f"\nCPU per MB produced (client process + broker), medians; {cores} cores:")
    totals = {}
    for name in ("plain", "idempotent", "plain_flushed", "idempotent_flushed",
                 "transactional"):
        measured = [r[name] for r in runs if name in r and cpu_ms_per_mb(r[name])]
        if not measured:
            continue
        client = statistics.median(cpu_ms_per_mb(r)[0] for r in measured)
        broker = statistics.median(cpu_ms_per_mb(r)[1] for r in measured)
        busy = statistics.median((r["client_cpu_percent"] + r["broker_cpu_percent"]) / cores
                                 for r in measured)
        totals[name] = client + broker
        print(f"  {name:19} client {client:5.2f} ms + broker {broker:5.2f} ms = "
              f"{client + broker:5.2f} ms; the cores {busy:.0f}% busy")
    if "plain" in totals and "transactional" in totals:
        ceiling = totals["plain"] / totals["transactional"]
        print(f"  plain / transactional CPU per MB  {ceiling:.2f}   "
              "(the ratio's ceiling while the cores are saturated)")


def _client_default_or_int(text: str) -> int | str:
    return text if text == "client" else int(text)


def _setting(value: int | str, client_default: int) -> str:
    return f"{client_default:,} (the client's default)" if value == "client" else f"{value:,}"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(target, topics: Topics, java_classes: Path | None, options, count: int,
            run: int) -> dict:
    """One run's producer and consumer cases against one broker."""
    if java_classes is None:
        figures = confluent_cases(target.bootstrap, topics, count, run)
    else:
        figures = java_cases(java_classes, target.bootstrap, topics, count,
                             {"batch.size": str(options.batch_size),
                              "linger.ms": str(options.linger_ms)})
    topic = figures["transactional"].pop("topic")
    # Read in a fixed order, single runs gave ratios of 0.86-1.03; eight reads of
    # one topic in alternating order, medians of 404 and 406 MB/s. Alternate it.
    isolations = ("read_uncommitted", "read_committed")
    for isolation in (isolations if run % 2 == 0 else isolations[::-1]):
        figures[isolation] = run_client(
            "consume_isolated", CLIENT_TIMEOUT_S, bootstrap=target.bootstrap,
            topic=topic, isolation=isolation, expected=count)
    topics.delete(topic)
    for result in figures.values():
        target.annotate(result)
    return figures


def report(name: str, runs: list[dict], options, count: int) -> dict:
    """Print one broker's figures; return its medians for the side-by-side."""
    rates = {case: [r[case]["mb_per_s"] for r in runs] for case in runs[0]}
    commits = [ms for r in runs for ms in r["transactional"]["commit_ms"]]
    ratio = lambda a, b: statistics.median(rates[a]) / statistics.median(rates[b])  # noqa: E731
    batching = (f", batch.size {_setting(options.batch_size, 16384)}, linger.ms "
                f"{_setting(options.linger_ms, 0)}" if options.client == "java" else "")
    print(f"\n{name}: {options.client} producers, 1 KiB values, {count:,} per run, "
          f"transactions of {PER_TRANSACTION:,}{batching}; median (min-max) of "
          f"{options.runs} runs")
    for case, values in rates.items():
        print(f"  {case:19} {median_range(values)} MB/s")
    print(f"  transactional / plain       {ratio('transactional', 'plain'):.2f}   target >= 0.8")
    print(f"  transactional / idempotent  {ratio('transactional', 'idempotent'):.2f}")
    if "plain_flushed" in rates:
        print(f"  plain_flushed / plain       {ratio('plain_flushed', 'plain'):.2f}   "
              "(the drain alone, no transaction)")
        print(f"  transactional / idempotent_flushed  "
              f"{ratio('transactional', 'idempotent_flushed'):.2f}   "
              "(the transactions' own cost)")
    print(f"  commit latency p50 {percentile(commits, 0.5):.1f} ms, p99 "
          f"{percentile(commits, 0.99):.1f} ms over {len(commits):,} commits   "
          "target p99 <= 20 ms")
    print(f"  read_committed / read_uncommitted  "
          f"{ratio('read_committed', 'read_uncommitted'):.2f}   target >= 0.9")
    print_cpu(runs)
    medians = {f"{case} MB/s": statistics.median(values) for case, values in rates.items()}
    medians["transactional / plain"] = ratio("transactional", "plain")
    medians["commit p50 ms"] = percentile(commits, 0.5)
    medians["commit p99 ms"] = percentile(commits, 0.99)
    return medians


def print_side_by_side(medians: dict[str, dict]) -> dict:
    """Each figure for oncelog and Kafka, and the ratio oncelog / Kafka."""
    ours, theirs = medians["oncelog"], medians[KAFKA_NAME]
    print("\noncelog vs Apache Kafka (same run, runs interleaved), medians; "
          "ratio = oncelog / Kafka")
    print(f"  {'figure':32} {'oncelog':>10} {'Kafka':>10} {'ratio':>7}")
    rows = {}
    for figure, value in ours.items():
        other = theirs.get(figure)
        ratio = value / other if other else None
        rows[figure] = {"oncelog": value, KAFKA_NAME: other, "ratio": ratio}
        print(f"  {figure:32} {value:10.2f} "
              f"{'-' if other is None else format(other, '.2f'):>10} "
              f"{'-' if ratio is None else format(ratio, '.2f'):>7}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--client", choices=("confluent", "java"), default="confluent",
                        help="whose producer: confluent-kafka's (librdkafka) or the Java client's")
    parser.add_argument("--batch-size", type=_client_default_or_int, default="client",
                        help="the Java producers' batch.size in bytes, or 'client' (default: "
                             "the client's own, 16384)")
    parser.add_argument("--linger-ms", type=_client_default_or_int, default="client",
                        help="the Java producers' linger.ms, or 'client' (default: the "
                             "client's own, 0)")
    parser.add_argument("--against-kafka", action="store_true",
                        help="also Apache Kafka (one node, as throughput.py --against-kafka), "
                             "runs interleaved; prints both and the ratios oncelog / Kafka")
    options = parser.parse_args(argv)
    count = max(PER_TRANSACTION, round(MESSAGES_AT_SCALE_1 * options.scale))
    runs: dict[str, list[dict]] = {}
    brokers = []
    with tempfile.TemporaryDirectory(prefix="oncelog-bench-txn-") as directory:
        targets = [start_oncelog("oncelog", Path(directory), {})]
        try:
            if options.against_kafka:
                from oncelog.testing.apache_kafka import KafkaUnavailable
                try:
                    targets.append(start_kafka(Path(directory)))
                except KafkaUnavailable as error:
                    print(str(error), file=sys.stderr)
                    return 1
            topics = {t.name: Topics(t.bootstrap, uuid.uuid4().hex[:8]) for t in targets}
            if options.against_kafka:
                targets[-1].topics = topics[KAFKA_NAME]
                warm_up([targets[-1]], options.scale)  # Kafka's JIT, before timing
            java_classes = (java_producer.compile_bench(Path(directory))
                            if options.client == "java" else None)
            for run in range(options.runs):
                for target in targets:
                    figures = measure(target, topics[target.name], java_classes, options,
                                      count, run)
                    for name, result in figures.items():
                        if "error" in result:
                            print(f"{target.name} run {run + 1}: {name} failed: "
                                  f"{result['error']}")
                            return 1
                        print(f"{target.name} run {run + 1}: {name}: "
                              f"{result['mb_per_s']:.1f} MB/s")
                    runs.setdefault(target.name, []).append(figures)
        finally:
            while targets:
                brokers.append(targets.pop().close())
    medians = {name: report(name, broker_runs, options, count)
               for name, broker_runs in runs.items()}
    side_by_side = print_side_by_side(medians) if options.against_kafka else None
    out = HERE / "results" / f"transactions-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"options": vars(options), "count": count,
                               "runs": runs["oncelog"], "brokers": brokers,
                               "broker": brokers[-1], "kafka_runs": runs.get(KAFKA_NAME),
                               "medians": medians, "comparison": side_by_side},
                              indent=1, default=str))
    print(f"raw runs: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
