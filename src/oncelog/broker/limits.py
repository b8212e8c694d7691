"""What one client may cost the broker: memory, connections, time and log lines.

Anything may connect and send anything, so every resource a client can make the broker hold
is bounded here, under Kafka's config names where Kafka has one:

- ``MemoryPool`` (``queued.max.request.bytes``): the bytes of requests received but not yet
  answered, of receive buffers grown for frames still arriving, and of responses waiting to
  be written. It never refuses memory that already exists (a decoded request, a built
  response): it records it, and while the pool is full every connection stops reading, so no
  new request is decoded until responses drain (Kafka's ``MemoryPool`` + muted channels).
  Buffers for frames still arriving may take only half of it (``PARTIAL_FRAME_SHARE``), so
  clients trickling huge frames cannot stop the requests already read from being answered.
- ``ConnectionQuotas`` (``max.connections``, ``max.connections.per.ip``): a connection
  beyond either is closed as soon as it is accepted.
- ``RateLimitedLog``: rejected connections and requests are logged one line per kind per
  source per interval, with a count of what the interval suppressed, so that a flood of
  bad input cannot turn the log into the attack.

Idle connections (``connections.max.idle.ms``) and frames that arrive too slowly
(``socket.request.read.timeout.ms``, oncelog's own) are timed by each ``Connection`` in
``server.py``; ``ConnectionLimits`` only carries their settings.

Known divergences from Kafka: Kafka's ``queued.max.request.bytes`` defaults to -1 (no bound)
and counts requests only; ours defaults to 256 MiB and also counts grown receive buffers and
responses being written. Kafka has no bound on how long one frame may take to arrive.
"""

from __future__ import annotations

import collections
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)

_UNBOUNDED = 1 << 62  # queued.max.request.bytes=-1 (or 0)
PARTIAL_FRAME_SHARE = 0.5  # of the pool, at most, for receive buffers of frames still arriving


class MemoryWaiter(Protocol):
    def memory_needed(self) -> tuple[int, bool, int]:
        """(bytes wanted, for a frame still arriving?, partial-frame bytes it holds already)"""

    def memory_available(self) -> None: ...


class MemoryPool:
    """A broker-wide count of bytes held for clients, with connections waiting for room.

    ``try_reserve`` refuses when the bytes would not fit (memory not allocated yet: a
    receive buffer about to grow); ``charge`` always records (memory that already exists).
    ``release`` returns bytes and, once a waiting connection's need fits, wakes it - from the
    event loop, never from inside ``release`` - in the order connections started waiting.

    A reservation that could never fit (a frame of ``socket.request.max.bytes`` in a pool
    smaller than twice that) is granted when its connection would be the only holder of
    partial-frame memory, so it waits for the pool to drain but never forever (Kafka's
    non-strict ``SimpleMemoryPool`` likewise lets one allocation overshoot).
    """

    def __init__(self, capacity: int, call_soon: Callable[[Callable[[], None]], object]
                 | None = None) -> None:
        self.capacity = capacity
        self.partial_capacity = int(capacity * PARTIAL_FRAME_SHARE)
        self.used = 0
        self.partial_used = 0
        self.peak = 0
        self._waiters: collections.OrderedDict[int, MemoryWaiter] = collections.OrderedDict()
        self._call_soon = call_soon
        self._wake_scheduled = False

    @property
    def exhausted(self) -> bool:
        return self.used >= self.capacity

    def fits(self, nbytes: int, partial_frame: bool = False, held: int = 0) -> bool:
        if nbytes <= 0:
            return not self.exhausted
        if partial_frame and self.partial_used == held and self.used == held:
            return True  # alone: granted even beyond the bounds, rather than never
        if self.used + nbytes > self.capacity:
            return False
        return not partial_frame or self.partial_used + nbytes <= self.partial_capacity

    def try_reserve(self, nbytes: int, *, partial_frame: bool = False, held: int = 0) -> bool:
        if not self.fits(nbytes, partial_frame, held):
            return False
        self.charge(nbytes, partial_frame=partial_frame)
        return True

    def charge(self, nbytes: int, *, partial_frame: bool = False) -> None:
        self.used += nbytes
        if partial_frame:
            self.partial_used += nbytes
        self.peak = max(self.peak, self.used)

    def release(self, nbytes: int, *, partial_frame: bool = False) -> None:
        if not nbytes:
            return
        self.used -= nbytes
        if partial_frame:
            self.partial_used -= nbytes
        assert self.used >= 0 and self.partial_used >= 0, (self.used, self.partial_used)
        if self._waiters:
            self._schedule_wake()

    def wait(self, waiter: MemoryWaiter) -> None:
        """Call ``waiter.memory_available()`` once ``waiter.memory_needed()`` fits."""
        self._waiters[id(waiter)] = waiter

    def forget(self, waiter: MemoryWaiter) -> None:
        self._waiters.pop(id(waiter), None)

    def _schedule_wake(self) -> None:
        if self._wake_scheduled:
            return
        if self._call_soon is None:
            self._wake()
            return
        self._wake_scheduled = True
        self._call_soon(self._wake)

    def _wake(self) -> None:
        self._wake_scheduled = False
        for key, waiter in list(self._waiters.items()):
            if self.exhausted:
                return
            if key in self._waiters and self.fits(*waiter.memory_needed()):
                del self._waiters[key]
                waiter.memory_available()  # it reserves what it needs, or waits again


class ConnectionQuotas:
    """Open connections, in total and per client address."""

    def __init__(self, max_connections: int, max_connections_per_ip: int) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.total = 0
        self.per_ip: collections.Counter[str] = collections.Counter()

    def admit(self, ip: str) -> str | None:
        """Count a new connection in, or return why it is refused (and count nothing)."""
        if self.total >= self.max_connections:
            return f"max.connections={self.max_connections} reached"
        if self.per_ip[ip] >= self.max_connections_per_ip:
            return f"max.connections.per.ip={self.max_connections_per_ip} reached for {ip}"
        self.total += 1
        self.per_ip[ip] += 1
        return None

    def release(self, ip: str) -> None:
        self.total -= 1
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]


class RateLimitedLog:
    """One line per (kind, source) per interval; the rest are counted and summarised.

    The first event of a kind from a source is logged at once. Later ones within
    ``interval_s`` are only counted; the next line for that (kind, source) after the
    interval says how many were suppressed. At most ``max_keys`` (kind, source) pairs are
    remembered, so a flood from many addresses cannot grow this table without bound: past
    that, sources are folded into one ``"other sources"`` entry.
    """

    OTHER = "other sources"

    def __init__(self, logger: logging.Logger, interval_s: float = 10.0, *,
                 clock: Callable[[], float] = time.monotonic, max_keys: int = 1024) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self.max_keys = max_keys
        # (kind, source) -> [time of the last line written, events suppressed since]
        self._entries: dict[tuple[str, str], list] = {}

    def warning(self, kind: str, source: str, message: str, *args) -> bool:
        """Log ``message % args`` unless (kind, source) was logged within the interval.

        Returns whether a line was written.
        """
        now = self.clock()
        key = (kind, source)
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= self.max_keys:
                self._expire(now)
                if len(self._entries) >= self.max_keys:
                    key = (kind, self.OTHER)
                    entry = self._entries.get(key)
        if entry is not None and now - entry[0] < self.interval_s:
            entry[1] += 1
            return False
        suppressed = entry[1] if entry is not None else 0
        self._entries[key] = [now, 0]
        if suppressed and entry is not None:
            message += " (%d more %s from %s in the last %.0f s were not logged)"
            args += (suppressed, kind, key[1], now - entry[0])
        self.logger.warning(message, *args)
        return True

    def _expire(self, now: float) -> None:
        for key in [k for k, (at, suppressed) in self._entries.items()
                    if now - at >= self.interval_s and not suppressed]:
            del self._entries[key]


@dataclass
class ConnectionLimits:
    """The limits every connection of one broker shares."""

    pool: MemoryPool
    quotas: ConnectionQuotas
    rejections: RateLimitedLog
    idle_ms: int
    read_timeout_ms: int
    failed_authentication_delay_ms: int = 100

    @classmethod
    def from_config(cls, config, call_soon=None) -> ConnectionLimits:
        queued = config["queued.max.request.bytes"]
        return cls(
            pool=MemoryPool(queued if queued > 0 else _UNBOUNDED, call_soon),
            quotas=ConnectionQuotas(config["max.connections"], config["max.connections.per.ip"]),
            rejections=RateLimitedLog(logging.getLogger("oncelog.broker.server"),
                                      config["connections.rejected.log.interval.ms"] / 1000),
            idle_ms=config["connections.max.idle.ms"],
            read_timeout_ms=config["socket.request.read.timeout.ms"],
            failed_authentication_delay_ms=config["connection.failed.authentication.delay.ms"],
        )


_BY_BROKER: weakref.WeakKeyDictionary[object, ConnectionLimits] = weakref.WeakKeyDictionary()


def limits_for(broker, call_soon=None) -> ConnectionLimits:
    """The one ``ConnectionLimits`` of ``broker``, made from its config on first use."""
    limits = _BY_BROKER.get(broker)
    if limits is None:
        limits = _BY_BROKER[broker] = ConnectionLimits.from_config(broker.config, call_soon)
    return limits
