"""What the hostile tests share: the broker's memory as the kernel sees it, attack sockets,
and a well-behaved confluent-kafka client whose acknowledged records are checked after."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.client.reader import read_topic

MIB = 1024 * 1024
_QUIET = logging.getLogger("tests.hostile.librdkafka")
_QUIET.setLevel(logging.CRITICAL)


def memory_kib(pid: int, field: str = "VmRSS") -> int:
    """VmRSS (resident now) or VmHWM (peak resident) of a process, from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(f"{field} not in /proc/{pid}/status")


def open_sockets(bootstrap: str, count: int, timeout: float = 5.0) -> list[socket.socket]:
    host, port = bootstrap.rsplit(":", 1)
    return [socket.create_connection((host, int(port)), timeout=timeout) for _ in range(count)]


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """True once the broker closed ``sock`` (EOF or reset) within ``timeout`` seconds."""
    sock.settimeout(timeout)
    try:
        while True:
            if sock.recv(65536) == b"":
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@contextmanager
def closing_all(sockets: list[socket.socket]) -> Iterator[list[socket.socket]]:
    try:
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


class WellBehavedClient:
    """A confluent-kafka producer with acks=all that remembers what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = 1) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        admin = AdminClient({"bootstrap.servers": bootstrap, "logger": _QUIET})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "linger.ms": 1, "logger": _QUIET})
        self.acknowledged: dict[bytes, tuple[int, int]] = {}
        self.sent = 0

    def _delivered(self, error, message) -> None:
        if error is None:
            self.acknowledged[message.value()] = (message.partition(), message.offset())

    def produce(self, count: int, prefix: str, timeout: float = 15.0) -> float:
        """Produce ``count`` records and wait for them; return the seconds it took."""
        started = time.monotonic()
        for _ in range(count):
            self.producer.produce(self.topic, value=f"{prefix}-{self.sent}".encode(),
                                  on_delivery=self._delivered)
            self.sent += 1
        remaining = self.producer.flush(timeout)
        assert remaining == 0, f"{remaining} records still unacknowledged after {timeout} s"
        return time.monotonic() - started

    def assert_everything_acknowledged_reads_back(self) -> None:
        stored = {r.value: (r.partition, r.offset)
                  for r in read_topic(self.bootstrap, self.topic, timeout_s=15)}
        missing = {v: place for v, place in self.acknowledged.items() if stored.get(v) != place}
        assert not missing, f"{len(missing)} acknowledged records lost or moved: " \
                            f"{sorted(missing)[:5]}"
