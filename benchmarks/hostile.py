"""A well-behaved client's latency and the broker's memory while hostile clients attack.

    .venv/bin/python benchmarks/hostile.py [--runs 3] [--seconds 6] [--rate 1000]

One broker process, one confluent-kafka producer (acks=all, linger.ms=0, 100-byte values)
sending at ``--rate`` messages/s in this process, paced; its latency is the time from
``produce()`` to the delivery callback (the acknowledgement). Each run measures the same
producer in four phases of ``--seconds`` each, in one broker's life:

- ``none``: no attack;
- ``announced``: 20 connections that each announce a 100,000,000-byte frame and send 10
  bytes, plus 20 that really send 100 MB frames as fast as the broker reads them;
- ``storm``: 4 threads opening short-lived connections that each send one malformed frame;
- ``loris``: 200 connections trickling a request one byte every 200 ms (the broker runs
  with socket.request.read.timeout.ms=2000, so they are closed and reconnect).

Per phase: p50 and p99 latency, ms, messages acknowledged, and the broker's peak VmRSS
sampled every 20 ms from /proc/<pid>/status. The table shows the median over ``--runs`` runs.
Prints figures; never passes or fails on them.
"""

from __future__ import annotations

import argparse
import random
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from oncelog.broker.process import BrokerProcess  # noqa: E402
from tests.hostile.attack import memory_kib  # noqa: E402
from tests.hostile.test_memory import malformed_frames  # noqa: E402

PHASES = ("none", "announced", "storm", "loris")


def connect(bootstrap: str) -> socket.socket | None:
    host, port = bootstrap.rsplit(":", 1)
    try:
        return socket.create_connection((host, int(port)), timeout=2)
    except OSError:
        return None


def attack_announced(bootstrap: str, stop: threading.Event) -> None:
    idle = [s for s in (connect(bootstrap) for _ in range(20)) if s]
    for sock in idle:
        sock.sendall(struct.pack(">i", 100_000_000) + b"\x00\x12" + b"x" * 8)
    senders = [s for s in (connect(bootstrap) for _ in range(20)) if s]
    for sock in senders:
        sock.sendall(struct.pack(">i", 100_000_000))
        sock.setblocking(False)
    chunk = b"\x00" * 262144
    while not stop.is_set():
        progress = False
        for sock in senders:
            try:
                sock.send(chunk)
                progress = True
            except (BlockingIOError, OSError):
                pass
        if not progress:
            time.sleep(0.01)
    for sock in idle + senders:
        sock.close()


def attack_storm(bootstrap: str, stop: threading.Event) -> None:
    frames = malformed_frames(random.Random(), 5000)
    while not stop.is_set():
        for frame in frames:
            if stop.is_set():
                return
            sock = connect(bootstrap)
            if sock:
                try:
                    sock.sendall(frame)
                except OSError:
                    pass
                sock.close()


def attack_loris(bootstrap: str, stop: threading.Event) -> None:
    frame = struct.pack(">i", 10) + struct.pack(">hhih", 18, 0, 1, -1)
    sockets = [connect(bootstrap) for _ in range(200)]
    position = 0
    while not stop.wait(0.2):
        for index, sock in enumerate(sockets):
            try:
                if sock is None:
                    raise OSError
                sock.send(frame[position % len(frame):position % len(frame) + 1])
            except OSError:
                if sock is not None:
                    sock.close()
                sockets[index] = connect(bootstrap)
        position += 1
    for sock in sockets:
        if sock:
            sock.close()


ATTACKS = {"announced": (attack_announced, 1), "storm": (attack_storm, 4),
           "loris": (attack_loris, 1)}


def measure(broker: BrokerProcess, producer: Producer, topic: str, phase: str,
            seconds: float, rate: int) -> dict:
    latencies: list[float] = []
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            peak[0] = max(peak[0], memory_kib(broker.pid))

    threads = [threading.Thread(target=sample, daemon=True)]
    if phase in ATTACKS:
        attack, count = ATTACKS[phase]
        threads += [threading.Thread(target=attack, args=(broker.bootstrap, stop), daemon=True)
                    for _ in range(count)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # the attack under way before measuring
    value = b"v" * 100
    started = time.perf_counter()
    for i in range(int(seconds * rate)):
        due = started + i / rate
        while (now := time.perf_counter()) < due:
            producer.poll(min(due - now, 0.001))
        sent_at = time.perf_counter()
        producer.produce(topic, value, on_delivery=lambda err, msg, t=sent_at: (
            latencies.append(time.perf_counter() - t) if err is None else None))
        producer.poll(0)
    producer.flush(30)
    stop.set()
    for thread in threads:
        thread.join(10)
    ordered = sorted(latencies)
    return {"p50_ms": 1000 * ordered[len(ordered) // 2] if ordered else float("nan"),
            "p99_ms": 1000 * ordered[int(len(ordered) * 0.99)] if ordered else float("nan"),
            "acked": len(latencies), "sent": int(seconds * rate), "peak_rss_mib": peak[0] / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--rate", type=int, default=1000)
    args = parser.parse_args()
    results: dict[str, list[dict]] = {phase: [] for phase in PHASES}
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            broker = BrokerProcess(Path(tmp) / "data", log_path=Path(tmp) / "broker.log",
                                   settings={"socket.request.read.timeout.ms": "2000"})
            try:
                broker.start()
                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                admin.create_topics([NewTopic("steady", 1, 1)])["steady"].result(15)
                producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                                     "linger.ms": 0})
                for phase in PHASES:
                    result = measure(broker, producer, "steady", phase, args.seconds, args.rate)
                    results[phase].append(result)
                    print(f"run {run + 1} {phase:>9}: {result}", flush=True)
            finally:
                broker.kill()
    print(f"\nmedians of {args.runs} runs, {args.rate} msg/s for {args.seconds:.0f} s per phase")
    print(f"{'attack':>10} {'p50 ms':>8} {'p99 ms':>8} {'acked':>8} {'peak RSS MiB':>13}")
    for phase in PHASES:
        rows = results[phase]
        print(f"{phase:>10} "
              f"{statistics.median(r['p50_ms'] for r in rows):8.2f} "
              f"{statistics.median(r['p99_ms'] for r in rows):8.2f} "
              f"{statistics.median(r['acked'] for r in rows):8.0f} "
              f"{statistics.median(r['peak_rss_mib'] for r in rows):13.0f}")


if __name__ == "__main__":
    main()
