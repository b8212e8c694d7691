"""Memory follows the bytes that arrived, and the requests in flight are bounded broker-wide.

Both attacks of issue 14 against a real broker process, with a real client (confluent-kafka,
acks=all) served during and after each, and every record it saw acknowledged read back.
The broker's memory is what the kernel reports in /proc/<pid>/status (VmRSS, VmHWM).
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

from oncelog.protocol.records import make_batch
from tests.hostile.attack import (MIB, WellBehavedClient, closing_all, memory_kib,
                                  open_sockets)
from tests.integration.raw import RawConnection

ANNOUNCED = 100_000_000  # under socket.request.max.bytes (100 MiB)
ATTACKERS = 20


def _api_versions_answered(bootstrap: str) -> bool:
    with RawConnection(bootstrap, timeout=5) as conn:
        conn.send_frame(conn.header(18, 0))
        return len(conn.read_frame()) > 4


def test_frames_that_announce_100_mb_cost_only_the_bytes_that_arrived(broker_factory):
    """The attack: 20 connections each send a 4-byte frame size of 100,000,000 and 10 more
    bytes. The receive buffer used to be resized to the announced size before any of it
    arrived, so the broker held about 1.9 GB. Now each connection keeps its 16 KiB base
    buffer: the broker grows by less than 32 MiB, and a real client is served throughout."""
    broker = broker_factory()
    client = WellBehavedClient(broker.bootstrap, "steady")
    client.produce(100, "before")
    before_kib = memory_kib(broker.pid)
    with closing_all(open_sockets(broker.bootstrap, ATTACKERS)) as attackers:
        for sock in attackers:
            sock.sendall(struct.pack(">i", ANNOUNCED) + b"\x00\x12\x00\x00" + b"x" * 6)
        time.sleep(0.3)
        assert _api_versions_answered(broker.bootstrap)
        client.produce(100, "during")
        during_kib = memory_kib(broker.pid)
    client.produce(100, "after")
    client.assert_everything_acknowledged_reads_back()
    assert (during_kib - before_kib) * 1024 < 32 * MIB, (before_kib, during_kib)
    assert memory_kib(broker.pid, "VmHWM") * 1024 < before_kib * 1024 + 64 * MIB


def _pump(sockets: list[socket.socket], stop: threading.Event, sent: list[int]) -> None:
    """Send a 100 MB frame's body on every socket as fast as the broker takes it."""
    chunk = b"\x00" * (256 * 1024)
    for sock in sockets:
        sock.setblocking(False)
    while not stop.is_set():
        progress = False
        for sock in sockets:
            try:
                sent[0] += sock.send(chunk)
                progress = True
            except BlockingIOError:
                pass
            except OSError:
                return
        if not progress:
            time.sleep(0.01)


def test_frames_that_really_send_their_bytes_are_bounded_by_the_pool(broker_factory):
    """The same 20 connections, now really sending their 100 MB frames as fast as the broker
    reads. Their receive buffers are reserved from queued.max.request.bytes (64 MiB here),
    of which frames still arriving may take half: the attackers stall at 32 MiB between them
    and the broker stops reading from them, while the client's small requests, which fit
    the base buffer, are still answered. RSS stays under 64 MiB + 48 MiB of slack above
    where it started."""
    broker = broker_factory(settings={"queued.max.request.bytes": str(64 * MIB)})
    client = WellBehavedClient(broker.bootstrap, "steady")
    client.produce(100, "before")
    before_kib = memory_kib(broker.pid)
    stop, sent = threading.Event(), [0]
    with closing_all(open_sockets(broker.bootstrap, ATTACKERS)) as attackers:
        for sock in attackers:
            sock.sendall(struct.pack(">i", ANNOUNCED))
        pump = threading.Thread(target=_pump, args=(attackers, stop, sent), daemon=True)
        pump.start()
        try:
            time.sleep(1.5)
            assert _api_versions_answered(broker.bootstrap)
            client.produce(200, "during", timeout=10)
            during_kib = memory_kib(broker.pid)
        finally:
            stop.set()
            pump.join(5)
    assert sent[0] > 32 * MIB, f"the attack only got {sent[0]} bytes out"
    client.produce(100, "after")
    client.assert_everything_acknowledged_reads_back()
    bound_kib = before_kib + (64 + 48) * 1024
    assert during_kib < bound_kib, (before_kib, during_kib)
    peak_kib = memory_kib(broker.pid, "VmHWM")
    assert peak_kib < bound_kib, (before_kib, peak_kib)


def malformed_frames(rng: random.Random, count: int) -> list[bytes]:
    """Frames no correct client sends: sizes out of range or announcing far more than
    follows, unknown API keys, headers cut short, valid headers before garbage, corrupt
    batches, plain noise."""
    produce_header = struct.pack(">hhih", 0, 9, 1, 1) + b"x"
    batch = bytearray(make_batch([b"v"] * 3))
    frames = []
    for _ in range(count):
        kind = rng.randrange(7)
        if kind == 0:
            frames.append(struct.pack(">i", rng.randrange(1, 100_000_000)) + rng.randbytes(10))
        elif kind == 1:
            frames.append(struct.pack(">i", rng.choice([-1, 0, 2**31 - 1, 200 * MIB])))
        elif kind == 2:
            body = struct.pack(">hhih", rng.randrange(100, 32767), 0, 1, -1)
            frames.append(struct.pack(">i", len(body)) + body)
        elif kind == 3:
            body = rng.randbytes(rng.randrange(1, 8))
            frames.append(struct.pack(">i", len(body)) + body)
        elif kind == 4:
            body = produce_header + rng.randbytes(rng.randrange(1, 300))
            frames.append(struct.pack(">i", len(body)) + body)
        elif kind == 5:
            damaged = bytearray(batch)
            damaged[rng.randrange(len(damaged))] ^= 0xFF
            body = produce_header + b"\xff\xff" + struct.pack(">hii", -1, 1000, 1) + \
                struct.pack(">h", 6) + b"steady" + struct.pack(">iii", 1, 0, len(damaged)) + \
                bytes(damaged)
            frames.append(struct.pack(">i", len(body)) + body)
        else:
            frames.append(rng.randbytes(rng.randrange(1, 64)))
    return frames


def _storm(bootstrap: str, frames: list[bytes], failures: list[int]) -> None:
    host, port = bootstrap.rsplit(":", 1)
    for frame in frames:
        try:
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(frame)
        except OSError:
            failures[0] += 1


def test_a_storm_of_malformed_frames_over_short_lived_connections(broker_factory):
    """The attack: a few thousand malformed frames, each on a connection of its own. It
    used to leave the broker at 100 % CPU and past 8 GB, no longer answering ApiVersions,
    unable to serve the records it had acknowledged. Now each bad frame closes its own
    connection, memory stays within 64 MiB of where it started, the log gets a handful of
    rate-limited lines instead of thousands, and the client keeps producing and reading."""
    broker = broker_factory()
    client = WellBehavedClient(broker.bootstrap, "steady")
    client.produce(200, "before")
    before_kib = memory_kib(broker.pid)
    log_lines_before = len(broker.log_path.read_text().splitlines())
    frames = malformed_frames(random.Random(14), 3000)
    failures = [0]
    storm = [threading.Thread(target=_storm, args=(broker.bootstrap, frames[i::4], failures))
             for i in range(4)]
    started = time.monotonic()
    for thread in storm:
        thread.start()
    client.produce(200, "during", timeout=20)
    assert _api_versions_answered(broker.bootstrap)
    for thread in storm:
        thread.join(60)
    storm_s = time.monotonic() - started
    client.produce(200, "after")
    client.assert_everything_acknowledged_reads_back()
    assert broker.process.poll() is None
    assert memory_kib(broker.pid, "VmHWM") < before_kib + 64 * 1024
    log_lines = broker.log_path.read_text().splitlines()[log_lines_before:]
    closes = [line for line in log_lines if "closing connection" in line]
    assert 1 <= len(closes) <= 20, (len(closes), storm_s)
    assert not [line for line in log_lines if "Traceback" in line]
