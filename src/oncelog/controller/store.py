"""The metadata store interface: what every broker of a cluster agrees on.

Two implementations share it: ``LocalMetadataStore`` (one JSON file in the data directory;
the single-broker default, no extra process) and ``ZooKeeperMetadataStore`` (kazoo; the
cluster, after Kafka's ZooKeeper layout). Both hold:

- the cluster id;
- live brokers, each registered with its advertised listener (ephemeral in ZooKeeper: a
  broker whose session ends disappears) and a ``broker_epoch`` that grows with every
  registration, so a stale registration can be told from a fresh one;
- the controller: at most one broker holds it (an ephemeral node in ZooKeeper);
- topics (``TopicRecord``: id, configs, and the replica assignment of every partition);
- per-partition state ``{leader, leader_epoch, isr}`` (``PartitionState``), changed only by
  ``compare_and_set_partition_state`` against the ``version`` the writer last read, so two
  brokers can never both believe they changed it (Kafka's zkVersion checks);
- producer-id blocks, handed out atomically so ids are unique cluster-wide.

Versions. Every topic carries the store's version of its creation (``created_version``: the
topic znode's czxid in ZooKeeper), every partition state the version of its record
(``created_version``, ``version``: czxid and znode version), and a topic listing the version
of the last change to the list (the pzxid of ``/brokers/topics``). Versions only grow, so a
broker can tell an old read from a new one and apply metadata only forward: a topic missing
from a listing is deleted only if the listing is newer than the topic's creation, and a
deleted topic's name is never brought back by a read older than its deletion.

Threading: every method may block (a ZooKeeper round trip) and is safe to call from any
thread. The broker never calls one on its event loop: ``StoreCalls`` runs them on a thread
pool of the store's own and the loop awaits the answer, so a slow or frozen ZooKeeper delays
only what needs it. Listeners given to ``watch`` are called on the store's own thread
(kazoo's event thread), never the event loop's: the broker hops back with
``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import abc
import asyncio
import functools
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import NamedTuple, ParamSpec, TypeVar

from ..security.acl import AclBinding, AclEntry, ResourcePattern

NO_LEADER = -1


@dataclass
class TopicRecord:
    name: str
    topic_id: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    # replicas of each partition, preferred leader first; [[node], ...] on a single broker
    assignment: list[list[int]] = field(default_factory=list)
    # the store's version of the topic's creation (ZooKeeper: the topic znode's czxid); a
    # topic deleted and created again under the same name comes back with a larger one
    created_version: int = -1

    def replicas(self, index: int) -> tuple[int, ...]:
        return tuple(self.assignment[index]) if index < len(self.assignment) else ()


@dataclass(frozen=True)
class PartitionState:
    """Kafka's ``LeaderAndIsr``: who leads, in which leader epoch, and who is in sync.

    ``version`` is the store's version of this record (the znode version in ZooKeeper): a
    compare-and-set names the version it read, and fails if anyone wrote since.
    ``created_version`` is the version of the record's creation (the state znode's czxid):
    a partition of a topic deleted and created again starts over at ``version`` 0, so states
    are ordered by ``(created_version, version)``."""
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    version: int = -1
    created_version: int = -1

    def __post_init__(self) -> None:
        assert self.leader == NO_LEADER or self.leader in self.isr or not self.isr, self

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def with_isr(self, isr: tuple[int, ...]) -> PartitionState:
        return replace(self, isr=tuple(isr))

    @property
    def order(self) -> tuple[int, int]:
        """Newer states compare greater (see the class docstring)."""
        return self.created_version, self.version

    def elect(self, leader: int, isr: tuple[int, ...]) -> PartitionState:
        """The state after an election: a new leader (or none) always bumps the epoch."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener of a broker: its name, its security protocol and an address (where it
    listens, or where clients are told to reach it: ``broker/listeners.py``)."""
    listener: str
    security_protocol: str
    host: str
    port: int

    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerRegistration:
    """A live broker as the store has it: ``host``/``port`` is where other brokers reach it
    (its inter-broker listener), ``endpoints`` every listener as advertised to clients."""
    node_id: int
    host: str
    port: int
    rack: str | None = None
    broker_epoch: int = -1  # filled in by the store at registration
    endpoints: tuple[Endpoint, ...] = ()  # none given: one PLAINTEXT listener at host:port

    def __post_init__(self) -> None:
        if not self.endpoints:
            object.__setattr__(self, "endpoints", (
                Endpoint("PLAINTEXT", "PLAINTEXT", self.host, self.port),))

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """Where a client of ``listener`` reaches this broker; None when it has no such
        listener."""
        for endpoint in self.endpoints:
            if endpoint.listener == listener:
                return endpoint.host, endpoint.port
        return None


class MetadataChange(Enum):
    """What a watch reports; a listener re-reads what it cares about (watches carry no data,
    as in ZooKeeper)."""
    BROKERS = "brokers"            # a broker registered or its session ended
    CONTROLLER = "controller"      # the controller changed or went away
    TOPICS = "topics"              # the list of topics changed (one created or deleted)
    TOPIC = "topic"                # one topic's record changed (it grew): event.topic
    PARTITION_STATE = "partition"  # one partition's leader, epoch or ISR changed:
                                   # event.topic, event.partition
    SESSION_LOST = "session_lost"  # our own session ended: our registration and controller
                                   # node are gone; stop acting on what we knew
    SESSION_RESTORED = "session_restored"  # connected again (new session); re-register
    WATCHES_RESET = "watches_reset"  # connected again: changes may have been missed, and
                                     # watches set by reads must be set again: read everything
    USERS = "users"                # a user's SCRAM credentials changed (watch_users)
    ACLS = "acls"                  # an ACL was created or deleted (watch_acls)


@dataclass(frozen=True)
class MetadataEvent:
    """One notification: the kind of change and, for TOPIC and PARTITION_STATE, where.
    Watches are set by reads with ``watch=True`` (one-shot, as in ZooKeeper): a listener
    that wants the next change of a topic or partition state reads it again with a watch."""
    change: MetadataChange
    topic: str | None = None
    partition: int | None = None


class TopicListing(NamedTuple):
    """The names of every topic, and the store's version of the list's last change."""
    names: frozenset[str]
    version: int


class NodeIdInUse(Exception):
    """A live broker is already registered with this ``node.id``."""


class TopicExists(Exception):
    pass


class TopicGrew(Exception):
    """Adding partitions to a topic that another request grew meanwhile: the stored topic
    has ``partitions`` partitions, not the count the new ones were planned after."""

    def __init__(self, name: str, partitions: int) -> None:
        super().__init__(f"topic {name!r} has {partitions} partitions now")
        self.partitions = partitions


class StoreUnavailable(Exception):
    """The store cannot be reached (ZooKeeper down or our session lost); retriable."""


class StoreTimedOut(StoreUnavailable):
    """A store call did not answer within the time its caller could wait."""


STORE_THREADS = 16
_P = ParamSpec("_P")
_T = TypeVar("_T")


class StoreCalls:
    """Blocking store calls, run on a thread pool of their own and awaited by the event loop.

    Their own pool, not the loop's default executor: with ZooKeeper frozen, requests that
    need it (CreateTopics, InitProducerId's id block, ISR changes) each hold a thread for up
    to a session timeout, and must not starve the threads the broker flushes logs with."""

    def __init__(self, threads: int = STORE_THREADS) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="oncelog-store")

    async def __call__(self, function: Callable[_P, _T], *args: _P.args,
                       **kwargs: _P.kwargs) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(function, *args,
                                                                        **kwargs))

    async def within(self, timeout_s: float, function: Callable[_P, _T], *args: _P.args,
                     **kwargs: _P.kwargs) -> _T:
        """As a call, but ``StoreTimedOut`` after ``timeout_s`` (the call itself runs on)."""
        try:
            return await asyncio.wait_for(self(function, *args, **kwargs), timeout_s)
        except TimeoutError:
            raise StoreTimedOut(f"the metadata store did not answer within {timeout_s:g} s"
                                ) from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class MetadataStore(abc.ABC):
    """See the module docstring. Every method may block; none is async."""

    # -- identity and brokers ------------------------------------------------------------

    @abc.abstractmethod
    def cluster_id(self, configured: str = "") -> str:
        """The cluster's id, created once (from ``configured`` when given)."""

    @abc.abstractmethod
    def register_broker(self, registration: BrokerRegistration) -> BrokerRegistration:
        """Register this broker as live; returns it with its ``broker_epoch``.
        Raises ``NodeIdInUse`` when another live broker holds the node id."""

    @abc.abstractmethod
    def live_brokers(self) -> dict[int, BrokerRegistration]:
        """Every registered broker, by node id."""

    @abc.abstractmethod
    def confirm_session(self) -> bool:
        """One synchronous round trip proving that this store's session is alive and that our
        broker registration is still ours (in ZooKeeper: ``/brokers/ids/<id>`` exists and its
        ``ephemeralOwner`` is our current session id). False when the round trip fails or
        times out, when we never registered, or when the session that registered us has
        ended. Never raises.

        A leader calls it periodically and stops acknowledging writes once it has not been
        confirmed for a while: a broker paused past its session (SIGSTOP) and resumed has been
        replaced, and must find that out before acting as leader again (no split brain)."""

    # -- the controller ------------------------------------------------------------------

    @abc.abstractmethod
    def try_become_controller(self, node_id: int) -> bool:
        """Claim the controller role if nobody holds it; True when we hold it now."""

    @abc.abstractmethod
    def controller_id(self) -> int:
        """The controller's node id, or -1 when there is none."""

    # -- topics --------------------------------------------------------------------------

    @abc.abstractmethod
    def list_topics(self, watch: bool = False) -> TopicListing:
        """Every topic's name, with the list's version; ``watch``: TOPICS on its next change."""

    @abc.abstractmethod
    def read_topic(self, name: str, watch: bool = False) -> TopicRecord | None:
        """One topic (None when there is none); ``watch``: TOPIC on its next change."""

    def load_topics(self) -> dict[str, TopicRecord]:
        """Every topic, by name."""
        topics = {}
        for name in sorted(self.list_topics().names):
            record = self.read_topic(name)
            if record is not None:  # deleted while we listed
                topics[name] = record
        return topics

    @abc.abstractmethod
    def create_topic(self, record: TopicRecord, states: list[PartitionState]
                     ) -> tuple[TopicRecord, list[PartitionState]]:
        """Create a topic and the first state of each partition at once; returns them as
        stored (with their versions). Raises ``TopicExists``."""

    @abc.abstractmethod
    def add_partitions(self, record: TopicRecord, new_states: list[PartitionState]
                       ) -> list[PartitionState]:
        """Store a topic's grown ``record`` (more partitions, longer assignment) and the
        first state of each new partition; returns those states as stored. Raises
        ``KeyError`` when the topic does not exist (or is another incarnation than
        ``record``'s), ``TopicGrew`` when its stored partition count is not the one the new
        partitions follow (``len(record.assignment) - len(new_states)``)."""

    @abc.abstractmethod
    def delete_topic(self, name: str) -> None:
        """Remove a topic and its partition states (no error if already gone)."""

    # -- partition state -----------------------------------------------------------------

    @abc.abstractmethod
    def partition_state(self, topic: str, index: int, watch: bool = False
                        ) -> PartitionState | None:
        """The current state with its versions, or None if there is none; ``watch``:
        PARTITION_STATE on its next change."""

    def partition_states(self, topic: str, count: int, watch: bool = False
                         ) -> list[PartitionState | None]:
        """The states of partitions 0..count-1 (an implementation may ask for all at once)."""
        return [self.partition_state(topic, index, watch) for index in range(count)]

    def states_of(self, partitions: Iterable[tuple[str, int]], watch: bool = False
                  ) -> dict[tuple[str, int], PartitionState | None]:
        """The states of any partitions, by (topic, index) (an implementation may ask for
        all at once)."""
        return {(topic, index): self.partition_state(topic, index, watch)
                for topic, index in partitions}

    @abc.abstractmethod
    def compare_and_set_partition_state(self, topic: str, index: int,
                                        state: PartitionState) -> PartitionState | None:
        """Write ``state`` if the stored version still equals ``state.version``; return the
        stored state with its new version, or None when someone else wrote first."""

    # -- producer ids --------------------------------------------------------------------

    @abc.abstractmethod
    def allocate_producer_id_block(self, size: int) -> int:
        """Reserve ``size`` consecutive producer ids, unique cluster-wide, for ever; returns
        the first one."""

    # -- users (SCRAM credentials) --------------------------------------------------------

    def scram_credentials(self) -> dict[str, dict[str, str]]:
        """Every user's SCRAM credentials as Kafka writes them: user -> mechanism ->
        ``salt=...,stored_key=...,server_key=...,iterations=N``. Never a password."""
        return {}

    def alter_scram_credential(self, user: str, mechanism: str, credential: str | None
                               ) -> None:
        """Set (or, with None, delete) one user's credential for one mechanism."""
        raise NotImplementedError(f"{type(self).__name__} keeps no SCRAM credentials")

    def watch_users(self) -> None:
        """From now on, report USERS to the watch listeners whenever a credential changes
        (a store only one process writes reports nothing: it knows)."""
        return None

    # -- ACLs ----------------------------------------------------------------------------

    def acls(self) -> list[AclBinding]:
        """Every ACL stored."""
        return []

    def update_acls(self, pattern: ResourcePattern,
                    change: Callable[[frozenset[AclEntry]], frozenset[AclEntry]]
                    ) -> frozenset[AclEntry]:
        """Replace the entries of one resource pattern by ``change(current entries)``,
        atomically (``change`` may be called again if another writer came first); the
        entries now stored."""
        raise NotImplementedError(f"{type(self).__name__} keeps no ACLs")

    def watch_acls(self) -> None:
        """From now on, report ACLS to the watch listeners whenever an ACL changes."""
        return None


    @abc.abstractmethod
    def watch(self, listener: Callable[[MetadataEvent], None]) -> None:
        """Call ``listener`` (on the store's thread) with each ``MetadataEvent``: BROKERS,
        CONTROLLER and the session's changes always; TOPICS, TOPIC and PARTITION_STATE once
        per read made with ``watch=True``. Listeners are kept until ``close``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Let go: our registration and controller role end (in ZooKeeper, at once)."""


def new_topic_id() -> str:
    return str(uuid.uuid4())


def new_cluster_id() -> str:
    # Kafka's cluster ids are a base64url-encoded UUID without padding.
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
