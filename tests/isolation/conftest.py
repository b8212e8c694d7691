"""Fixtures for the network-partition layer (``oncelog.cluster.isolation``): real network
namespaces, a bridge and nftables, so these tests need root and ``ip`` (skipped without them,
with that reason); ``nft`` missing is a failure, as ``make setup`` installs it.

Each network gets a prefix and a /24 of its own from the xdist worker's number and a counter,
so two workers never share names; ``network_factory`` destroys every network it made and
checks that nothing with its prefix is left, and ``echo_servers`` kills its processes by pid,
even when the test fails."""

from __future__ import annotations

import itertools
import os
import re
import socket
import subprocess
import sys
import time

import pytest

from oncelog.cluster.delay_relay import socket_in_namespace
from oncelog.cluster.isolation import (IsolatedNetwork, IsolationUnavailable,
                                       missing_prerequisites)

PORT = 9000
UNREACHABLE_TIMEOUT_S = 0.5

# A threaded TCP server: sends the peer's address and a newline, then echoes what it reads.
ECHO_SERVER = """
import socketserver, sys
class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(self.client_address[0].encode() + b"\\n")
        while data := self.request.recv(65536):
            self.request.sendall(data)
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer.daemon_threads = True
with socketserver.ThreadingTCPServer(("0.0.0.0", int(sys.argv[1])), Echo) as server:
    print("listening", flush=True)
    server.serve_forever()
"""

_counter = itertools.count()


def unique_names() -> tuple[str, str]:
    """A name prefix and a /24 no other worker of this run uses."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0) % 3
    number = next(_counter) % 40
    return f"oi{worker}t{number}", f"10.213.{100 + worker * 40 + number}.0/24"


def leftovers(prefix: str) -> list[str]:
    """Namespaces, interfaces and nftables tables named with ``prefix`` that exist now."""
    found = [f"netns {line.split()[0]}" for line in _output(["ip", "netns", "list"])
             if line.startswith(f"{prefix}-")]
    ours = re.compile(rf"{prefix}(br|v\d+|n\d+)")
    for line in _output(["ip", "-o", "link", "show"]):
        name = line.split(":")[1].strip().split("@")[0]
        if ours.fullmatch(name):
            found.append(f"link {name}")
    found += [line for line in _output(["nft", "list", "tables"])
              if line.split()[-1] == f"{prefix}_faults"]
    return found


def _output(argv: list[str]) -> list[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()


@pytest.fixture
def require_namespaces() -> None:
    missing = sorted(set(missing_prerequisites()) & {"linux", "root", "ip"})
    if missing:
        pytest.skip(str(IsolationUnavailable(missing)))


@pytest.fixture
def network_factory(require_namespaces):
    made: list[IsolatedNetwork] = []

    def make(nodes: tuple[str, ...] = ("a", "b", "c"), **kwargs) -> IsolatedNetwork:
        prefix, subnet = unique_names()
        network = IsolatedNetwork(prefix, subnet, **kwargs)
        made.append(network)
        return network.create(list(nodes))

    yield make
    for network in made:
        network.destroy()
    assert [item for network in made for item in leftovers(network.prefix)] == []


@pytest.fixture
def network(network_factory) -> IsolatedNetwork:
    return network_factory()


@pytest.fixture
def echo_servers():
    """``echo_servers(network, node)`` starts ``ECHO_SERVER`` inside the node's namespace
    (through ``exec_prefix``) on ``PORT``; every one is killed by pid afterwards."""
    started: list[subprocess.Popen[str]] = []

    def start(network: IsolatedNetwork, node: str) -> subprocess.Popen[str]:
        process = subprocess.Popen([*network.exec_prefix(node), sys.executable, "-c",
                                    ECHO_SERVER, str(PORT)], stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "listening"
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


def open_connection(network: IsolatedNetwork, target: str, from_node: str | None = None,
                    timeout_s: float = UNREACHABLE_TIMEOUT_S) -> tuple[socket.socket, str]:
    """A connection to ``target``'s echo server from ``from_node``'s namespace (the root
    namespace, where clients run, when None), and the peer address the server saw."""
    sock = (socket_in_namespace(network.namespace(from_node)) if from_node is not None
            else socket.socket())
    try:
        sock.settimeout(timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.connect((network.address(target), PORT))
        return sock, read_line(sock)
    except BaseException:
        sock.close()
        raise


def read_line(sock: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            raise ConnectionError("closed before a line")
        data += chunk
    return data.decode().strip()


def reaches(network: IsolatedNetwork, target: str, from_node: str | None = None) -> bool:
    """Whether a TCP connection to ``target``'s echo server completes and answers."""
    try:
        sock, _ = open_connection(network, target, from_node)
    except OSError:
        return False
    sock.close()
    return True


def round_trip_ms(sock: socket.socket, payload: bytes = b"x") -> float:
    started = time.monotonic()
    sock.sendall(payload)
    received = b""
    while len(received) < len(payload):
        chunk = sock.recv(65536)
        assert chunk, "connection closed mid round trip"
        received += chunk
    assert received == payload
    return (time.monotonic() - started) * 1000


def udp_delivered(network: IsolatedNetwork, sender: str, receiver: str, count: int,
                  port: int = 9100) -> int:
    """How many of ``count`` UDP datagrams ``sender`` sends to ``receiver`` arrive."""
    inbox = socket_in_namespace(network.namespace(receiver), socket.SOCK_DGRAM)
    outbox = socket_in_namespace(network.namespace(sender), socket.SOCK_DGRAM)
    with inbox, outbox:
        inbox.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        inbox.bind((network.address(receiver), port))
        for number in range(count):
            outbox.sendto(number.to_bytes(4, "big"), (network.address(receiver), port))
            if number % 50 == 49:
                time.sleep(0.002)  # stay far below the receive buffer
        inbox.settimeout(0.3)
        received = set()
        try:
            while True:
                received.add(int.from_bytes(inbox.recv(16), "big"))
        except TimeoutError:
            pass
    return len(received)
