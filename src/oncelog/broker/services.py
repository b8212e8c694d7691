"""What a request handler may use: the broker's state owners, named, handed over once.

A handler translates between a wire message and the owner of the state it names (STYLE.md
§1); ``BrokerServices`` is the list of those owners, and a handler reaches nothing else -
not the ``Broker``, its connections, its store or its background tasks (Kafka hands
``KafkaApis`` its ``ReplicaManager``, coordinators and metadata cache the same way; Tansu's
handlers get a ``Broker<G, S>`` of services, not the process). ``tests/unit/test_layering.py``
holds the handlers to it.

``build_services`` makes them, wired to each other, for a ``Broker`` and for a simulated
broker (``oncelog.simulation.cluster``) alike, so the two cannot drift: what differs is
handed in (the partitions, the store and how it is called, the live-broker view, the clock,
and how the transaction markers open a connection to another broker).

The services object is frozen: which owner serves what never changes while the broker runs.
``ClusterIdentity`` is the one part that is filled in later - the cluster id is learned from
the metadata store, and the advertised port from the socket when it is 0 - so handlers keep
the view and read it when they answer, never a copy taken at construction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..config import BrokerConfig
from ..controller.live_brokers import LiveBrokers
from ..controller.producer_ids import ProducerIdManager
from ..controller.store import Endpoint, MetadataStore, StoreCalls
from ..coordinator.group import GroupConfig, GroupCoordinator
from ..coordinator.group.offsets_topic import OffsetsTopic
from ..coordinator.transaction.coordinator import TransactionCoordinator
from ..coordinator.transaction.markers import Connect, TransactionMarkers, connect_to_broker
from ..coordinator.transaction.state_topic import TransactionStateTopic
from ..coordinator.transaction.verification import TransactionVerifier
from ..partition import Flusher, PartitionManager
from ..protocol.errors import ErrorCode
from .acls import BrokerAcls, authorizer_from_config
from .users import ScramUsers


@dataclass(slots=True)
class ClusterIdentity:
    """This broker as its clients see it: the cluster it belongs to and where each listener
    is reached. Written by the broker as it starts (``cluster_id`` once the store has
    answered, ``endpoints`` once it listens, for listeners configured on port 0); read by
    handlers."""
    cluster_mode: bool  # a member of a ZooKeeper cluster (False: a single broker)
    endpoints: tuple[Endpoint, ...]  # every listener, as advertised
    cluster_id: str = ""  # "" until the broker has read it from its metadata store

    def address(self, listener: str) -> tuple[str, int] | None:
        """Where a client of ``listener`` reaches this broker."""
        return next(((e.host, e.port) for e in self.endpoints if e.listener == listener), None)


@dataclass(frozen=True, slots=True)
class BrokerServices:
    node_id: int
    config: BrokerConfig
    identity: ClusterIdentity
    # the live brokers (as advertised) and the controller, as the store last said
    brokers: LiveBrokers
    partitions: PartitionManager  # the replicas this broker hosts and every topic's state
    flusher: Flusher  # group commit under log.flush.policy=ack
    producer_ids: ProducerIdManager
    offsets_topic: OffsetsTopic
    group_coordinator: GroupCoordinator
    transaction_state_topic: TransactionStateTopic
    transaction_coordinator: TransactionCoordinator
    # asks a transaction's coordinator before a producer's first write to a partition
    transaction_verifier: TransactionVerifier
    # SCRAM users: the credentials SASL checks, DescribeUserScramCredentials and
    # AlterUserScramCredentials
    scram_users: ScramUsers
    # the ACLs in force and their authorizer (allows everything when none is configured)
    acls: BrokerAcls

    async def wait_for_group_records(self, group_id: str) -> ErrorCode:
        """Once a group operation wrote to ``__consumer_offsets``: wait until the ISR has it,
        so a coordinator failover cannot bring back an older generation (Kafka's coordinator
        appends with acks=all). Returns the ErrorCode to answer with (NONE to go on)."""
        return await self.offsets_topic.wait_for_group_replication(
            self.group_coordinator, group_id, self.config["offsets.commit.timeout.ms"])


def build_services(config: BrokerConfig, identity: ClusterIdentity, partitions: PartitionManager,
                   store: MetadataStore, calls: StoreCalls, brokers: LiveBrokers,
                   clock: Callable[[], int], connect: Connect = connect_to_broker
                   ) -> BrokerServices:
    """The state owners of one broker over its ``partitions``, wired as a broker wires them;
    ``connect`` opens the transaction markers' and the transaction verifier's connections to
    another broker."""
    node_id: int = config["node.id"]
    flusher = Flusher()
    partitions.flusher = flusher
    producer_ids = ProducerIdManager(store, calls)
    offsets_topic = OffsetsTopic(partitions, clock)
    group_coordinator = GroupCoordinator(GroupConfig.from_broker_config(config), offsets_topic,
                                         clock)
    transaction_state_topic = TransactionStateTopic(partitions, clock)
    markers = TransactionMarkers(node_id, partitions, group_coordinator, brokers.address,
                                 connect)
    transaction_coordinator = TransactionCoordinator(config, transaction_state_topic,
                                                     producer_ids, markers, clock)
    verifier = TransactionVerifier(node_id, partitions, transaction_coordinator, brokers.address,
                                   connect, config["transaction.partition.verification.enable"])
    return BrokerServices(node_id, config, identity, brokers, partitions, flusher, producer_ids,
                          offsets_topic, group_coordinator, transaction_state_topic,
                          transaction_coordinator, verifier, ScramUsers(store, calls),
                          BrokerAcls(authorizer_from_config(config), store, calls))
