"""A fault-injecting TCP proxy that understands Kafka framing.

It forwards every client connection to one upstream broker and, by rule or at random with a
seed, can:

- **drop a response after its request was delivered** (the broker did the work, the client
  never hears): ``drop_response_rate`` for the API keys in ``drop_api_keys`` (Produce by
  default). With ``drop_mode="close"`` the proxy then cuts the connection, so the client
  notices at once and retries (what a broken network looks like to it); with
  ``"silent"`` it only swallows the response and the client waits for its request timeout;
  with ``"request"`` it swallows the *request* instead (never forwarded: the broker never
  writes it, while later requests on the connection are written), and the client's retry
  after its request timeout lands behind them - what a retriable error on one request of
  several in flight does (the reordered control's fault, ``scenario.CONTROLS``);
- **delay** traffic in both directions (``delay_ms``);
- **cut** a connection before a request is forwarded (``cut_rate``): nothing was done.

Responses that carry broker addresses (Metadata, FindCoordinator, DescribeCluster, and the
new leaders' endpoints of KIP-951 in Produce v10+ and Fetch v16+ responses) are rewritten to
name the proxy, so clients keep talking through it. One proxy fronts a single
broker: every broker address is rewritten to the proxy's own. A cluster gets a
``ProxyGroup``: a proxy per broker, each rewriting every broker's address to *that broker's*
proxy (``addresses``), so a client still follows leaders from broker to broker, always
through a proxy; the group's rules apply to all of them.

Use ``FaultProxy`` inside an event loop, or ``ProxyThread`` from synchronous code (tests, the
verifier): it runs the proxy on its own loop in a daemon thread. Every decision comes from
one ``random.Random(seed)``, and ``stats`` counts what was done and records the version of
each API clients sent (what a client asks of the broker: docs/compatibility.md's tables).
"""

from __future__ import annotations

import asyncio
import logging
import random
import struct
import threading
from dataclasses import dataclass, field

from ..protocol import messages
from ..protocol.api_keys import ApiKey

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_REQUEST_HEAD = struct.Struct(">hhi")
_ADDRESS_APIS = {ApiKey.METADATA, ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_CLUSTER}
# KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the new leader (NodeEndpoints) from these
# versions on. Apache Kafka 4 fills it in for a topic created a moment ago; librdkafka then
# moved its connection to the broker's own address ("Broker hostname updated"), dropping the
# produce requests in flight - a plain producer wrote them twice - and leaving the proxy.
_ENDPOINT_VERSIONS: dict[int, int] = {ApiKey.PRODUCE: 10, ApiKey.FETCH: 16}


@dataclass
class FaultRules:
    drop_response_rate: float = 0.0
    drop_api_keys: frozenset[int] = frozenset({ApiKey.PRODUCE})
    drop_mode: str = "close"  # or "silent", or "request"
    delay_ms: float = 0.0
    cut_rate: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.drop_mode not in ("close", "silent", "request"):
            raise ValueError(f"drop_mode must be 'close', 'silent' or 'request', not "
                             f"{self.drop_mode!r}")
        for name in ("drop_response_rate", "cut_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")


@dataclass
class ProxyStats:
    connections: int = 0
    requests: int = 0
    dropped_responses: int = 0
    dropped_requests: int = 0   # drop_mode "request": counted in dropped_responses too
    cut_connections: int = 0
    rewritten_responses: int = 0
    dropped_by_api: dict[int, int] = field(default_factory=dict)
    # API key -> the versions clients sent it at: what a client asks of this broker
    versions_by_api: dict[int, set[int]] = field(default_factory=dict)


class FaultProxy:
    def __init__(self, upstream: str, rules: FaultRules | None = None,
                 listen: str = "127.0.0.1:0",
                 addresses: dict[tuple[str, int], tuple[str, int]] | None = None) -> None:
        # addresses: broker (host, port) -> its proxy's; None: every broker -> this proxy
        self.addresses = addresses
        self.upstream_host, upstream_port = upstream.rsplit(":", 1)
        self.upstream_port = int(upstream_port)
        self.rules = rules or FaultRules()
        self.listen_host, listen_port = listen.rsplit(":", 1)
        self.listen_port = int(listen_port)
        self.random = random.Random(self.rules.seed)
        self.stats = ProxyStats()
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()
        # the brokers' host names seen in rewritten responses: a Produce or Fetch response
        # naming none of them carries no endpoint to rewrite and is forwarded undecoded
        self._broker_hosts: set[bytes] = {host.encode() for host, _ in addresses or {}}

    @property
    def bootstrap(self) -> str:
        return f"{self.listen_host}:{self.listen_port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.listen_host, self.listen_port)
        self.listen_port = self._server.sockets[0].getsockname()[1]
        log.info("fault proxy on %s -> %s:%d, rules %s", self.bootstrap, self.upstream_host,
                 self.upstream_port, self.rules)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- one connection --------------------------------------------------------------------

    async def _serve(self, client_reader, client_writer) -> None:
        task = asyncio.current_task()
        assert task is not None  # a connection is served in a task of its own
        self._tasks.add(task)
        self.stats.connections += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                self.upstream_host, self.upstream_port)
        except OSError:
            client_writer.close()
            self._tasks.discard(task)
            return
        cut = asyncio.Event()
        directions = self._directions(client_reader, client_writer, upstream_reader,
                                      upstream_writer, cut)
        try:
            await cut.wait()
        except asyncio.CancelledError:
            pass  # the proxy is stopping; close both sides below
        finally:
            for direction in directions:
                direction.cancel()
            for writer in (client_writer, upstream_writer):
                writer.close()
            await asyncio.gather(*directions, return_exceptions=True)
            self._tasks.discard(task)

    def _directions(self, client_reader, client_writer, upstream_reader, upstream_writer,
                    cut: asyncio.Event) -> list[asyncio.Task]:
        """The two tasks that carry one connection's traffic; each sets ``cut`` when its side
        ends, and ``_serve`` then closes both."""
        pending: dict[int, tuple[int, int, bool]] = {}  # correlation id -> key, version, drop
        return [asyncio.create_task(self._requests(client_reader, upstream_writer, pending, cut)),
                asyncio.create_task(self._responses(upstream_reader, client_writer, pending,
                                                    cut))]

    async def _requests(self, reader, upstream_writer, pending, cut: asyncio.Event) -> None:
        try:
            while True:
                frame = await _read_frame(reader)
                if frame is None:
                    return
                await self._delay()
                if len(frame) >= _REQUEST_HEAD.size + 4:
                    api_key, version, correlation_id = _REQUEST_HEAD.unpack_from(frame, 4)
                    self.stats.requests += 1
                    self.stats.versions_by_api.setdefault(api_key, set()).add(version)
                    if self.rules.cut_rate and self.random.random() < self.rules.cut_rate:
                        self.stats.cut_connections += 1
                        return
                    drop = (api_key in self.rules.drop_api_keys
                            and self.random.random() < self.rules.drop_response_rate)
                    if drop and self.rules.drop_mode == "request":
                        # never forwarded: no response will come for it either
                        self.stats.dropped_requests += 1
                        self.stats.dropped_responses += 1
                        self.stats.dropped_by_api[api_key] = \
                            self.stats.dropped_by_api.get(api_key, 0) + 1
                        continue
                    pending[correlation_id] = (api_key, version, drop)
                upstream_writer.write(frame)
                await upstream_writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            return
        finally:
            cut.set()

    async def _responses(self, upstream_reader, client_writer, pending,
                         cut: asyncio.Event) -> None:
        try:
            while True:
                frame = await _read_frame(upstream_reader)
                if frame is None:
                    return
                await self._delay()
                (correlation_id,) = struct.unpack_from(">i", frame, 4)
                api_key, version, drop = pending.pop(correlation_id, (None, 0, False))
                if drop:
                    self.stats.dropped_responses += 1
                    dropped = self.stats.dropped_by_api
                    dropped[api_key] = dropped.get(api_key, 0) + 1
                    if self.rules.drop_mode == "close":
                        return
                    continue
                if self._names_brokers(frame, api_key, version):
                    frame = self._rewrite_addresses(frame, api_key, version)
                client_writer.write(frame)
                await client_writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            return
        finally:
            cut.set()

    async def _delay(self) -> None:
        if self.rules.delay_ms:
            await asyncio.sleep(self.rules.delay_ms / 1000)

    # -- address rewriting -----------------------------------------------------------------

    def _names_brokers(self, frame: bytes, api_key: int, version: int) -> bool:
        """Whether the response may carry broker addresses to rewrite."""
        if api_key in _ADDRESS_APIS:
            return True
        since = _ENDPOINT_VERSIONS.get(api_key)
        return (since is not None and version >= since
                and any(host in frame for host in self._broker_hosts))

    def _rewrite_addresses(self, frame: bytes, api_key: int, version: int) -> bytes:
        flexible = messages.is_flexible(api_key, version) and api_key != ApiKey.API_VERSIONS
        body_start = 4 + 4 + (1 if flexible else 0)
        try:
            response = messages.RESPONSES[api_key].decode(frame[body_start:], version=version)
        except Exception as error:  # leave what we cannot parse alone
            log.warning("proxy: cannot parse %s v%d response: %s", ApiKey(api_key).name,
                        version, error)
            return frame
        def proxied(host: str, port: int) -> tuple[str, int]:
            self._broker_hosts.add(host.encode())
            if self.addresses is None:
                return self.listen_host, self.listen_port
            return self.addresses.get((host, port), (host, port))

        if api_key == ApiKey.METADATA or api_key == ApiKey.DESCRIBE_CLUSTER:
            for broker in response.brokers:
                broker.host, broker.port = proxied(broker.host, broker.port)
        elif api_key == ApiKey.FIND_COORDINATOR:
            if version >= 4:
                for coordinator in response.coordinators:
                    if coordinator.error_code == 0:
                        coordinator.host, coordinator.port = proxied(coordinator.host,
                                                                     coordinator.port)
            elif response.error_code == 0:
                response.host, response.port = proxied(response.host, response.port)
        else:  # Produce, Fetch (_ENDPOINT_VERSIONS)
            for node in response.node_endpoints or ():
                node.host, node.port = proxied(node.host, node.port)
        response._header = None  # the codec's decoder leaves this slot unset; encode reads it
        try:
            body = bytes(response.encode(version=version))
        except Exception as error:
            log.warning("proxy: cannot re-encode %s v%d response: %s", ApiKey(api_key).name,
                        version, error)
            return frame
        self.stats.rewritten_responses += 1
        payload = frame[4:body_start] + body
        return _SIZE.pack(len(payload)) + payload


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError:
        return None
    (size,) = _SIZE.unpack(head)
    if size < 0 or size > 200 * 1024 * 1024:
        return None
    return head + await reader.readexactly(size)


class ThreadedProxy:
    """A proxy (anything with async ``start``/``stop``, ``bootstrap`` and ``stats``) on its
    own event loop in a daemon thread, for synchronous callers; a context manager."""

    def __init__(self, proxy, name: str) -> None:
        self.proxy = proxy
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name=name)

    @property
    def bootstrap(self) -> str:
        return self.proxy.bootstrap

    @property
    def stats(self):
        return self.proxy.stats

    def start(self):
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self.proxy.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class ProxyThread(ThreadedProxy):
    """A ``FaultProxy`` on its own event loop in a daemon thread, for synchronous callers."""

    def __init__(self, upstream: str, rules: FaultRules | None = None,
                 listen: str = "127.0.0.1:0",
                 addresses: dict[tuple[str, int], tuple[str, int]] | None = None) -> None:
        super().__init__(FaultProxy(upstream, rules, listen, addresses), "fault-proxy")

    def set_rules(self, rules: FaultRules) -> None:
        """Replace the rules mid-run and reseed the random source from ``rules.seed``
        (the verifier's drop-acks fault: its own rate and seed for each window)."""
        def apply() -> None:
            self.proxy.rules = rules
            self.proxy.random = random.Random(rules.seed)
        self._loop.call_soon_threadsafe(apply)


class ProxyGroup:
    """A ``ProxyThread`` per broker of a cluster (``upstreams``: the brokers' HOST:PORT),
    with the interface of one: ``bootstrap`` lists the proxies, ``set_rules`` applies to
    every proxy (each reseeded with ``rules.seed`` plus its index), ``stats`` adds theirs
    up. A single upstream is a group of one."""

    def __init__(self, upstreams: list[str]) -> None:
        self.addresses: dict[tuple[str, int], tuple[str, int]] = {}
        self.proxies = [ProxyThread(upstream, addresses=self.addresses)
                        for upstream in upstreams]

    @property
    def bootstrap(self) -> str:
        return ",".join(proxy.bootstrap for proxy in self.proxies)

    @property
    def stats(self) -> ProxyStats:
        total = ProxyStats()
        for proxy in self.proxies:
            for name in ("connections", "requests", "dropped_responses", "dropped_requests",
                         "cut_connections", "rewritten_responses"):
                setattr(total, name, getattr(total, name) + getattr(proxy.stats, name))
            for api_key, count in proxy.stats.dropped_by_api.items():
                total.dropped_by_api[api_key] = total.dropped_by_api.get(api_key, 0) + count
        return total

    def set_rules(self, rules: FaultRules) -> None:
        from dataclasses import replace
        for index, proxy in enumerate(self.proxies):
            proxy.set_rules(replace(rules, seed=rules.seed + index))

    def start(self) -> ProxyGroup:
        try:
            for proxy in self.proxies:
                proxy.start()
                upstream = (proxy.proxy.upstream_host, proxy.proxy.upstream_port)
                self.addresses[upstream] = (proxy.proxy.listen_host, proxy.proxy.listen_port)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for proxy in self.proxies:
            proxy.stop()
