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

Threading: every method may block (a ZooKeeper round trip) and is safe to call from any
thread; in cluster mode the broker calls them through ``asyncio.to_thread``. Listeners given
to ``watch`` are called on the store's own thread (kazoo's event thread), never the event
loop's: the broker hops back with ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import abc
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum

NO_LEADER = -1


@dataclass
class TopicRecord:
    name: str
    topic_id: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    # replicas of each partition, preferred leader first; [[node], ...] on a single broker
    assignment: list[list[int]] = field(default_factory=list)

    def replicas(self, index: int) -> tuple[int, ...]:
        return tuple(self.assignment[index]) if index < len(self.assignment) else ()


@dataclass(frozen=True)
class PartitionState:
    """Kafka's ``LeaderAndIsr``: who leads, in which leader epoch, and who is in sync.

    ``version`` is the store's version of this record (the znode version in ZooKeeper): a
    compare-and-set names the version it read, and fails if anyone wrote since."""
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    version: int = -1

    def __post_init__(self) -> None:
        assert self.leader == NO_LEADER or self.leader in self.isr or not self.isr, self

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def with_isr(self, isr: tuple[int, ...]) -> PartitionState:
        return replace(self, isr=tuple(isr))

    def elect(self, leader: int, isr: tuple[int, ...]) -> PartitionState:
        """The state after an election: a new leader (or none) always bumps the epoch."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))


@dataclass(frozen=True)
class BrokerRegistration:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    broker_epoch: int = -1  # filled in by the store at registration


class MetadataChange(Enum):
    """What a watch reports; a listener re-reads what it cares about (watches carry no data,
    as in ZooKeeper)."""
    BROKERS = "brokers"            # a broker registered or its session ended
    CONTROLLER = "controller"      # the controller changed or went away
    TOPICS = "topics"              # a topic was created, deleted or grew
    PARTITION_STATE = "partition"  # some partition's leader, epoch or ISR changed
    SESSION_LOST = "session_lost"  # our own session ended: our registration and controller
                                   # node are gone; stop acting on what we knew
    SESSION_RESTORED = "session_restored"  # connected again (new session); re-register


class NodeIdInUse(Exception):
    """A live broker is already registered with this ``node.id``."""


class TopicExists(Exception):
    pass


class StoreUnavailable(Exception):
    """The store cannot be reached (ZooKeeper down or our session lost); retriable."""


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
    def load_topics(self) -> dict[str, TopicRecord]:
        """Every topic, by name."""

    @abc.abstractmethod
    def create_topic(self, record: TopicRecord, states: list[PartitionState]) -> None:
        """Create a topic and the first state of each partition at once.
        Raises ``TopicExists``."""

    @abc.abstractmethod
    def add_partitions(self, record: TopicRecord, new_states: list[PartitionState]) -> None:
        """Store a topic's grown ``record`` (more partitions, longer assignment) and the
        first state of each new partition."""

    @abc.abstractmethod
    def delete_topic(self, name: str) -> None:
        """Remove a topic and its partition states (no error if already gone)."""

    # -- partition state -----------------------------------------------------------------

    @abc.abstractmethod
    def partition_state(self, topic: str, index: int) -> PartitionState | None:
        """The current state with its ``version``, or None if there is none."""

    def partition_states(self, topic: str, count: int) -> list[PartitionState | None]:
        """The states of partitions 0..count-1 (an implementation may ask for all at once)."""
        return [self.partition_state(topic, index) for index in range(count)]

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

    # -- watching and closing ------------------------------------------------------------

    @abc.abstractmethod
    def watch(self, listener: Callable[[MetadataChange], None]) -> None:
        """Call ``listener`` (on the store's thread) whenever something of a kind in
        ``MetadataChange`` changes. Listeners are kept until ``close``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Let go: our registration and controller role end (in ZooKeeper, at once)."""


def new_topic_id() -> str:
    return str(uuid.uuid4())


def new_cluster_id() -> str:
    # Kafka's cluster ids are a base64url-encoded UUID without padding.
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
