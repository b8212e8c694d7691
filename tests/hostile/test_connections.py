"""Connections and time per client: max.connections, max.connections.per.ip,
connections.max.idle.ms and socket.request.read.timeout.ms against a real broker process,
with a real client (confluent-kafka) served throughout."""

from __future__ import annotations

import struct
import threading
import time

from tests.hostile.attack import (WellBehavedClient, closed_by_peer, closing_all,
                                  open_sockets)
from tests.integration.raw import RawConnection


def _api_versions(sock) -> bytes:
    sock.settimeout(5)
    sock.sendall(struct.pack(">i", 10) + struct.pack(">hhih", 18, 0, 1, -1))
    size = struct.unpack(">i", sock.recv(4))[0]
    data = b""
    while len(data) < size:
        data += sock.recv(size - len(data))
    return data


def test_slow_loris_connections_are_closed_and_others_served(broker_factory):
    """50 connections each trickle one byte of a request every 200 ms. Each is closed once
    its frame is still incomplete after socket.request.read.timeout.ms (1 s here), while a
    real client produces and reads back as usual."""
    broker = broker_factory(settings={"socket.request.read.timeout.ms": "1000"})
    client = WellBehavedClient(broker.bootstrap, "steady")
    frame = struct.pack(">i", 10) + struct.pack(">hhih", 18, 0, 1, -1)
    stop = threading.Event()
    with closing_all(open_sockets(broker.bootstrap, 50)) as lorises:

        def trickle() -> None:
            for byte in frame:
                if stop.wait(0.2):
                    return
                for sock in lorises:
                    try:
                        sock.send(bytes([byte]))
                    except OSError:
                        pass

        trickler = threading.Thread(target=trickle, daemon=True)
        started = time.monotonic()
        trickler.start()
        try:
            client.produce(100, "during")
            assert all(closed_by_peer(sock, timeout=3) for sock in lorises)
            elapsed = time.monotonic() - started
        finally:
            stop.set()
            trickler.join(5)
    assert 0.9 < elapsed < 3.5, elapsed
    client.produce(100, "after")
    client.assert_everything_acknowledged_reads_back()
    log_text = broker.log_path.read_text()
    assert "socket.request.read.timeout.ms" in log_text
    assert log_text.count("closing connection") <= 2, "one line per kind per source"


def test_a_request_sent_slowly_but_within_the_bound_is_answered(broker_factory):
    broker = broker_factory(settings={"socket.request.read.timeout.ms": "2000"})
    with closing_all(open_sockets(broker.bootstrap, 1)) as (sock,):
        frame = struct.pack(">i", 10) + struct.pack(">hhih", 18, 0, 1, -1)
        for byte in frame:
            sock.send(bytes([byte]))
            time.sleep(0.1)
        size = struct.unpack(">i", sock.recv(4))[0]
        assert size > 4


def test_idle_connections_are_closed(broker_factory):
    """connections.max.idle.ms=500: a silent connection is closed; one that keeps asking
    stays open."""
    broker = broker_factory(settings={"connections.max.idle.ms": "500"})
    with closing_all(open_sockets(broker.bootstrap, 2)) as (silent, busy):
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert len(_api_versions(busy)) > 4
            time.sleep(0.1)
        assert closed_by_peer(silent, timeout=0.1)
        assert len(_api_versions(busy)) > 4


def test_a_flood_beyond_max_connections_is_closed_at_accept(broker_factory):
    """max.connections=20: of 200 connections opened at once, 20 are kept and served, the
    rest are closed as soon as they are accepted, with one log line (rate-limited, not
    200). Once the flood goes, a real client connects and is served."""
    broker = broker_factory(settings={"max.connections": "20"})
    with closing_all(open_sockets(broker.bootstrap, 200)) as flood:
        refused = [sock for sock in flood if closed_by_peer(sock, timeout=0.05)]
        kept = [sock for sock in flood if sock not in refused]
        assert len(kept) == 20, len(kept)
        for sock in kept:
            assert len(_api_versions(sock)) > 4
    time.sleep(0.2)  # the broker sees the kept connections close
    client = WellBehavedClient(broker.bootstrap, "steady")
    client.produce(100, "after")
    client.assert_everything_acknowledged_reads_back()
    log_text = broker.log_path.read_text()
    assert log_text.count("refusing connection") == 1, log_text.count("refusing connection")
    assert "max.connections=20 reached" in log_text


def test_max_connections_per_ip(broker_factory):
    broker = broker_factory(settings={"max.connections.per.ip": "5"})
    with closing_all(open_sockets(broker.bootstrap, 8)) as sockets:
        refused = [sock for sock in sockets if closed_by_peer(sock, timeout=0.1)]
        assert len(refused) == 3
    time.sleep(0.2)
    with RawConnection(broker.bootstrap) as conn:  # the quota was given back
        conn.send_frame(conn.header(18, 0))
        assert len(conn.read_frame()) > 4
    assert "max.connections.per.ip=5 reached for 127.0.0.1" in broker.log_path.read_text()
