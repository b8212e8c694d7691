"""Consumer groups: how fast a group recovers from a member leaving, and how many offset
commits per second one client gets acknowledged. Measured with confluent-kafka.

    .venv/bin/python benchmarks/groups.py [--runs 3] [--cases rebalance commits]
    .venv/bin/python benchmarks/groups.py --bootstrap HOST:PORT       # any Kafka broker
    .venv/bin/python benchmarks/groups.py --against-kafka             # and Apache Kafka

Without ``--bootstrap`` it starts an oncelog broker (``BrokerProcess``) in a temporary
directory, with ``group.initial.rebalance.delay.ms=0`` so that each run's group forms at
once (forming is not what is measured), and stops it by pid at the end, also on failure.
Every client runs in its own process (multiprocessing, spawn; see ``group_clients.py``).
The table shows the median of ``--runs`` runs and the min-max; raw runs go to
``benchmarks/results/groups-<timestamp>.json``. Nothing here passes or fails on a figure.
See README.md for what each case measures and how to read it.

``--against-kafka`` also starts Apache Kafka (one node, as ``throughput.py
--against-kafka``), runs each case's runs against both brokers in turn, and prints a
side-by-side of the medians with the ratio oncelog / Kafka.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import queue
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
SPAWN = multiprocessing.get_context("spawn")

from throughput import KAFKA_NAME, start_kafka  # noqa: E402

CASES = ("rebalance", "commits")
MEMBERS = 4  # one leaves; the group must be stable again with the other three
PARTITIONS = 12


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


# -- rebalance ---------------------------------------------------------------------------------

def rebalance_run(bootstrap: str, heartbeat_ms: int, session_ms: int) -> dict:
    """Four members share a topic; one leaves (LeaveGroup). Times, from the leave:
    - notice: until the last survivor is told to rejoin (its next heartbeat), seen as its
      revoke callback;
    - rejoin: from that moment until every survivor has its new assignment: JoinGroup,
      the leader's assignment, SyncGroup — the broker's share of the rebalance;
    - stable: the whole, until the group of three has its assignment."""
    topic, group = f"bench-rebalance-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    events, processes, commands = SPAWN.Queue(), [], []
    try:
        for index in range(MEMBERS):
            command = SPAWN.Queue()
            process = SPAWN.Process(target=_member_entry, args=(
                bootstrap, group, topic, index, heartbeat_ms, session_ms, events, command))
            process.start()
            processes.append(process)
            commands.append(command)
        owned: dict[int, list[int]] = {}
        _wait_for(events, owned, set(range(MEMBERS)), 60)
        time.sleep(1.0)  # settled: no rebalance in flight
        commands[0].put("leave")
        survivors = set(range(1, MEMBERS))
        left_at = None
        revoked: dict[int, float] = {}
        assigned: dict[int, float] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and set(assigned) != survivors:
            kind, index, at, partitions = events.get(timeout=60)
            if kind == "leave":
                left_at = at
            elif left_at is not None and kind == "revoke" and index in survivors:
                revoked[index] = at
            elif left_at is not None and kind == "assign" and index in survivors:
                assigned[index] = at
                owned[index] = partitions
        if set(assigned) != survivors:
            raise RuntimeError("the group did not stabilise within 60 s after the leave")
        covered = sorted(p for index in survivors for p in owned[index])
        notice = max(revoked.values()) - left_at
        stable = max(assigned.values()) - left_at
        return {"notice_ms": notice * 1000, "rejoin_ms": (stable - notice) * 1000,
                "stable_ms": stable * 1000, "partitions_covered": covered == list(
                    range(PARTITIONS)), "heartbeat_ms": heartbeat_ms}
    finally:
        for command in commands[1:]:
            command.put("leave")
        for process in processes:
            process.join(15)
            if process.is_alive():
                process.kill()


def _member_entry(*args) -> None:
    import group_clients
    group_clients.member(*args)


def _wait_for(events, owned: dict, members: set, timeout: float) -> None:
    """Until every member holds its share of the partitions."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kind, index, _, partitions = events.get(timeout=1)
        except queue.Empty:
            continue
        if kind == "assign":
            owned[index] = partitions
        elif kind == "revoke":
            owned.pop(index, None)
        if set(owned) == members and sorted(p for ps in owned.values() for p in ps) == list(
                range(PARTITIONS)):
            return
    raise RuntimeError(f"the {len(members)} members did not share the topic within {timeout} s")


# -- commits ----------------------------------------------------------------------------------

def commits_run(bootstrap: str, count: int, mode: str) -> dict:
    topic, group = f"bench-commits-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    receive, send = SPAWN.Pipe(duplex=False)
    process = SPAWN.Process(target=_client_entry, args=(
        send, "committer", {"bootstrap": bootstrap, "group": group, "topic": topic,
                            "count": count, "mode": mode}))
    process.start()
    try:
        if not receive.poll(180):
            raise RuntimeError("the committing client did not finish within 180 s")
        result = receive.recv()
    finally:
        process.join(15)
        if process.is_alive():
            process.kill()
    if "error" in result:
        raise RuntimeError(result["error"])
    if result["last_committed"] != count:
        raise RuntimeError(f"last committed offset {result['last_committed']}, expected {count}")
    return result


def _client_entry(connection, name: str, kwargs: dict) -> None:
    import group_clients
    group_clients.run(connection, name, kwargs)


# -- the table ----------------------------------------------------------------------------------

def summarise(label: str, runs: list[dict], key: str, unit: str) -> str:
    values = [run[key] for run in runs]
    return (f"{label:<44} {statistics.median(values):>10.1f} {unit:<9} "
            f"({min(values):.1f}-{max(values):.1f})")


FIGURES = (("rebalance", "notice_ms", "leave -> last survivor told to rejoin", "ms"),
           ("rebalance", "rejoin_ms", "rejoin -> all three assigned (broker part)", "ms"),
           ("rebalance", "stable_ms", "leave -> group of three stable", "ms"),
           ("commits-sync", "commits_per_s", "commits from one client, sync", "commits/s"),
           ("commits-async", "commits_per_s", "commits from one client, async", "commits/s"))


def measure(bootstrap: str, case: str, args) -> dict[str, dict]:
    """One run of ``case`` against one broker: {result key: outcome}."""
    if case == "rebalance":
        return {"rebalance": rebalance_run(bootstrap, args.heartbeat_ms, args.session_ms)}
    return {f"commits-{mode}": commits_run(bootstrap, args.commits, mode)
            for mode in ("sync", "async")}


def print_broker(name: str, results: dict[str, list[dict]], args) -> None:
    print(f"\nmedians of {args.runs} runs (min-max); broker {name}")
    if "rebalance" in results:
        print(f"rebalance: {MEMBERS} members, {PARTITIONS} partitions, one leaves; "
              f"heartbeat.interval.ms={args.heartbeat_ms}, eager range assignor")
    for key, figure, label, unit in FIGURES:
        if key in results:
            indent = "  " if key == "rebalance" else ""
            print(summarise(f"{indent}{label}", results[key], figure, unit))


def side_by_side(results: dict[str, dict[str, list[dict]]]) -> list[dict]:
    """Each figure's median for oncelog and Kafka, and the ratio oncelog / Kafka."""
    rows = []
    print("\noncelog vs Apache Kafka (same run, runs interleaved), medians; "
          "ratio = oncelog / Kafka")
    for key, figure, label, unit in FIGURES:
        if key not in results["oncelog"] or key not in results[KAFKA_NAME]:
            continue
        ours = statistics.median(run[figure] for run in results["oncelog"][key])
        theirs = statistics.median(run[figure] for run in results[KAFKA_NAME][key])
        ratio = ours / theirs if theirs else None
        rows.append({"figure": label, "unit": unit, "oncelog": ours, KAFKA_NAME: theirs,
                     "ratio": ratio})
        print(f"  {label:44} {ours:10.1f} {theirs:10.1f} {unit:<9} "
              f"ratio {'-' if ratio is None else format(ratio, '.2f')}")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="Measure this broker instead of starting one.")
    parser.add_argument("--against-kafka", action="store_true",
                        help="Also start Apache Kafka (one node, as throughput.py "
                             "--against-kafka) and run every case against both in turn.")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--heartbeat-ms", type=int, default=1000,
                        help="heartbeat.interval.ms of the group members [1000]")
    parser.add_argument("--session-ms", type=int, default=10000,
                        help="session.timeout.ms of the group members [10000]")
    parser.add_argument("--commits", type=int, default=5000, help="commits per commit run")
    parser.add_argument("--output", type=Path, help="where the raw runs go (JSON)")
    args = parser.parse_args()
    if args.against_kafka and args.bootstrap:
        parser.error("--against-kafka starts both brokers itself; it does not take --bootstrap")

    results: dict[str, dict[str, list[dict]]] = {}
    broker = kafka = None
    with tempfile.TemporaryDirectory(prefix="oncelog-bench-groups-") as scratch:
        brokers: dict[str, str] = {}
        try:
            if args.bootstrap is None:
                from oncelog.broker.process import BrokerProcess
                broker = BrokerProcess(Path(scratch) / "broker", settings={
                    "group.initial.rebalance.delay.ms": "0"},
                    log_path=Path(scratch) / "broker.log").start()
                brokers["oncelog"] = broker.bootstrap
            else:
                brokers[args.bootstrap] = args.bootstrap
            if args.against_kafka:
                # The kit's settings already include group.initial.rebalance.delay.ms=0.
                from oncelog.testing.apache_kafka import KafkaUnavailable
                try:
                    kafka = start_kafka(Path(scratch))
                except KafkaUnavailable as error:
                    print(str(error), file=sys.stderr)
                    return 1
                brokers[KAFKA_NAME] = kafka.bootstrap
            for case in args.cases:
                for run in range(args.runs):
                    for name, bootstrap in brokers.items():
                        for key, outcome in measure(bootstrap, case, args).items():
                            results.setdefault(name, {}).setdefault(key, []).append(outcome)
                        print(f"{case} run {run + 1}/{args.runs} on {name} done",
                              file=sys.stderr)
        finally:
            if kafka is not None:
                kafka.close()
            if broker is not None:
                broker.stop()

    for name, broker_results in results.items():
        print_broker("oncelog (started here)" if name == "oncelog" else name, broker_results,
                     args)
    comparison = side_by_side(results) if args.against_kafka else None
    output = args.output or HERE / "results" / time.strftime("groups-%Y%m%d-%H%M%S.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"options": vars(args) | {"output": str(output)},
                                  "machine": platform.platform(),
                                  "runs": results.get("oncelog") or results.get(args.bootstrap),
                                  "kafka_runs": results.get(KAFKA_NAME),
                                  "comparison": comparison},
                                 indent=2, default=str))
    print(f"raw runs: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
