"""The cluster's metadata store: ZooKeeper through kazoo, in Kafka's own znode layout.

Everything lives under the chroot of ``zookeeper.connect`` (``127.0.0.1:2181/oncelog``), which
``connect()`` creates when missing, as Kafka does. The layout (docs/cluster.md has the table):

- ``/cluster/id``                      ``{"version":"1","id":...}``, created once
- ``/brokers/ids/<id>``                ephemeral, ``{"version":4,"host","port","endpoints","rack",
                                       ...}``; ``broker_epoch`` is its czxid (Kafka's, KIP-380)
- ``/controller``                      ephemeral ``{"version":1,"brokerid":N,"timestamp":...}``
- ``/controller_epoch``                ``"N"``: bumped in the same transaction that creates
                                       ``/controller``
- ``/brokers/topics/<t>``              ``{"version":3,"topic_id",...,"partitions":{"0":[1,2,3]}}``
- ``/config/topics/<t>``               ``{"version":1,"config":{...}}``
- ``/brokers/topics/<t>/partitions/<p>/state``
                                       ``{"controller_epoch","leader","version":1,
                                       "leader_epoch","isr"}``; written only by compare-and-set
                                       on the znode version (Kafka's zkVersion checks)
- ``/latest_producer_id_block``        ``{"version":1,"broker","block_start","block_end"}``
                                       (strings, as Kafka writes them); a CAS loop

Invariants: a topic znode, its config and the first state of each partition appear together
(one multi-op transaction) and disappear together; a partition state changes only if the
writer names the version it read.

Versions: a topic's ``created_version`` is its znode's czxid (its partitions' first states
are created in the same transaction, so they share it; a partition added later has the
czxid of its own transaction); a partition state's ``version`` is its znode version; a
listing's version is the pzxid of ``/brokers/topics`` (the zxid of the last child created or
deleted). zxids only grow, cluster-wide.

Watches. ZooKeeper watches are one-shot and carry no data, and so do our ``MetadataEvent``
notifications: a listener re-reads what it cares about. kazoo's ``ChildrenWatch``/``DataWatch``
recipes keep the children of ``/brokers/ids`` (BROKERS) and the data of ``/controller``
(CONTROLLER) watched. Topics are watched the way ZooKeeper means watches to be used, by the
reads themselves: ``list_topics(watch=True)`` sets a watch on the children of
``/brokers/topics`` (TOPICS), ``read_topic(name, watch=True)`` one on the topic znode (TOPIC:
it grew), ``partition_state(..., watch=True)`` one on the state znode (PARTITION_STATE with
its topic and partition). Each fires once; the listener's re-read sets the next. So a change
costs every broker one read of what changed (Kafka's brokers likewise learnt of one
partition's change from the controller's LeaderAndIsr, not by reading every state), and the
number of watches is the number of partitions. Watches set by reads do not survive a new
session and may miss changes while disconnected: a reconnection is reported as
WATCHES_RESET (or SESSION_RESTORED), and the listener reads everything again.

Sessions. kazoo's state listener turns LOST (the session expired: our registration and
controller node are gone) into ``SESSION_LOST`` and the next CONNECTED (kazoo opens a new
session by itself) into ``SESSION_RESTORED``; the broker then registers again. Listeners run
on one thread of the store's own ("oncelog-zookeeper-events"), in order, so a listener may
even call the store without deadlocking kazoo.

Known divergences from Kafka: topics are deleted at once (no ``/admin/delete_topics`` and
controller-driven deletion); partition-state writes are not fenced by the controller epoch's
znode version, only by the state's own version.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import queue
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

from kazoo.client import KazooClient
from kazoo.exceptions import (BadVersionError, ConnectionLoss, NodeExistsError, NoNodeError,
                              NotEmptyError, OperationTimeoutError, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from ..security.acl import (AclBinding, AclEntry, PatternType, ResourcePattern, type_from_name,
                            type_name)
from .store import (NO_LEADER, BrokerRegistration, Endpoint, MetadataChange, MetadataEvent,
                    MetadataStore, NodeIdInUse, PartitionState, StoreUnavailable, TopicExists,
                    TopicGrew, TopicListing, TopicRecord, new_cluster_id)

log = logging.getLogger(__name__)

# kazoo logs every refused connection and reconnection at WARNING, often with a traceback;
# this store logs one line per connection attempt and per session change itself instead.
_kazoo_log = logging.getLogger(__name__ + ".kazoo")
_kazoo_log.setLevel(logging.ERROR)

CLUSTER_ID_PATH = "/cluster/id"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
CONFIG_TOPICS_PATH = "/config/topics"
# /config/users/<user>: {"version":1,"config":{"SCRAM-SHA-512":"salt=...",...}}, as Kafka;
# each change also sets /config/users' own data, so that one watch sees every change
CONFIG_USERS_PATH = "/config/users"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"

# ACLs as Kafka's AclAuthorizer keeps them: /kafka-acl/<Type>/<name> (literal patterns) and
# /kafka-acl-extended/prefixed/<Type>/<name>, each {"version":1,"acls":[...]}; every change
# also sets /kafka-acl-changes' data (Kafka adds a sequential child there), one data watch
ACL_PATHS = {PatternType.LITERAL: "/kafka-acl",
             PatternType.PREFIXED: "/kafka-acl-extended/prefixed"}
ACL_CHANGES_PATH = "/kafka-acl-changes"

PERSISTENT_PATHS = (BROKER_IDS_PATH, TOPICS_PATH, CONFIG_TOPICS_PATH, CONFIG_USERS_PATH,
                    *ACL_PATHS.values(), ACL_CHANGES_PATH)

DEFAULT_SESSION_TIMEOUT_MS = 18_000  # Kafka's zookeeper.session.timeout.ms


class _BoundedConnectHandler(SequentialThreadingHandler):  # type: ignore[misc]  # kazoo is untyped
    """kazoo's threading handler, with each TCP connect to a ZooKeeper node bounded by the
    session timeout divided by the number of nodes, as ZooKeeper's own Java client bounds it
    (``ClientCnxn``'s ``connectTimeout``; Kafka's brokers use that client).

    kazoo gives a connect the whole session timeout. A node cut off by a network partition
    drops the SYN instead of refusing it, so a client that tried it first while moving off a
    lost node waited the whole session out there and found its session expired when it
    reached the majority (tests/partitions/test_zookeeper_minority.py: the ensemble's leader
    isolated, the other two elected a new leader in 0.4 s, and two of three brokers lost
    their sessions and their leaderships)."""

    def __init__(self, connect_timeout_s: float) -> None:
        super().__init__()
        self.connect_timeout_s = connect_timeout_s

    def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        timeout = kwargs.get("timeout")
        if timeout is not None:
            kwargs["timeout"] = min(timeout, self.connect_timeout_s)
        return super().create_connection(*args, **kwargs)


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def partition_path(topic: str, index: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{index}"


def partition_state_path(topic: str, index: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{index}/state"


def split_connect(connect: str) -> tuple[str, str]:
    """``"h1:2181,h2:2181/oncelog"`` -> ``("h1:2181,h2:2181", "/oncelog")``."""
    hosts, slash, chroot = connect.strip().partition("/")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    return hosts, chroot


def _json(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def _now_ms() -> str:
    return str(int(time.time() * 1000))  # informational only, as in Kafka's znodes


class _Operations:
    """The operations of one multi-op transaction, recorded so that a transaction can be
    sent again after a lost connection (a kazoo transaction commits only once)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def create(self, path: str, value: bytes = b"", **kwargs: Any) -> None:
        self.calls.append(("create", (path, value), kwargs))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self.calls.append(("set_data", (path, value), {"version": version}))

    def delete(self, path: str, version: int = -1) -> None:
        self.calls.append(("delete", (path,), {"version": version}))

    def commit_async(self, client: KazooClient) -> Any:
        """Its result: one entry per operation, a ZnodeStat, a path, True, or the exception
        that failed it (the others are then RolledBackError)."""
        transaction = client.transaction()
        for name, args, kwargs in self.calls:
            getattr(transaction, name)(*args, **kwargs)
        return transaction.commit_async()


def _failed(results: list[Any]) -> bool:
    return any(isinstance(result, Exception) for result in results)


class ZooKeeperMetadataStore(MetadataStore):
    """``MetadataStore`` over one kazoo session; see the module docstring.

    ``connect`` is Kafka's ``zookeeper.connect`` (hosts, then an optional chroot). Nothing
    happens until ``connect()``. Each ZooKeeper request a method makes waits at most one
    session timeout (2 s at least), then the method raises ``StoreUnavailable``.

    ``client``, when given, is used instead of a new ``KazooClient``: a simulated one
    (``oncelog.simulation.MemoryKazooClient``, its chroot the same as ``connect``'s) that runs
    callbacks only when the simulation says. Then no event thread is started: listeners are
    called as the client runs its callbacks.
    """

    def __init__(self, connect: str, *, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                 connection_timeout_ms: int | None = None, node_id: int = -1,
                 connect_attempt_timeout_s: float = 5.0, connect_retry_backoff_s: float = 1.0,
                 client: KazooClient | None = None,
                 inter_broker_listener: str = "PLAINTEXT") -> None:
        self.hosts, self.chroot = split_connect(connect)
        # which endpoint of a registration other brokers are reached at (every broker of a
        # cluster has the same inter.broker.listener.name)
        self.inter_broker_listener = inter_broker_listener
        if not self.hosts:
            raise ValueError(f"zookeeper.connect {connect!r} names no host")
        self.session_timeout_ms = int(session_timeout_ms)
        # Kafka: zookeeper.connection.timeout.ms defaults to the session timeout.
        self.connection_timeout_ms = int(connection_timeout_ms or session_timeout_ms)
        self.node_id = node_id
        self.connect_attempt_timeout_s = connect_attempt_timeout_s
        self.connect_retry_backoff_s = connect_retry_backoff_s
        self.client = client if client is not None else KazooClient(
            hosts=self.hosts + self.chroot, timeout=self.session_timeout_ms / 1000,
            # reconnect for ever after the first connection, never waiting more than 1 s
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0),
            handler=_BoundedConnectHandler(self.session_timeout_ms / 1000 / len(
                self.hosts.split(","))),
            logger=_kazoo_log)
        self._deliver_inline = client is not None  # a simulated client: no event thread
        self._listeners: list[Callable[[MetadataEvent], None]] = []
        self._events: queue.Queue[MetadataEvent | None] = queue.Queue()
        self._event_thread: threading.Thread | None = None
        self._closing = False
        self._session_was_lost = False
        self._registered_node_id: int | None = None
        self._last_answer = time.monotonic()  # when ZooKeeper last confirmed our session
        self._on_watch_function = self._on_watch
        self._controller_epoch = 0
        # the clock and the sleep of _request's retries (a simulation has its own)
        self._retry_clock: Callable[[], float] = time.monotonic
        self._retry_sleep: Callable[[float], None] = time.sleep

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **kwargs: Any) -> ZooKeeperMetadataStore:
        """Build from Kafka's settings: ``zookeeper.connect``, ``zookeeper.session.timeout.ms``,
        ``zookeeper.connection.timeout.ms`` and ``node.id`` (or ``broker.id``)."""
        connection_timeout = config.get("zookeeper.connection.timeout.ms")
        node_id = config.get("node.id", config.get("broker.id", -1))
        return cls(str(config["zookeeper.connect"]),
                   session_timeout_ms=int(config.get("zookeeper.session.timeout.ms",
                                                     DEFAULT_SESSION_TIMEOUT_MS)),
                   connection_timeout_ms=int(connection_timeout) if connection_timeout else None,
                   node_id=int(node_id), **kwargs)

    # -- connecting ----------------------------------------------------------------------

    def connect(self) -> ZooKeeperMetadataStore:
        """Open the session, create the chroot and Kafka's top-level paths, set the watches.

        While ZooKeeper cannot be reached, logs one line per attempt and retries until
        ``zookeeper.connection.timeout.ms`` has passed, then raises ``StoreUnavailable``."""
        deadline = time.monotonic() + self.connection_timeout_ms / 1000
        while True:
            remaining = deadline - time.monotonic()
            try:
                with warnings.catch_warnings():  # kazoo warns of a missing chroot; we create it
                    warnings.filterwarnings("ignore", message="No chroot path exists")
                    self.client.start(timeout=max(0.1, min(self.connect_attempt_timeout_s,
                                                           remaining)))
                break
            except KazooTimeoutError:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._stop_client()
                    raise StoreUnavailable(
                        f"cannot reach ZooKeeper at {self.hosts} within "
                        f"{self.connection_timeout_ms / 1000:g} s "
                        f"(zookeeper.connection.timeout.ms)") from None
                backoff_s = min(self.connect_retry_backoff_s, remaining)
                log.warning("cannot reach ZooKeeper at %s; retrying in %g s",
                            self.hosts, round(backoff_s, 1))
                time.sleep(backoff_s)
        try:
            self._create_chroot()
            for path in PERSISTENT_PATHS:
                self._request(self.client.ensure_path_async, path)
        except BaseException:
            self._stop_client()
            raise
        self.client.add_listener(self._on_session_state)
        if not self._deliver_inline:
            self._event_thread = threading.Thread(target=self._deliver_events, daemon=True,
                                                  name="oncelog-zookeeper-events")
            self._event_thread.start()
        self._watch_children(BROKER_IDS_PATH, MetadataChange.BROKERS)
        self._watch_data(CONTROLLER_PATH, MetadataChange.CONTROLLER)
        log.info("connected to ZooKeeper at %s%s (session 0x%x, timeout %d ms)", self.hosts,
                 self.chroot, self.client.client_id[0], self.session_timeout_ms)
        return self

    def _create_chroot(self) -> None:
        """Kafka creates a missing chroot; kazoo only warns. kazoo cannot change its chroot
        once set, so the chroot is lifted for this one call, before any watch exists."""
        if not self.chroot or self._request(self.client.exists_async, "/"):
            return
        self.client.chroot = ""
        try:
            self._request(self.client.ensure_path_async, self.chroot)
        finally:
            self.client.chroot = self.chroot

    def _request(self, start: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One kazoo request (``start`` is a ``*_async`` method), waited for at most a session
        timeout (2 s at least), sent again after a lost connection; then StoreUnavailable.

        kazoo's blocking calls would wait for ever while ZooKeeper is down (it queues requests
        until it reconnects), hence the asynchronous ones with a timeout. A request that timed
        out may still be sent once kazoo reconnects: writes here are all version-checked,
        create-only, or (producer-id blocks) harmless if applied late."""
        timeout_s = max(2.0, self.session_timeout_ms / 1000)
        clock = self._retry_clock
        deadline = clock() + timeout_s
        delay_s = 0.05
        while True:
            try:
                return start(*args, **kwargs).get(timeout=max(0.01, deadline - clock()))
            except KazooTimeoutError:
                pass
            except (ConnectionLoss, OperationTimeoutError, SessionExpiredError):
                if clock() + delay_s < deadline:
                    self._retry_sleep(delay_s)
                    delay_s = min(2 * delay_s, 0.5)
                    continue
            raise StoreUnavailable(f"ZooKeeper at {self.hosts} did not answer within "
                                   f"{timeout_s:g} s")

    # -- events --------------------------------------------------------------------------

    def _notify(self, change: MetadataChange, topic: str | None = None,
                partition: int | None = None) -> None:
        if self._closing:
            return
        if self._deliver_inline:
            self._deliver(MetadataEvent(change, topic, partition))
        else:
            self._events.put(MetadataEvent(change, topic, partition))

    def _deliver_events(self) -> None:
        while (event := self._events.get()) is not None:
            self._deliver(event)

    def _deliver(self, event: MetadataEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("metadata listener %r failed on %s", listener, event)

    def _on_watch(self, event: WatchedEvent) -> None:
        """A watch set by a read fired (kazoo's callback thread: only queue). The path tells
        what changed; kazoo has taken the chroot off it. A session's end fires every watch
        with no path: SESSION_LOST and SESSION_RESTORED say that already."""
        if event.path is None or event.type == EventType.NONE:
            return
        if event.path == TOPICS_PATH:
            self._notify(MetadataChange.TOPICS)
            return
        if not event.path.startswith(TOPICS_PATH + "/"):
            return
        parts = event.path[len(TOPICS_PATH) + 1:].split("/")
        if len(parts) == 1:
            self._notify(MetadataChange.TOPIC, parts[0])
        elif len(parts) == 4 and parts[1] == "partitions" and parts[3] == "state":
            self._notify(MetadataChange.PARTITION_STATE, parts[0], int(parts[2]))

    def _on_session_state(self, state: str) -> None:
        """kazoo's connection thread: must not block, so it only queues."""
        if self._closing:
            return
        if state == KazooState.LOST:
            self._session_was_lost = True
            log.warning("ZooKeeper session lost: our registration and controller role ended")
            self._notify(MetadataChange.SESSION_LOST)
        elif state == KazooState.SUSPENDED:
            log.warning("connection to ZooKeeper at %s interrupted; reconnecting", self.hosts)
        elif state == KazooState.CONNECTED:
            if self._session_was_lost:
                self._session_was_lost = False
                log.warning("connected to ZooKeeper again with a new session")
                self._notify(MetadataChange.SESSION_RESTORED)
            else:
                log.info("connection to ZooKeeper restored; the session lives on")
                self._notify(MetadataChange.WATCHES_RESET)

    def scram_credentials(self) -> dict[str, dict[str, str]]:
        users: dict[str, dict[str, str]] = {}
        for user in self._request(self.client.get_children_async, CONFIG_USERS_PATH):
            try:
                data, _stat = self._request(self.client.get_async, f"{CONFIG_USERS_PATH}/{user}")
            except NoNodeError:
                continue
            config = (json.loads(data) if data else {}).get("config", {})
            scram = {m: v for m, v in config.items() if m.startswith("SCRAM-")}
            if scram:
                users[user] = scram
        return users

    def alter_scram_credential(self, user: str, mechanism: str, credential: str | None
                               ) -> None:
        path = f"{CONFIG_USERS_PATH}/{user}"
        while True:
            try:
                data, stat = self._request(self.client.get_async, path)
            except NoNodeError:
                if credential is None:
                    return
                try:
                    self._request(self.client.create_async, path, _json(
                        {"version": 1, "config": {mechanism: credential}}))
                    break
                except NodeExistsError:
                    continue
            document: dict[str, Any] = json.loads(data) if data else {"version": 1}
            config: dict[str, str] = document.setdefault("config", {})
            if credential is None:
                config.pop(mechanism, None)
            else:
                config[mechanism] = credential
            try:
                self._request(self.client.set_async, path, _json(document), stat.version)
                break
            except BadVersionError:
                continue  # changed meanwhile: apply ours to what is there now
        self._request(self.client.set_async, CONFIG_USERS_PATH, str(_now_ms()).encode())

    def watch_users(self) -> None:
        self._watch_data(CONFIG_USERS_PATH, MetadataChange.USERS)
        self._watch_children(CONFIG_USERS_PATH, MetadataChange.USERS)

    def acls(self) -> list[AclBinding]:
        found: list[AclBinding] = []
        for pattern_type, root in ACL_PATHS.items():
            for kind in self._request(self.client.get_children_async, root):
                try:
                    resource_type = type_from_name(kind)
                    names = self._request(self.client.get_children_async, f"{root}/{kind}")
                except (ValueError, NoNodeError):
                    continue  # a type oncelog does not know, or gone meanwhile
                for node in names:
                    pattern = ResourcePattern(resource_type, unquote(node), pattern_type)
                    entries, _version = self._read_acl_node(pattern)
                    found.extend(AclBinding(pattern, entry) for entry in entries)
        return found

    def update_acls(self, pattern: ResourcePattern,
                    change: Callable[[frozenset[AclEntry]], frozenset[AclEntry]]
                    ) -> frozenset[AclEntry]:
        path = self._acl_path(pattern)
        while True:
            current, version = self._read_acl_node(pattern)
            entries = change(current)
            if entries == current:
                return entries
            document = _json({"version": 1, "acls": [e.to_json() for e in sorted(entries)]})
            try:
                if version is None:
                    self._request(self.client.create_async, path, document, makepath=True)
                elif entries:
                    self._request(self.client.set_async, path, document, version)
                else:
                    self._request(self.client.delete_async, path, version)
            except (NodeExistsError, BadVersionError, NoNodeError):
                continue  # another writer came first: apply the change to what is there
            self._request(self.client.set_async, ACL_CHANGES_PATH, _json(
                {"version": 1, "resource": str(pattern), "time": _now_ms()}))
            return entries

    def watch_acls(self) -> None:
        self._watch_data(ACL_CHANGES_PATH, MetadataChange.ACLS)

    def _acl_path(self, pattern: ResourcePattern) -> str:
        # a group or transactional id may hold "/" (Kafka 4's ACLs allow it; its ZooKeeper
        # authorizer refused it): the node's name is the resource name, %-quoted
        root = ACL_PATHS[pattern.pattern_type]
        return f"{root}/{type_name(pattern.resource_type)}/{quote(pattern.name, safe='')}"

    def _read_acl_node(self, pattern: ResourcePattern) -> tuple[frozenset[AclEntry], int | None]:
        try:
            data, stat = self._request(self.client.get_async, self._acl_path(pattern))
        except NoNodeError:
            return frozenset(), None
        document = json.loads(data) if data else {}
        return frozenset(AclEntry.from_json(e) for e in document.get("acls", [])), stat.version

    def _watch_children(self, path: str, change: MetadataChange) -> None:
        ChildrenWatch(self.client, path, self._notifier(change))

    def _watch_data(self, path: str, change: MetadataChange) -> None:
        DataWatch(self.client, path, self._notifier(change))

    def _notifier(self, change: MetadataChange) -> Callable[..., None]:
        """A recipe callback for ``change``. The recipes call once at once, with what is
        there now: that is no change, so the first call is skipped."""
        armed = False

        def on_event(*_what: Any) -> None:
            nonlocal armed
            if armed:
                self._notify(change)
            armed = True
        return on_event

    def watch(self, listener: Callable[[MetadataEvent], None]) -> None:
        self._listeners.append(listener)

    def close(self) -> None:
        """End the session: ZooKeeper deletes our ephemeral znodes at once, and the other
        brokers' watches fire. No SESSION_LOST is reported for a close."""
        self._closing = True
        self._stop_client()
        if self._event_thread is not None:
            self._events.put(None)
            if self._event_thread is not threading.current_thread():
                self._event_thread.join(timeout=5)
            self._event_thread = None

    def _stop_client(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception:  # closing must not fail on a connection already gone
            log.debug("closing the ZooKeeper client", exc_info=True)

    @property
    def session_id(self) -> int:
        """Our current session id (0 before ``connect``)."""
        client_id = self.client.client_id
        return client_id[0] if client_id else 0

    # -- identity and brokers ------------------------------------------------------------

    def cluster_id(self, configured: str = "") -> str:
        """The stored id; the first broker to ask creates it (from ``configured`` if given).
        A different ``configured`` id than the stored one is the caller's to refuse."""
        while True:
            try:
                data, _stat = self._request(self.client.get_async, CLUSTER_ID_PATH)
                return str(json.loads(data)["id"])
            except NoNodeError:
                pass
            try:
                self._request(self.client.create_async, CLUSTER_ID_PATH,
                            _json({"version": "1", "id": configured or new_cluster_id()}),
                            makepath=True)
            except NodeExistsError:
                pass  # another broker was first: read its id

    def _registration_document(self, registration: BrokerRegistration) -> bytes:
        endpoints = registration.endpoints
        # Kafka's document: host and port are the PLAINTEXT listener's (null, -1 without one)
        plaintext = next((e for e in endpoints if e.listener == "PLAINTEXT"), None)
        document: dict[str, Any] = {
            "version": 4, "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "endpoints": [e.url() for e in endpoints],
            "listener_security_protocol_map": {e.listener: e.security_protocol
                                               for e in endpoints},
            "jmx_port": -1, "timestamp": _now_ms()}
        if registration.rack is not None:
            document["rack"] = registration.rack
        return _json(document)

    def register_broker(self, registration: BrokerRegistration) -> BrokerRegistration:
        path = f"{BROKER_IDS_PATH}/{registration.node_id}"
        data = self._registration_document(registration)
        try:
            _path, stat = self._request(self.client.create_async, path, data, ephemeral=True,
                                      include_data=True)
        except NodeExistsError:
            # A retried create may have succeeded in our own session (Kafka's
            # checkedEphemeralCreate): that registration is ours.
            try:
                _data, stat = self._request(self.client.get_async, path)
            except NoNodeError:
                return self.register_broker(registration)  # its session just ended
            if stat.ephemeralOwner != self.session_id:
                raise NodeIdInUse(f"node.id {registration.node_id} is already registered by a "
                                  f"live broker (ZooKeeper session 0x{stat.ephemeralOwner:x})"
                                  ) from None
            stat = self._request(self.client.set_async, path, data)
        self._registered_node_id = registration.node_id
        if self.node_id < 0:
            self.node_id = registration.node_id
        return dataclasses.replace(registration, broker_epoch=stat.czxid)

    def live_brokers(self) -> dict[int, BrokerRegistration]:
        brokers: dict[int, BrokerRegistration] = {}
        for child in self._request(self.client.get_children_async, BROKER_IDS_PATH):
            try:
                data, stat = self._request(self.client.get_async, f"{BROKER_IDS_PATH}/{child}")
            except NoNodeError:
                continue  # its session ended while we listed
            brokers[int(child)] = self._registration(int(child), json.loads(data), stat.czxid)
        return brokers

    def _registration(self, node_id: int, document: dict[str, Any],
                      broker_epoch: int) -> BrokerRegistration:
        """A registration document read back: every endpoint, and host and port those of
        the inter-broker listener (else the document's own, else the first endpoint's)."""
        protocols = document.get("listener_security_protocol_map") or {}
        endpoints: list[Endpoint] = []
        for url in document.get("endpoints") or ():
            name, _, address = str(url).partition("://")
            where, _, number = address.rpartition(":")
            endpoints.append(Endpoint(name, protocols.get(name, name), where.strip("[]"),
                                      int(number)))
        host, port = str(document.get("host") or ""), int(document.get("port", -1))
        inter = next((e for e in endpoints if e.listener == self.inter_broker_listener),
                     None if host else (endpoints[0] if endpoints else None))
        if inter is not None:
            host, port = inter.host, inter.port
        return BrokerRegistration(node_id, host, port, document.get("rack"),
                                  broker_epoch=broker_epoch, endpoints=tuple(endpoints))

    def confirm_session(self) -> bool:
        node_id = self._registered_node_id
        if node_id is None or self._closing:
            return False
        session_id = self.session_id
        try:
            stat = self.client.exists_async(f"{BROKER_IDS_PATH}/{node_id}").get(
                timeout=self.session_timeout_ms / 3000)
        except KazooTimeoutError:
            self._leave_a_silent_node()
            return False
        except Exception:  # connection lost, session expired: not confirmed
            return False
        self._last_answer = time.monotonic()
        return (stat is not None and stat.ephemeralOwner == session_id
                and session_id == self.session_id)

    def _leave_a_silent_node(self) -> None:
        """Drop the connection to a ZooKeeper node that has answered nothing for a third of
        the session timeout, so kazoo connects to another while the session lives.

        kazoo notices a dead server only by a ping left unanswered, and sends a ping only
        after half its read timeout without a request: the lease's confirmations, every fifth
        of the lease, are requests, so behind a network partition that drops packets kazoo
        noticed nothing until its session had nearly or entirely expired - and a broker
        connected to an isolated ZooKeeper follower lost its session and its leaderships
        although two of three nodes served (tests/partitions/test_zookeeper_minority.py).
        ZooKeeper's Java client gives up on a server it has not heard from within its read
        timeout; a confirmation is answered in milliseconds, so a third of the session
        without one is a silent node. kazoo has no public call for this: its socket is shut
        down, which its connection loop reads as a dropped connection (kazoo is pinned)."""
        if self.client.state != KazooState.CONNECTED:
            return
        silent_s = time.monotonic() - self._last_answer
        if silent_s < self.session_timeout_ms / 3000:
            return
        sock = getattr(getattr(self.client, "_connection", None), "_socket", None)
        if sock is None:
            return
        log.warning("ZooKeeper at %s answered nothing for %.1f s; connecting to another node",
                    self.hosts, silent_s)
        self._last_answer = time.monotonic()  # once per silence
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- the controller ------------------------------------------------------------------

    def try_become_controller(self, node_id: int) -> bool:
        """Kafka's registerControllerAndIncrementControllerEpoch: create the ephemeral
        ``/controller`` and bump ``/controller_epoch`` (checked against the version read) in
        one transaction, so two brokers racing cannot both win."""
        for _attempt in range(10):
            try:
                data, epoch_stat = self._request(self.client.get_async, CONTROLLER_EPOCH_PATH)
            except NoNodeError:
                try:
                    self._request(self.client.create_async, CONTROLLER_EPOCH_PATH, b"0")
                except NodeExistsError:
                    pass
                continue
            epoch = int(data) + 1
            transaction = _Operations()
            transaction.create(CONTROLLER_PATH, _json({"version": 1, "brokerid": node_id,
                                                       "timestamp": _now_ms()}),
                               ephemeral=True)
            transaction.set_data(CONTROLLER_EPOCH_PATH, str(epoch).encode(),
                                 version=epoch_stat.version)
            results = self._request(transaction.commit_async, self.client)
            if not _failed(results):
                self._controller_epoch = epoch
                log.info("node %d is the controller (controller epoch %d)", node_id, epoch)
                return True
            if isinstance(results[0], NodeExistsError):
                return self._holds_controller(node_id)
            # BadVersion: another broker became controller and left between our read and
            # our write; read the epoch again
        return False

    def _holds_controller(self, node_id: int) -> bool:
        try:
            data, stat = self._request(self.client.get_async, CONTROLLER_PATH)
        except NoNodeError:
            return False
        return bool(stat.ephemeralOwner == self.session_id
                    and json.loads(data).get("brokerid") == node_id)

    def controller_id(self) -> int:
        try:
            data, _stat = self._request(self.client.get_async, CONTROLLER_PATH)
        except NoNodeError:
            return -1
        return int(json.loads(data).get("brokerid", -1))

    def controller_epoch(self) -> int:
        """The current controller epoch (0 before any controller)."""
        try:
            data, _stat = self._request(self.client.get_async, CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            return 0
        return int(data)

    # -- topics --------------------------------------------------------------------------

    @staticmethod
    def _topic_document(record: TopicRecord) -> bytes:
        return _json({"version": 3, "topic_id": record.topic_id,
                      "partitions": {str(index): list(replicas)
                                     for index, replicas in enumerate(record.assignment)},
                      "adding_replicas": {}, "removing_replicas": {}})

    def _state_document(self, state: PartitionState) -> bytes:
        return _json({"controller_epoch": self._controller_epoch, "leader": state.leader,
                      "version": 1, "leader_epoch": state.leader_epoch,
                      "isr": list(state.isr)})

    def _watcher(self, watch: bool) -> Callable[[WatchedEvent], None] | None:
        # one function object: kazoo keeps a path's watchers in a set, so reading a path
        # twice with a watch still fires one notification
        return self._on_watch_function if watch else None

    def list_topics(self, watch: bool = False) -> TopicListing:
        names, stat = self._request(self.client.get_children_async, TOPICS_PATH,
                                    watch=self._watcher(watch), include_data=True)
        return TopicListing(frozenset(names), stat.pzxid)

    def read_topic(self, name: str, watch: bool = False) -> TopicRecord | None:
        try:
            data, stat = self._request(self.client.get_async, topic_path(name),
                                       watch=self._watcher(watch))
        except NoNodeError:
            return None  # deleted (the listing's watch reports it, and a creation)
        document = json.loads(data)
        partitions = document.get("partitions", {})
        assignment = [list(partitions[key]) for key in sorted(partitions, key=int)]
        try:
            config_data, _stat = self._request(self.client.get_async,
                                               f"{CONFIG_TOPICS_PATH}/{name}")
            configs = {key: str(value)
                       for key, value in json.loads(config_data).get("config", {}).items()}
        except NoNodeError:
            configs = {}
        return TopicRecord(name=name, topic_id=document.get("topic_id", ""),
                           partitions=len(assignment), configs=configs, assignment=assignment,
                           created_version=stat.czxid)

    def create_topic(self, record: TopicRecord, states: list[PartitionState]
                     ) -> tuple[TopicRecord, list[PartitionState]]:
        """One transaction: the topic, its config, every partition's first state."""
        assert len(states) == record.partitions == len(record.assignment), record
        config_path = f"{CONFIG_TOPICS_PATH}/{record.name}"
        for _attempt in range(3):
            transaction = _Operations()
            transaction.create(topic_path(record.name), self._topic_document(record))
            transaction.create(config_path, _json({"version": 1, "config": record.configs}))
            transaction.create(partitions_path(record.name), b"")
            self._add_partition_states(transaction, record.name, 0, states)
            results = self._request(transaction.commit_async, self.client)
            if not _failed(results):
                return self._created(record, states)
            if isinstance(results[0], NodeExistsError):
                raise TopicExists(f"topic {record.name!r} already exists")
            if not isinstance(results[1], NodeExistsError):
                raise StoreUnavailable(f"creating topic {record.name!r} failed: {results!r}")
            # A config left behind by a topic deleted half-way (not by us: we delete both
            # in one transaction); remove exactly the version we saw, then try again.
            try:
                _data, stat = self._request(self.client.get_async, config_path)
                self._request(self.client.delete_async, config_path, version=stat.version)
            except (NoNodeError, BadVersionError):
                pass
        raise StoreUnavailable(f"creating topic {record.name!r} kept conflicting")

    def _created(self, record: TopicRecord, states: list[PartitionState]
                 ) -> tuple[TopicRecord, list[PartitionState]]:
        """The versions of what one transaction created: the zxid it committed at (the
        topic's czxid; a multi-op's results carry no stat for a create)."""
        stat = self._request(self.client.exists_async, topic_path(record.name))
        if stat is None:  # deleted again at once by another broker
            raise StoreUnavailable(f"topic {record.name!r} was deleted as it was created")
        created = dataclasses.replace(record, created_version=stat.czxid)
        return created, [dataclasses.replace(state, version=0, created_version=stat.czxid)
                         for state in states]

    def _add_partition_states(self, transaction: _Operations, topic: str, first_index: int,
                              states: list[PartitionState]) -> None:
        for index, state in enumerate(states, start=first_index):
            transaction.create(partition_path(topic, index), b"")
            transaction.create(partition_state_path(topic, index), self._state_document(state))

    def add_partitions(self, record: TopicRecord, new_states: list[PartitionState]
                       ) -> list[PartitionState]:
        """Raises ``KeyError`` when the topic does not exist (or is a newer incarnation)."""
        for _attempt in range(10):
            try:
                data, stat = self._request(self.client.get_async, topic_path(record.name))
            except NoNodeError:
                raise KeyError(f"topic {record.name!r} does not exist") from None
            if record.created_version >= 0 and stat.czxid != record.created_version:
                raise KeyError(f"topic {record.name!r} was deleted and created again")
            first_index = len(json.loads(data).get("partitions", {}))
            if first_index + len(new_states) != len(record.assignment):
                raise TopicGrew(record.name, first_index)  # by another broker's request
            transaction = _Operations()
            transaction.set_data(topic_path(record.name), self._topic_document(record),
                                 version=stat.version)
            self._add_partition_states(transaction, record.name, first_index, new_states)
            results = self._request(transaction.commit_async, self.client)
            if not _failed(results):
                zxid = results[0].mzxid  # the transaction's: the new state znodes' czxid
                return [dataclasses.replace(state, version=0, created_version=zxid)
                        for state in new_states]
            # BadVersion or NodeExists: someone else grew or recreated the topic; read again
        raise StoreUnavailable(f"adding partitions to {record.name!r} kept conflicting")

    def delete_topic(self, name: str) -> None:
        """One transaction removing the topic, its config and every partition znode."""
        for _attempt in range(10):
            try:
                partitions = self._request(self.client.get_children_async, partitions_path(name))
            except NoNodeError:
                partitions = None
            transaction = _Operations()
            for index in partitions or ():
                for child in self._request(self.client.get_children_async,
                                         partition_path(name, int(index))):
                    transaction.delete(f"{partition_path(name, int(index))}/{child}")
                transaction.delete(partition_path(name, int(index)))
            if partitions is not None:
                transaction.delete(partitions_path(name))
            if not self._request(self.client.exists_async, topic_path(name)):
                self._delete_if_exists(f"{CONFIG_TOPICS_PATH}/{name}")
                return
            transaction.delete(topic_path(name))
            if self._request(self.client.exists_async, f"{CONFIG_TOPICS_PATH}/{name}"):
                transaction.delete(f"{CONFIG_TOPICS_PATH}/{name}")
            results = self._request(transaction.commit_async, self.client)
            if not _failed(results):
                return
            # NotEmpty or NoNode: partitions were added or removed meanwhile; list again
        raise StoreUnavailable(f"deleting topic {name!r} kept conflicting")

    def _delete_if_exists(self, path: str) -> None:
        try:
            self._request(self.client.delete_async, path)
        except (NoNodeError, NotEmptyError):
            pass

    # -- partition state -----------------------------------------------------------------

    def partition_state(self, topic: str, index: int, watch: bool = False
                        ) -> PartitionState | None:
        try:
            data, stat = self._request(self.client.get_async, partition_state_path(topic, index),
                                       watch=self._watcher(watch))
        except NoNodeError:
            return None
        return self._parse_state(data, stat)

    def partition_states(self, topic: str, count: int, watch: bool = False
                         ) -> list[PartitionState | None]:
        """Every request sent before the first answer is awaited: one round trip for a
        whole topic (the metadata sync and the controller read them all on every change).
        A request that fails for another reason than a missing node is asked again alone,
        with ``partition_state``'s retries."""
        pending = [self.client.get_async(partition_state_path(topic, index),
                                         watch=self._watcher(watch))
                   for index in range(count)]
        timeout_s = max(2.0, self.session_timeout_ms / 1000)
        states: list[PartitionState | None] = []
        for index, answer in enumerate(pending):
            try:
                states.append(self._parse_state(*answer.get(timeout=timeout_s)))
            except NoNodeError:
                states.append(None)
            except Exception:
                states.append(self.partition_state(topic, index, watch))
        return states

    def states_of(self, partitions: Iterable[tuple[str, int]], watch: bool = False
                  ) -> dict[tuple[str, int], PartitionState | None]:
        """As ``partition_states``: every request sent before the first answer is awaited."""
        pending = [(key, self.client.get_async(partition_state_path(*key),
                                               watch=self._watcher(watch)))
                   for key in partitions]
        timeout_s = max(2.0, self.session_timeout_ms / 1000)
        states: dict[tuple[str, int], PartitionState | None] = {}
        for key, answer in pending:
            try:
                states[key] = self._parse_state(*answer.get(timeout=timeout_s))
            except NoNodeError:
                states[key] = None
            except Exception:
                states[key] = self.partition_state(*key, watch=watch)
        return states

    @staticmethod
    def _parse_state(data: bytes, stat: ZnodeStat) -> PartitionState:
        document = json.loads(data)
        return PartitionState(leader=int(document.get("leader", NO_LEADER)),
                              leader_epoch=int(document.get("leader_epoch", 0)),
                              isr=tuple(int(node) for node in document.get("isr", ())),
                              version=stat.version, created_version=stat.czxid)

    def compare_and_set_partition_state(self, topic: str, index: int,
                                        state: PartitionState) -> PartitionState | None:
        """A ``state.version`` below 0 means "I read no state": the write creates it, and
        fails if one exists (never ZooKeeper's version -1, which would write blindly).

        Retried after a lost connection, a write that had in fact been applied reports a
        conflict (None): the writer re-reads and finds its own state, as in Kafka. A state
        read from another incarnation of the topic (its ``created_version`` is not the
        znode's czxid) is a conflict too."""
        path = partition_state_path(topic, index)
        if state.version >= 0 and state.created_version >= 0:
            # The znode version alone cannot tell a state of a topic deleted and created
            # again (its versions start over at 0) from the one the writer read: a leader of
            # the old incarnation that had not heard of the deletion wrote its ISR into the
            # new topic's partition (found by the simulation). The state must still be the
            # znode the writer read, created at its czxid.
            current = self._request(self.client.exists_async, path)
            if current is None or current.czxid != state.created_version:
                return None
        transaction = _Operations()
        if state.version < 0:
            transaction.create(path, self._state_document(state))
        else:
            transaction.set_data(path, self._state_document(state), version=state.version)
        results = self._request(transaction.commit_async, self.client)
        if _failed(results):
            return None  # BadVersion (someone wrote first), NoNode (deleted), NodeExists
        if state.version < 0:  # a create's result carries no stat: read what we created
            return self.partition_state(topic, index)
        stat = results[0]
        return PartitionState(state.leader, state.leader_epoch, tuple(state.isr),
                              version=stat.version, created_version=stat.czxid)

    # -- producer ids --------------------------------------------------------------------

    def allocate_producer_id_block(self, size: int) -> int:
        """Kafka's ZkProducerIdManager: read the latest block, write the next one with the
        version read; on a conflict read again."""
        assert size > 0, size
        while True:
            try:
                data, stat = self._request(self.client.get_async, PRODUCER_ID_BLOCK_PATH)
            except NoNodeError:
                data, stat = None, None
            start = int(json.loads(data)["block_end"]) + 1 if data else 0
            document = _json({"version": 1, "broker": self.node_id,
                              "block_start": str(start), "block_end": str(start + size - 1)})
            try:
                if stat is None:
                    self._request(self.client.create_async, PRODUCER_ID_BLOCK_PATH, document)
                else:
                    self._request(self.client.set_async, PRODUCER_ID_BLOCK_PATH, document,
                                version=stat.version)
                return start
            except (NodeExistsError, BadVersionError):
                continue  # another broker took a block first


__all__ = ["ZooKeeperMetadataStore", "split_connect"]
