"""Throw mutated request frames at a live broker process; it must end serving, intact.

    .venv/bin/python fuzz/fuzz_broker.py --frames 1000000 [--workers 4] [--seed N]

Starts a broker (``BrokerProcess``), has confluent-kafka produce acknowledged records
(acks=all), then sends ``--frames`` frames, each a corpus request (fuzz/corpus/requests,
real clients' requests) mutated by flips, edge values, truncation, insertion, splicing with
another request and a rewritten size field, one per short-lived connection (after up to
three unmutated requests, so it arrives mid-pipeline); a
well-behaved producer keeps producing meanwhile. At the end: the broker process is alive,
answers ApiVersions, and every record acknowledged before or during the run reads back at
its acknowledged offset. Prints frames, seconds, frames/s and the broker's peak RSS (VmHWM).

Requests that would legitimately destroy data or grow the broker's state without bound are
not used as seeds (DeleteTopics, DeleteGroups, OffsetDelete, CreateTopics,
CreatePartitions), and the broker runs with auto.create.topics.enable=false: a mutated
request of those kinds succeeding is not a bug, and would defeat the final check.
"""

from __future__ import annotations

import argparse
import collections
import random
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))
sys.path.insert(0, str(ROOT.parent))

from oncelog.broker.process import BrokerProcess  # noqa: E402
from tests.hostile.attack import WellBehavedClient, memory_kib  # noqa: E402

EXCLUDED = ("delete_topics", "delete_groups", "offset_delete", "create_topics",
            "create_partitions")
EDGE = [b"\x00", b"\x01", b"\x7f", b"\x80", b"\xff"]
EDGE_INTS = [0, 1, -1, 2**31 - 1, -2**31, 2**15 - 1, 0x7F, 0x80]


def seeds() -> list[bytes]:
    return [path.read_bytes() for path in sorted((ROOT / "corpus" / "requests").iterdir())
            if not path.name.startswith(EXCLUDED)]


def mutate(rng: random.Random, frame: bytes, others: list[bytes]) -> bytes:
    data = bytearray(frame)
    # Mostly one or two mutations: most frames should still reach a decoder or a handler.
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 6))):
        kind = rng.randrange(7)
        if kind == 0 and data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == 1 and data:
            position = rng.randrange(len(data))
            data[position:position + 1] = rng.choice(EDGE)
        elif kind == 2 and len(data) > 4:
            position = rng.randrange(len(data) - 3)
            struct.pack_into(">i", data, position, rng.choice(EDGE_INTS))
        elif kind == 3 and rng.random() < 0.3:
            del data[rng.randrange(len(data) + 1):]
        elif kind == 4:
            position = rng.randrange(len(data) + 1)
            data[position:position] = rng.randbytes(rng.randint(1, 16))
        elif kind == 5:
            other = rng.choice(others)
            start = rng.randrange(len(other))
            data[rng.randrange(len(data) + 1):] = other[start:start + rng.randint(1, 64)]
        elif kind == 6 and len(data) > 8:
            struct.pack_into(">h", data, 2, rng.randint(-1, 20))  # another API version
    size = len(data)
    if rng.random() < 0.05:
        size = rng.choice([0, -1, size + rng.randint(1, 1000), 2**31 - 1, 100_000_000])
    return struct.pack(">i", size) + bytes(data)


def worker(bootstrap: str, frames: int, seed: int, corpus: list[bytes],
           counter: list[int]) -> None:
    rng = random.Random(seed)
    host, port = bootstrap.rsplit(":", 1)
    sent = 0
    while sent < frames:
        # One mutated frame per connection, so that every one reaches the broker's decoder
        # (the first unreadable frame closes its connection), after up to three unmutated
        # requests that are answered: the mutated frame arrives mid-pipeline.
        valid = [struct.pack(">i", len(seed)) + seed
                 for seed in rng.choices(corpus, k=rng.choice((0, 0, 1, 3)))]
        batch = valid + [mutate(rng, rng.choice(corpus), corpus)]
        sent += 1
        try:
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(b"".join(batch))
                sock.shutdown(socket.SHUT_WR)
                sock.settimeout(2)
                while sock.recv(1 << 16):
                    pass
        except OSError:
            pass  # closed on us, reset, timed out: all fine, the broker decides
        counter[0] += 1


def unexpected_errors(log_text: str) -> collections.Counter:
    """Tracebacks in the broker's log, by (request, exception): the fuzzer's findings."""
    found = collections.Counter()
    request = "?"
    for line in log_text.splitlines():
        if "unexpected error in" in line or "failed to send a response" in line:
            request = line.split(": ", 1)[-1]
            request = " ".join(request.split()[:5])
        elif line and not line[0].isspace() and not line[0].isdigit() \
                and not line.startswith("Traceback") and ("Error" in line or "Exception" in line):
            found[f"{request}: {line[:160]}"] += 1
    return found


def api_versions_answered(bootstrap: str) -> bool:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(struct.pack(">ihhih", 10, 18, 0, 1, -1))
        return len(sock.recv(4)) == 4


def log_lines_by_source(log_text: str) -> collections.Counter:
    """Log lines per (level, logger, first words of the message): what makes the log grow."""
    sources: collections.Counter = collections.Counter()
    for line in log_text.splitlines():
        parts = line.split(" ", 5)  # date, time, level, logger:, message
        if len(parts) >= 5 and parts[3].endswith(":"):
            words = " ".join(" ".join(parts[4:]).split()[:4])
            sources[f"{parts[2]} {parts[3]} {words}"] += 1
    return sources


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    corpus = seeds()
    print(f"seed {args.seed}, {len(corpus)} seed requests, {args.frames} frames")
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data", log_path=Path(tmp) / "broker.log",
                               settings={"auto.create.topics.enable": "false"})
        try:
            broker.start()
            client = WellBehavedClient(broker.bootstrap, "fuzz-steady", partitions=2)
            client.produce(1000, "before")
            counter = [0]
            share = args.frames // args.workers
            threads = [threading.Thread(target=worker, daemon=True, args=(
                broker.bootstrap, share + (args.frames % args.workers if i == 0 else 0),
                args.seed + i, corpus, counter)) for i in range(args.workers)]
            started = time.monotonic()
            for thread in threads:
                thread.start()
            last = started
            while any(thread.is_alive() for thread in threads):
                time.sleep(1)
                client.produce(50, "during", timeout=30)
                if broker.process.poll() is not None:
                    raise SystemExit(f"the broker died:\n{broker.log_tail(40)}")
                if time.monotonic() - last > 30:
                    last = time.monotonic()
                    print(f"  {counter[0]} frames, {last - started:.0f} s, "
                          f"RSS {memory_kib(broker.pid) // 1024} MiB", flush=True)
            seconds = time.monotonic() - started
            peak_mib = memory_kib(broker.pid, "VmHWM") / 1024
            assert api_versions_answered(broker.bootstrap), "ApiVersions unanswered"
            client.produce(100, "after")
            client.assert_everything_acknowledged_reads_back()
            log_text = broker.log_path.read_text(errors="replace")
            tracebacks = log_text.count("Traceback")
            print(f"{counter[0]} frames in {seconds:.0f} s ({counter[0] / seconds:.0f}/s), "
                  f"broker peak RSS {peak_mib:.0f} MiB, {len(client.acknowledged)} "
                  f"acknowledged records intact, {len(log_text.splitlines())} log lines, "
                  f"{tracebacks} tracebacks")
            for kind, count in unexpected_errors(log_text).most_common():
                print(f"  {count:6d} x {kind}")
            for source, count in log_lines_by_source(log_text).most_common(5):
                print(f"  {count:6d} log lines from {source}")
            return 1 if tracebacks else 0
        finally:
            broker.kill()


if __name__ == "__main__":
    sys.exit(main())
