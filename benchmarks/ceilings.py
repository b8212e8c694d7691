"""Ceilings behind two ratios the issues ask for, measured with oncelog's broker out of the way:

    .venv/bin/python benchmarks/ceilings.py [--runs 3] [--scale 1.0] [--cases CASE,...]

``transactions`` (issue 12: a transactional producer committing every 1,000 x 1 KiB at
>= 0.8x the plain producer): confluent-kafka's producer (librdkafka) against librdkafka's own
mock cluster (``test.mock.num.brokers=1``: a broker written in C inside the client's own
process, memory only), plain then transactional, with ``transactions.py``'s settings and
client functions. What the client library allows when the broker costs next to nothing.

``replication`` (issue 11: RF 3 ``acks=all`` >= 0.5x a single broker's ``acks=1``): the data
movement of replication alone, no protocol and no Python per record. A sender process streams
1 MiB chunks over loopback TCP to a "leader" process that writes each chunk to a file and
``sendfile()``s it to two "follower" processes, which write it to files of their own (RF 1:
the leader alone). Each with the page cache as Kafka leaves it, and with drop-behind
(``posix_fadvise(DONTNEED)`` 64 MiB behind the writes, what ``log.cache.retain.bytes`` does).
CPU per MB of each role, from ``getrusage``. Then the real client: ``throughput.py``'s
producer (1 KiB, acks=1) against a single oncelog broker, its MB/s and its own CPU per MB.
The ceiling of the RF 3 figure on this machine is then ``cores / (client CPU per MB + RF 3
data movement CPU per MB)`` - what a broker costing nothing above the kernel could reach - and
its ratio to the single broker's figure measured in the same run.

Medians (min-max) over ``--runs``; raw runs go to ``benchmarks/results/ceilings-<time>.json``.
A measuring tool: nothing passes or fails.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from throughput import (Topics, median_range, run_client, settle_disk,  # noqa: E402
                        start_oncelog)

CHUNK = 1 << 20
DROP_EVERY = 16 << 20      # as storage/segment.py's _CACHE_STEP
DROP_BEHIND = 64 << 20     # keep the newest 64 MiB cached
VALUE_BYTES = 1024
PER_TRANSACTION = 1000
MESSAGES_AT_SCALE_1 = 1_000_000
MOVED_MB_AT_SCALE_1 = 1000
CASES = ("transactions", "replication")


# -- the data movement of replication ------------------------------------------------------

def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _DropBehind:
    """Drop a file's pages from the page cache DROP_BEHIND bytes behind its end, every
    DROP_EVERY bytes (no-op when off)."""

    def __init__(self, fd: int, on: bool) -> None:
        self.fd, self.on, self.written, self.dropped_at = fd, on, 0, 0

    def wrote(self, count: int) -> None:
        self.written += count
        if self.on and self.written - self.dropped_at >= DROP_EVERY:
            os.posix_fadvise(self.fd, max(0, self.dropped_at - DROP_BEHIND), DROP_EVERY,
                             os.POSIX_FADV_DONTNEED)
            self.dropped_at = self.written


def _follower(path: str, ports, results, drop: bool) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    ports.put(listener.getsockname()[1])
    connection, _ = listener.accept()
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    view, cache = memoryview(bytearray(CHUNK)), _DropBehind(fd, drop)
    start = _cpu_s()
    while count := connection.recv_into(view):
        os.write(fd, view[:count])
        cache.wrote(count)
    results.put(("follower", _cpu_s() - start))


def _leader(path: str, ports, follower_ports: list[int], results, drop: bool) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    ports.put(listener.getsockname()[1])
    followers = [socket.create_connection(("127.0.0.1", port)) for port in follower_ports]
    connection, _ = listener.accept()
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC)
    view, cache = memoryview(bytearray(CHUNK)), _DropBehind(fd, drop)
    start, position = _cpu_s(), 0
    while True:
        filled = 0
        while filled < CHUNK and (count := connection.recv_into(view[filled:])):
            filled += count
        if not filled:
            break
        os.write(fd, view[:filled])
        for follower in followers:
            sent = 0
            while sent < filled:
                sent += os.sendfile(follower.fileno(), fd, position + sent, filled - sent)
        position += filled
        cache.wrote(filled)
    for follower in followers:
        follower.close()
    results.put(("leader", _cpu_s() - start))


def move(directory: Path, megabytes: int, followers: int, drop: bool) -> dict:
    """Stream ``megabytes`` MiB through a leader and ``followers``; MB/s and CPU per MB."""
    spawn = multiprocessing.get_context("spawn")
    ports, results = spawn.Queue(), spawn.Queue()
    processes, follower_ports = [], []
    for index in range(followers):
        process = spawn.Process(target=_follower, args=(str(directory / f"follower-{index}"),
                                                        ports, results, drop))
        process.start()
        processes.append(process)
        follower_ports.append(ports.get(timeout=30))
    leader = spawn.Process(target=_leader, args=(str(directory / "leader"), ports,
                                                 follower_ports, results, drop))
    leader.start()
    processes.append(leader)
    chunk = os.urandom(CHUNK)
    try:
        with socket.create_connection(("127.0.0.1", ports.get(timeout=30))) as sender:
            start_cpu, start = _cpu_s(), time.perf_counter()
            for _ in range(megabytes):
                sender.sendall(chunk)
            sender.shutdown(socket.SHUT_WR)
            cpu = [results.get(timeout=600) for _ in processes]
            elapsed, sender_cpu = time.perf_counter() - start, _cpu_s() - start_cpu
    finally:
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
    mb = megabytes * CHUNK / 1e6
    role_ms = {"sender": sender_cpu * 1000 / mb,
               "leader": sum(s for r, s in cpu if r == "leader") * 1000 / mb,
               "followers": sum(s for r, s in cpu if r == "follower") * 1000 / mb}
    return {"mb_per_s": mb / elapsed, "cpu_ms_per_mb": role_ms,
            "replicas_ms_per_mb": role_ms["leader"] + role_ms["followers"]}


def replication_run(directory: Path, megabytes: int, count: int, run_id: str) -> dict:
    figures = {}
    for drop in (False, True):
        for replicas in (1, 3):
            name = f"rf{replicas}" + ("_drop_behind" if drop else "")
            work = directory / name
            work.mkdir()
            settle_disk()
            figures[name] = move(work, megabytes, replicas - 1, drop)
            for file in work.iterdir():
                file.unlink()
    target = start_oncelog("single", directory, {})
    try:
        topics = Topics(target.bootstrap, run_id)
        topic = topics.create("acks1")
        settle_disk()
        client = run_client("produce", 600, bootstrap=target.bootstrap, topic=topic,
                            value_size=VALUE_BYTES, count=count, acks="1")
        topics.delete(topic)
    finally:
        target.close()
    if "error" in client:
        raise RuntimeError(f"the single-broker producer failed: {client['error']}")
    client_ms = client["client_cpu_seconds"] * 1000 / (count * VALUE_BYTES / 1e6)
    figures["single_acks1"] = {"mb_per_s": client["mb_per_s"], "client_ms_per_mb": client_ms}
    cores = os.cpu_count() or 1
    for name in ("rf3", "rf3_drop_behind"):
        ceiling = cores * 1000 / (client_ms + figures[name]["replicas_ms_per_mb"])
        figures[name]["rf3_ceiling_mb_per_s"] = ceiling
        figures[name]["ceiling_ratio"] = ceiling / client["mb_per_s"]
    return figures


# -- the transactional producer against librdkafka's mock cluster ---------------------------

def transactions_run(count: int, run: int) -> dict:
    mock = {"test.mock.num.brokers": 1}
    plain = run_client("produce", 600, bootstrap="", topic="mock", value_size=VALUE_BYTES,
                       count=count, acks="all", extra=mock)
    transactional = run_client("transactional_produce", 600, bootstrap="", topic="mock",
                               value_size=VALUE_BYTES, count=count,
                               per_transaction=PER_TRANSACTION,
                               transactional_id=f"ceiling-{run}", extra=mock)
    for name, result in (("plain", plain), ("transactional", transactional)):
        if "error" in result:
            raise RuntimeError(f"the {name} producer failed: {result['error']}")
    transactional.pop("commit_ms", None)
    return {"plain": plain, "transactional": transactional,
            "ratio": transactional["mb_per_s"] / plain["mb_per_s"]}


# -- report ----------------------------------------------------------------------------------

def report(runs: list[dict]) -> None:
    def column(case: str, *path: str) -> list[float]:
        values = []
        for run in runs:
            value = run[case]
            for key in path:
                value = value[key]
            values.append(value)
        return values

    print(f"median (min-max) of {len(runs)} runs, {os.cpu_count()} cores")
    if "transactions" in runs[0]:
        print("\ntransactions: librdkafka against librdkafka's in-process mock broker")
        print(f"  plain          {median_range(column('transactions', 'plain', 'mb_per_s'), '.0f')}"
              " MB/s")
        print(f"  transactional  "
              f"{median_range(column('transactions', 'transactional', 'mb_per_s'), '.0f')} MB/s "
              f"(commit every {PER_TRANSACTION:,})")
        print(f"  ratio          {median_range(column('transactions', 'ratio'), '.2f')}"
              "   (issue 12 asks >= 0.8 against oncelog)")
    if "replication" in runs[0]:
        print("\nreplication: data movement alone (no protocol), CPU ms per MB")
        for name in ("rf1", "rf3", "rf1_drop_behind", "rf3_drop_behind"):
            leader = column("replication", name, "cpu_ms_per_mb", "leader")
            followers = column("replication", name, "cpu_ms_per_mb", "followers")
            rate = column("replication", name, "mb_per_s")
            print(f"  {name:16} {median_range(rate, '.0f'):>20} MB/s   leader "
                  f"{median_range(leader, '.2f')}, followers {median_range(followers, '.2f')}")
        single = column("replication", "single_acks1", "mb_per_s")
        client = column("replication", "single_acks1", "client_ms_per_mb")
        print(f"  single oncelog broker acks=1 via confluent-kafka: {median_range(single, '.0f')} "
              f"MB/s, client CPU {median_range(client, '.2f')} ms/MB")
        for name in ("rf3", "rf3_drop_behind"):
            ceiling = column("replication", name, "rf3_ceiling_mb_per_s")
            ratio = column("replication", name, "ceiling_ratio")
            print(f"  RF 3 ceiling ({name}): {median_range(ceiling, '.0f')} MB/s = "
                  f"{median_range(ratio, '.2f')} x the single broker   (issue 11 asks >= 0.5)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--cases", default=",".join(CASES))
    options = parser.parse_args(argv)
    cases = [c.strip() for c in options.cases.split(",") if c.strip()]
    if not cases or set(cases) - set(CASES) or options.runs < 1 or options.scale <= 0:
        parser.error(f"--cases takes a subset of {','.join(CASES)}; --runs >= 1, --scale > 0")
    count = max(PER_TRANSACTION, round(MESSAGES_AT_SCALE_1 * options.scale))
    megabytes = max(64, round(MOVED_MB_AT_SCALE_1 * options.scale))
    runs = []
    for run in range(options.runs):
        figures = {}
        if "transactions" in cases:
            figures["transactions"] = transactions_run(count, run)
        if "replication" in cases:
            with tempfile.TemporaryDirectory(prefix="oncelog-bench-ceilings-") as directory:
                figures["replication"] = replication_run(Path(directory), megabytes, count,
                                                         uuid.uuid4().hex[:8])
        runs.append(figures)
        print(f"run {run + 1} of {options.runs} done", flush=True)
    report(runs)
    out = HERE / "results" / f"ceilings-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"options": vars(options), "runs": runs}, indent=1, default=str))
    print(f"raw runs: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
