"""Figures for network partitions (issue 31): how long producers wait when the network is
cut, per fault kind, and what a slow, lossy network between brokers costs.

    sudo .venv/bin/python benchmarks/partitions.py [--runs 3] [--cases ...]

Root on Linux with ``ip`` and ``nft`` (``make setup`` installs nftables): it starts, in a
temporary directory, an isolated cluster (``LocalCluster(isolated=True)``: three ZooKeeper
nodes and three brokers, each in a network namespace of its own on a bridge) and stops it at
the end, also on failure - its namespaces go with it.

- Unavailability, per fault kind: ``cluster.py``'s steady producer (1 KiB values at
  ``--rate``/s, acks=all, RF 3, ``min.insync.replicas=2``, from the root namespace; a request
  to a cut-off broker is given up after ``request.timeout.ms`` = 3 s) runs 2 s, then the
  network is cut for ``zookeeper.session.timeout.ms`` + 6 s - long enough for a cut-off
  leader's lease to run out and the others to elect a new one - then healed. Figure: the
  unavailability, the longest gap between two acknowledgements from the cut on (for the
  cuts that replace the leader: from its last acknowledged write to the new leader's
  first), next to the session + 1 s; and the first acknowledgement of a record sent after
  the cut. The next run waits for a full ISR on a fresh topic.

  | case | the cut |
  |---|---|
  | ``partition-leader`` | the partition's leader from everything, clients included |
  | ``leader-from-zookeeper`` | the leader from the three ZooKeeper nodes only: clients and followers still reach it |
  | ``split`` | the leader and the ZooKeeper ensemble's leader against the other brokers and ZooKeeper nodes (which elect a ZooKeeper leader first) |
  | ``cut-link`` | the leader's packets to one follower (directed): the follower leaves the ISR |
  | ``isolate-zookeeper`` | one ZooKeeper node of three, a follower of the ensemble: a minority |

- ``slow-net`` throughput: ``throughput.py``'s producer (1 KiB, acks=all into RF 3), on the
  healthy cluster and then with every two brokers 10 ms +- 5 ms apart with 1 % of packets
  lost (``cluster.isolation``'s ``slow``; the brokers are restarted once under it, one at a
  time, so their replication connections go through the delay relay - it delays only
  connections opened after it). Figure: the ratio of the two, interleaved run by run.

Medians of ``--runs`` with min-max; raw runs to ``benchmarks/results/partitions-<ts>.json``.
A measuring tool: nothing passes or fails.
"""  # noqa: E501 - a table's rows stay one line each

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

from cluster import VALUE_BYTES, ClusterTopics, SteadyProducer, gap_figures  # noqa: E402
from throughput import run_client, source_version, spread  # noqa: E402

UNAVAILABILITY = ("partition-leader", "leader-from-zookeeper", "split", "cut-link",
                  "isolate-zookeeper")
CASES = (*UNAVAILABILITY, "slow-net")
WARMUP_S = 2.0
CLIENT = {"request.timeout.ms": 3000, "socket.timeout.ms": 3000,
          "topic.metadata.refresh.interval.ms": 500, "metadata.max.age.ms": 1000}


def cut(kind: str, cluster, leader: int):
    """Apply one cut; returns the fault (to heal) and what was cut."""
    others = [n for n in cluster.brokers if n != leader]
    zookeepers = [n for n in cluster.network.nodes if n.startswith("zookeeper-")]
    if kind == "partition-leader":
        return cluster.isolate(leader)
    if kind == "leader-from-zookeeper":
        return cluster.cut_from_zookeeper(leader)
    if kind == "split":  # with the ensemble's leader: the other side elects a new one too
        theirs = f"zookeeper-{cluster.ensemble.leader() or 1}"
        return cluster.split([leader, theirs], [*others, *(z for z in zookeepers if z != theirs)])
    if kind == "cut-link":
        return cluster.cut(leader, others[0])
    ensemble = cluster.ensemble
    follower = ensemble.followers()[0] if ensemble.followers() else 1
    return cluster.isolate(f"zookeeper-{follower}")


def case_unavailability(kind: str, cluster, topics, options, record: list) -> None:
    case = {"case": kind, "runs": []}
    record.append(case)
    print(f"{kind} ...", file=sys.stderr)
    for _ in range(options.runs):
        topic = topics.create(kind.replace("-", ""))
        leader, isr, _controller = topics.partition(topic)
        producer = SteadyProducer(cluster.bootstrap, topic, options.rate, CLIENT)
        fault = None
        try:
            if not producer.wait_for_ack_of_record_sent_after(0.0, 60):
                raise RuntimeError("the steady producer got no acknowledgement within 60 s")
            time.sleep(WARMUP_S)
            fault = cut(kind, cluster, leader)
            cut_at = time.time()  # the rules are in place (writing them takes ~0.1 s)
            time.sleep(options.session_timeout_ms / 1000 + 6)
            recovered = producer.wait_for_ack_of_record_sent_after(cut_at, 60)
            cluster.heal(fault)
            fault = None
            time.sleep(1.0)
            result = producer.finish()
        finally:
            if fault is not None:
                cluster.heal(fault)
            producer.close()
        result = {"topic": topic, "leader": leader, "isr_before": isr, "cut_at": cut_at,
                  "recovered": recovered, **result}
        if "error" not in result:
            result.update(gap_figures(result, cut_at))
            result["acks"] = len(result["acks"])
        case["runs"].append(result)
        first = result.get("first_ack_sent_after_fault_ms")
        gap = result.get("longest_gap_ms")
        print(f"  {kind}: leader {leader}, unavailable {'-' if gap is None else round(gap)} "
              f"ms, first ack after the cut {'-' if first is None else round(first)} ms, "
              f"not acknowledged {result.get('not_acknowledged')}", file=sys.stderr)
        topics.wait_for_full_isr(topic)
        topics.delete(topic)


def case_slow_net(cluster, topics, options, record: list) -> None:
    case = {"case": "slow-net", "runs": []}
    record.append(case)
    print("slow-net ...", file=sys.stderr)
    count = max(1000, round(200_000 * options.scale))
    nodes = sorted(cluster.brokers)
    for _ in range(options.runs):
        run: dict = {}
        for state in ("healthy", "slow"):
            faults = []
            if state == "slow":
                faults = [cluster.slow(a, b, 10, 5, 1) for i, a in enumerate(nodes)
                          for b in nodes[i + 1:]]
                for node in nodes:  # replication connections through the relay
                    cluster.restart(node)
                    cluster.wait_for_brokers(set(nodes), 60)
            try:
                topic = topics.create(f"slow{state}")
                run[state] = run_client("produce", 900, bootstrap=cluster.bootstrap,
                                        topic=topic, value_size=VALUE_BYTES, count=count,
                                        acks="all", spread=False)
                topics.delete(topic)
            finally:
                for fault in faults:
                    cluster.heal(fault)
            if faults:
                for node in nodes:  # back to direct connections for the next run
                    cluster.restart(node)
                    cluster.wait_for_brokers(set(nodes), 60)
        if all("mb_per_s" in run[s] for s in run):
            run["ratio"] = run["slow"]["mb_per_s"] / run["healthy"]["mb_per_s"]
        case["runs"].append(run)
        print(f"  slow-net: healthy {run['healthy'].get('mb_per_s', 0):.1f} MB/s, slow "
              f"{run['slow'].get('mb_per_s', 0):.1f} MB/s, ratio {run.get('ratio', 0):.2f}",
              file=sys.stderr)


def print_table(record: list, options) -> None:
    target = options.session_timeout_ms + 1000
    print(f"\nmedian (min-max) of {options.runs} runs; ZooKeeper session "
          f"{options.session_timeout_ms} ms")
    for case in record:
        if case["case"] == "slow-net":
            ratio = spread([run.get("ratio") for run in case["runs"]])
            mb = spread([run["slow"].get("mb_per_s") for run in case["runs"]])
            healthy = spread([run["healthy"].get("mb_per_s") for run in case["runs"]])
            if ratio and mb and healthy:
                print(f"  slow-net (10±5 ms, 1% loss between brokers): {mb['median']:.1f} MB/s "
                      f"against {healthy['median']:.1f} healthy, ratio {ratio['median']:.2f} "
                      f"({ratio['min']:.2f}-{ratio['max']:.2f})")
            continue
        gap = spread([r.get("longest_gap_ms") for r in case["runs"]])
        first = spread([r.get("first_ack_sent_after_fault_ms") for r in case["runs"]])
        lost = spread([r.get("not_acknowledged") for r in case["runs"]])
        if gap is None or first is None:
            print(f"  {case['case']}: no run recovered")
            continue
        print(f"  {case['case']}: unavailable {gap['median']:,.0f} ms ({gap['min']:,.0f}-"
              f"{gap['max']:,.0f}), target <= {target:,} ms; first ack of a record sent "
              f"after the cut {first['median']:,.0f} ms; never acknowledged "
              f"{lost['median'] if lost else '-'}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="Runs per case (default 3).")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"Comma-separated subset of {','.join(CASES)}.")
    parser.add_argument("--session-timeout-ms", type=int, default=6000,
                        help="The cluster's zookeeper.session.timeout.ms (default 6000).")
    parser.add_argument("--rate", type=float, default=500.0,
                        help="Messages per second of the steady producer (default 500).")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="Multiply slow-net's message count, 200,000 x 1 KiB.")
    parser.add_argument("--output", type=Path, help="The JSON file (default "
                        "benchmarks/results/partitions-<timestamp>.json).")
    options = parser.parse_args(argv)
    options.cases = [c.strip() for c in options.cases.split(",") if c.strip()]
    if set(options.cases) - set(CASES) or options.runs < 1 or options.rate <= 0:
        parser.error(f"--cases takes a subset of {','.join(CASES)}; --runs >= 1, --rate > 0")
    return options


def main(argv: list[str] | None = None) -> int:
    from oncelog.cluster.isolation import missing_prerequisites
    from oncelog.cluster.local import LocalCluster
    options = parse_args(argv)
    missing = missing_prerequisites()
    if missing:
        print(f"partitions.py cuts a cluster in network namespaces, which needs "
              f"{', '.join(missing)}", file=sys.stderr)
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_id = f"{stamp}-{uuid.uuid4().hex[:6]}"
    output = options.output or HERE / "results" / f"partitions-{stamp}.json"
    data_dir = Path(tempfile.mkdtemp(prefix="oncelog-bench-partitions-"))
    settings = {"zookeeper.session.timeout.ms": str(options.session_timeout_ms),
                "replica.lag.time.max.ms": "3000", "unclean.leader.election.enable": "false"}
    record: list = []
    cluster = None
    try:
        cluster = LocalCluster(data_dir / "cluster", 3, settings=settings, isolated=True,
                               zookeepers=3)
        cluster.start()
        topics = ClusterTopics(cluster, run_id)
        for kind in UNAVAILABILITY:
            if kind in options.cases:
                case_unavailability(kind, cluster, topics, options, record)
        if "slow-net" in options.cases:
            case_slow_net(cluster, topics, options, record)
    except KeyboardInterrupt:
        print("interrupted; writing what was measured", file=sys.stderr)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({
        "started": stamp, "argv": sys.argv[1:], "options": {
            k: (str(v) if isinstance(v, Path) else v) for k, v in vars(options).items()},
        "cluster_settings": settings,
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "loadavg": os.getloadavg()},
        "oncelog": source_version(), "cases": record}, indent=1))
    print_table(record, options)
    print(f"raw runs: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
