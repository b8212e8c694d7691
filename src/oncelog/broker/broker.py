"""The broker process: owns the state holders and runs the listener and background tasks.

``Broker.run()`` opens the data directory (locked against a second broker), loads topics,
creates ``__consumer_offsets`` if missing and rebuilds the group coordinator from it (and the
transaction coordinator from ``__transaction_state``, which the first FindCoordinator for a
transactional id creates), listens, and runs the group-commit flusher, the
group coordinator's timer (session, join and sync deadlines), the transaction coordinator's
timers (timed-out transactions, expired transactional ids) and the periodic log maintenance
(time-based segment rolls, retention, compaction) in one ``asyncio.TaskGroup`` until
``request_stop()``.

With ``zookeeper.connect`` set the broker is a member of a cluster: its metadata store is
ZooKeeper, it registers itself (refusing to start when a live broker has its ``node.id``),
hosts only the replicas assigned to it, and runs ``membership`` (metadata sync,
follower fetchers, ISR changes, the leadership lease, the controller role) beside the tasks
above. ``__consumer_offsets`` and ``__transaction_state`` are then created on the first
FindCoordinator of their kind, with ``offsets.topic.replication.factor`` /
``transaction.state.log.replication.factor`` replicas (at most the live brokers), as Kafka
does, and each coordinator follows the leadership of its topic's partitions. A
stop (SIGTERM, SIGINT) is a controlled shutdown first when ``controlled.shutdown.enable``.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import logging
import os
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ..config import BrokerConfig, ConfigError
from ..controller.metadata_store import LocalMetadataStore
from ..controller.live_brokers import LiveBrokers
from ..controller.store import (BrokerRegistration, Endpoint, MetadataChange, MetadataEvent,
                                MetadataStore, NodeIdInUse, StoreCalls, StoreUnavailable)
from ..coordinator.leadership import CoordinatorLeadership
from ..coordinator.transaction.markers import connect_with
from ..net.client import CLIENT_ID
from ..net.connector import PLAINTEXT, inter_broker
from ..partition import LeadershipLease, PartitionManager
from ..security.principal import ANONYMOUS, PrincipalMapper
from ..security.sasl import SaslServer, sasl_mechanisms
from ..security.tls import server_context, watch_handshakes
from .limits import limits_for
from .listeners import parse_listeners
from .server import Connection
from .services import ClusterIdentity, build_services
from .writable import WriteWaiter

if TYPE_CHECKING:
    from ..membership import ClusterMembership

log = logging.getLogger(__name__)
# what other brokers' requests carry (fetchers, markers, verification): kept when the
# clients' connections are dropped
BROKER_CLIENT_ID = CLIENT_ID.decode()


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Broker:
    def __init__(self, config: BrokerConfig, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.clock = clock
        self.node_id: int = config["node.id"]
        self.listeners = parse_listeners(config)
        # each TLS listener's context and principal mapping, read now: a setting that cannot
        # be used stops the broker before it opens its data
        self._tls: dict[str, tuple[ssl.SSLContext, PrincipalMapper]] = {
            e.listener: (server_context(config, e.listener), PrincipalMapper(
                config.for_listener(e.listener, "ssl.principal.mapping.rules")))
            for e in self.listeners.bound if e.security_protocol in ("SSL", "SASL_SSL")}
        # each SASL listener's mechanisms; every SASL connection checks the same credentials
        self._sasl: dict[str, tuple[str, ...]] = {
            e.listener: sasl_mechanisms(config, e.listener)
            for e in self.listeners.bound if e.security_protocol.startswith("SASL_")}
        # how this broker reaches the others (fetchers, transaction markers and
        # verification): the inter-broker listener's protocol, TLS context and SASL login,
        # read now so that a login that cannot work stops the broker before it starts
        self.connector = PLAINTEXT
        if config["zookeeper.connect"]:
            inter = self.listeners.advertised_endpoint(self.listeners.inter_broker)
            self.connector = inter_broker(config, inter.listener, inter.security_protocol)
        self.data_dir = config.data_dir
        # the cluster id and (when configured as 0) advertised ports are filled in by run()
        self.identity = ClusterIdentity(bool(config["zookeeper.connect"]),
                                        self.listeners.advertised)
        self.cluster_mode = self.identity.cluster_mode
        self.store: MetadataStore
        self.lease: LeadershipLease | None
        if self.cluster_mode:
            from ..controller.zookeeper_store import ZooKeeperMetadataStore
            self.store = ZooKeeperMetadataStore(
                config["zookeeper.connect"],
                session_timeout_ms=config["zookeeper.session.timeout.ms"],
                connection_timeout_ms=config["zookeeper.connection.timeout.ms"],
                node_id=self.node_id, connect_attempt_timeout_s=2.0,
                inter_broker_listener=self.listeners.inter_broker)
            self.lease = LeadershipLease(self._lease_duration_s())
        else:
            self.store = LocalMetadataStore(self.data_dir, self.node_id)
            self.lease = None
        # every store call of the running broker: on threads of their own, awaited
        self.store_calls = StoreCalls()
        self.partitions = PartitionManager(config, self.store, clock, self.node_id,
                                           lease=self.lease, calls=self.store_calls)
        self.partitions.live_broker_ids = lambda: sorted(self.live_brokers) or [self.node_id]
        self.write_waiter: WriteWaiter | None = None  # the event loop's, made by run()
        # this broker's view of the cluster: live brokers and the controller
        self.brokers = LiveBrokers()
        self.servers: list[asyncio.Server] = []  # one per listener, made by run()
        # what request handlers use, and nothing else of the broker (services.py)
        self.services = build_services(config, self.identity, self.partitions, self.store,
                                       self.store_calls, self.brokers, clock,
                                       connect_with(self.connector))
        self.flusher = self.services.flusher
        self.producer_ids = self.services.producer_ids
        self.offsets_topic = self.services.offsets_topic
        self.group_coordinator = self.services.group_coordinator
        self.transaction_state_topic = self.services.transaction_state_topic
        self.transaction_coordinator = self.services.transaction_coordinator
        self.transaction_markers = self.transaction_coordinator.markers
        self.credentials = self.services.scram_users.credentials  # what SASL checks
        self._warn_of_an_unauthorized_inter_broker_principal()
        self.connections: set[Connection] = set()
        # requests that run to their end though their client left (server.py), cancelled
        # when the broker stops
        self.finishing_requests: set[asyncio.Task] = set()
        self.membership: ClusterMembership | None = None  # in cluster mode
        self._stop: asyncio.Event | None = None
        self._lock_fd: int | None = None

    def _warn_of_an_unauthorized_inter_broker_principal(self) -> None:
        """With ACLs on, brokers need ClusterAction on the cluster to replicate and to write
        transaction markers; they are who their inter-broker connection says (the SASL login,
        or User:ANONYMOUS over PLAINTEXT, as in Kafka), which usually belongs in super.users.
        (A certificate's principal is the other broker's to map: not checked here.)"""
        authorizer = self.services.acls.authorizer
        if not (self.cluster_mode and authorizer.enabled):
            return
        login = self.connector.login
        principal = (f"User:{login.username}" if login is not None
                     else ANONYMOUS if self.connector.protocol == "PLAINTEXT" else None)
        if principal is not None and principal not in authorizer.super_users:
            log.warning("broker %d: brokers reach each other on listener %s as %s, which is "
                        "not in super.users: unless an ACL allows it ClusterAction on the "
                        "cluster, replication and transaction markers are refused",
                        self.node_id, self.listeners.inter_broker, principal)

    @property
    def cluster_id(self) -> str:
        return self.identity.cluster_id

    @property
    def listen_host(self) -> str:
        return self.listeners.bound[0].host

    @property
    def listen_port(self) -> int:
        """The first listener's port (as bound, once run() listens)."""
        return self.listeners.bound[0].port

    @property
    def advertised_host(self) -> str:
        """Where other brokers reach this one (its inter-broker listener)."""
        return self.listeners.advertised_endpoint(self.listeners.inter_broker).host

    @property
    def advertised_port(self) -> int:
        return self.listeners.advertised_endpoint(self.listeners.inter_broker).port

    @property
    def live_brokers(self) -> dict[int, BrokerRegistration]:
        return self.brokers.live

    @property
    def controller_id(self) -> int:
        return self.brokers.controller_id

    def registration(self) -> BrokerRegistration:
        return BrokerRegistration(self.node_id, self.advertised_host, self.advertised_port,
                                  endpoints=self.listeners.advertised)

    def _lease_duration_s(self) -> float:
        # A safety margin below the session timeout: ZooKeeper cannot expire our session,
        # and so nobody can replace us, sooner than a session after we last heard from it.
        return 0.8 * self.config["zookeeper.session.timeout.ms"] / 1000

    def request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def _lock_data_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.data_dir / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(self._lock_fd, 32).decode(errors="replace").strip()
            os.close(self._lock_fd)
            self._lock_fd = None
            owner = f" (pid {holder})" if holder.isdigit() else ""
            raise ConfigError(f"data directory {self.data_dir} is in use by another "
                              f"broker{owner}") from None
        # The flock is the lock; the pid in the file only names its holder to the next one.
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, f"{os.getpid()}\n".encode(), 0)

    async def run(self, on_ready: Callable[[Broker], None] | None = None) -> None:
        self._stop = asyncio.Event()
        self._lock_data_dir()
        for name in self.config.ignored:
            log.warning("config %r is not used by oncelog; ignoring it", name)
        if self.cluster_mode:
            await self._join_cluster()
        else:
            self.identity.cluster_id = self.store.cluster_id(self.config["cluster.id"])
            self.partitions.load()
            await self.offsets_topic.create_if_missing(self.config)
            self.group_coordinator.load()
            if self.transaction_state_topic.partition_count:  # created by a first producer
                self.transaction_coordinator.load()
        loop = asyncio.get_running_loop()
        self.write_waiter = WriteWaiter(loop)
        try:
            # In cluster mode the sockets are bound (so advertised ports are known) but
            # nothing is accepted until this broker is registered and holds the cluster's
            # view: a restarted broker must not answer Metadata with an empty cluster.
            await self._listen(loop)
        except ConfigError:
            for server in self.servers:
                server.close()
            self.partitions.close()
            self.write_waiter.close()
            raise
        if self.cluster_mode:
            assert self.membership is not None  # made by _join_cluster in cluster mode
            try:
                self.membership.watch()
                await asyncio.to_thread(self._register_in_cluster)
                await self.membership.sync.read_everything()
            except (ConfigError, StoreUnavailable) as error:
                for server in self.servers:
                    server.close()
                self.write_waiter.close()
                self.partitions.close()
                await asyncio.to_thread(self.store.close)
                raise ConfigError(str(error)) from None
            for server in self.servers:
                await server.start_serving()
        else:
            self._register()
        listening = ", ".join(
            f"{bound.url()}" + (f" (advertised as {advertised.host}:{advertised.port})"
                                if (advertised.host, advertised.port) != (bound.host, bound.port)
                                else "")
            for bound, advertised in zip(self.listeners.bound, self.listeners.advertised))
        log.info("broker %d listening on %s, data in %s, cluster %s", self.node_id, listening,
                 self.data_dir, self.cluster_id)
        if on_ready is not None:
            on_ready(self)
        try:
            async with asyncio.TaskGroup() as tasks:
                background = [tasks.create_task(self.flusher.run()),
                              tasks.create_task(self._maintain_logs()),
                              tasks.create_task(self.group_coordinator.timer.run()),
                              tasks.create_task(self.transaction_coordinator.run())]
                if self.membership is not None:
                    background.append(tasks.create_task(self.membership.run()))
                await self._stop.wait()
                log.info("stopping broker %d", self.node_id)
                if self.membership is not None and self.config["controlled.shutdown.enable"]:
                    await self.membership.controlled_shutdown()
                for task in background:
                    task.cancel()
        finally:
            for server in self.servers:
                server.close()
            self.transaction_coordinator.close()
            self.transaction_markers.close()
            self.services.transaction_verifier.close()
            for connection in list(self.connections):
                connection.transport.close()
            for task in list(self.finishing_requests):
                task.cancel()
            for server in self.servers:
                await server.wait_closed()
            self.write_waiter.close()
            self.partitions.close()
            if self.cluster_mode:
                await asyncio.to_thread(self.store.close)
            self.store_calls.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
            log.info("broker %d stopped cleanly", self.node_id)

    async def _listen(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bind every listener (not yet accepting in cluster mode); fill in ports given as 0."""
        await self._load_security(loop)
        for endpoint in self.listeners.bound:
            context, principals = self._tls.get(endpoint.listener, (None, None))
            mechanisms = self._sasl.get(endpoint.listener)
            sasl = None if mechanisms is None else functools.partial(
                SaslServer, mechanisms, self.credentials,
                self.config.for_listener(endpoint.listener, "connections.max.reauth.ms"))
            handshake_s = limits_for(self, loop.call_soon).read_timeout_ms / 1000
            if context is not None:
                watch_handshakes(context, functools.partial(self._tls_refused, endpoint),
                                 handshake_s)
            try:
                server = await loop.create_server(
                    functools.partial(Connection, self, endpoint.listener, context is not None,
                                      None if sasl else principals, sasl),
                    endpoint.host, endpoint.port, reuse_address=True, backlog=1024,
                    ssl=context, ssl_handshake_timeout=handshake_s if context else None,
                    start_serving=not self.cluster_mode)
            except OSError as error:
                # asyncio's strerror is "error while attempting to bind on address (host,
                # port): ...": the address is said once, here, and the cause in the OS's words.
                reason = os.strerror(error.errno).lower() if error.errno else str(error)
                which = (f" (listener {endpoint.listener})" if len(self.listeners.bound) > 1
                         else "")
                raise ConfigError(f"cannot listen on {endpoint.host}:{endpoint.port}: "
                                  f"{reason}{which}") from None
            self.servers.append(server)
            if endpoint.port == 0:
                self.listeners = self.listeners.with_port(
                    endpoint.listener, server.sockets[0].getsockname()[1])
        self.identity.endpoints = self.listeners.advertised

    async def _load_security(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read the store's SCRAM credentials and ACLs, and again whenever they change (in a
        cluster, another broker or an administrator may change them)."""
        self.credentials.replace(await asyncio.to_thread(self.store.scram_credentials))
        await self.services.acls.reread()
        again = (MetadataChange.WATCHES_RESET, MetadataChange.SESSION_RESTORED)

        def changed(event: MetadataEvent) -> None:  # the store's thread
            if event.change in (MetadataChange.USERS, *again):
                loop.call_soon_threadsafe(self._reread, self.services.scram_users.reread,
                                          "the users' SCRAM credentials")
            if event.change in (MetadataChange.ACLS, *again):
                loop.call_soon_threadsafe(self._reread, self.services.acls.reread, "the ACLs")

        self.store.watch(changed)
        await asyncio.to_thread(self.store.watch_users)
        if self.services.acls.authorizer.enabled:
            await asyncio.to_thread(self.store.watch_acls)

    def _reread(self, read: Callable[[], Awaitable[None]], what: str) -> None:
        async def reread() -> None:
            try:
                await read()
            except StoreUnavailable as error:
                log.warning("cannot read %s: %s", what, error)
        task = asyncio.get_running_loop().create_task(reread())
        self.finishing_requests.add(task)
        task.add_done_callback(self.finishing_requests.discard)

    def _tls_refused(self, endpoint: Endpoint, reason: str) -> None:
        """A TLS handshake on ``endpoint`` failed: one line per listener and interval."""
        limits_for(self).rejections.warning(
            f"TLS handshake: {reason}", endpoint.listener,
            "closing a connection to listener %s: TLS handshake failed: %s", endpoint.listener,
            reason)

    async def _join_cluster(self) -> None:
        """Connect to ZooKeeper (retrying, one line per attempt) and read the cluster."""
        from ..membership import ClusterMembership
        from ..controller.zookeeper_store import ZooKeeperMetadataStore
        assert isinstance(self.store, ZooKeeperMetadataStore)  # cluster mode's
        try:
            await asyncio.to_thread(self.store.connect)
            self.identity.cluster_id = await asyncio.to_thread(self.store.cluster_id,
                                                               self.config["cluster.id"])
        except StoreUnavailable as error:
            raise ConfigError(str(error)) from None
        assert self.lease is not None  # a broker in a cluster holds a leadership lease
        leadership = CoordinatorLeadership(self.node_id, self.partitions,
                                           self.group_coordinator, self.transaction_coordinator)
        self.membership = ClusterMembership(
            self.config, self.store, self.store_calls, self.partitions, self.lease,
            self.brokers, self.registration, on_applied=leadership.follow,
            on_lease_lapsed=self._drop_client_connections, connector=self.connector)

    def _drop_client_connections(self) -> None:
        """Close every connection but the other brokers' replication ones (the lease ran
        out: see ``ClusterMembership._lease_loop``)."""
        dropped = 0
        for connection in list(self.connections):
            if connection.client_id != BROKER_CLIENT_ID:
                connection.transport.close()
                dropped += 1
        if dropped:
            log.info("closed %d client connections", dropped)

    def _register_in_cluster(self) -> None:
        """Register (after listening, so the advertised port is known), in a thread; the
        caller then reads the cluster's state."""
        assert self.membership is not None
        session_s = self.config["zookeeper.session.timeout.ms"] / 1000
        deadline = time.monotonic() + session_s + 2
        while True:
            try:
                self.membership.register()
                break
            except NodeIdInUse:
                other = self.store.live_brokers().get(self.node_id)
                ours = other is not None and (other.host, other.port) == (
                    self.advertised_host, self.advertised_port)
                # Our own previous incarnation (killed, restarted within its session):
                # ZooKeeper removes its registration when that session expires; wait.
                if ours and time.monotonic() < deadline:
                    log.info("node.id %d is still registered by this broker's previous "
                             "session; waiting for it to expire", self.node_id)
                    time.sleep(0.5)
                    continue
                where = f" at {other.host}:{other.port}" if other else ""
                raise ConfigError(f"node.id {self.node_id} is already registered by a live "
                                  f"broker{where}; give each broker its own node.id") from None

    def _register(self) -> None:
        registration = self.store.register_broker(self.registration())
        self.brokers.update(self.store.live_brokers() or {self.node_id: registration})
        if self.store.try_become_controller(self.node_id):
            self.brokers.controller_id = self.node_id
        else:
            self.brokers.controller_id = self.store.controller_id()

    async def _maintain_logs(self) -> None:
        interval = self.config["log.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.partitions.run_log_maintenance()
            except OSError as error:
                log.error("log maintenance failed: %s", error)
