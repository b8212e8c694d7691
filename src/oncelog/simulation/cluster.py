"""The cluster's control plane under one seed: N brokers, one ZooKeeper, one clock, in one
process.

Each simulated broker runs oncelog's own control-plane code - ``ZooKeeperMetadataStore``
(over ``MemoryZooKeeper``'s kazoo-shaped client), ``PartitionManager`` with real logs in a
temporary directory, ``ClusterMembership`` (the metadata sync, ISR changes, the leadership
lease, the controller role and its elections) - on a ``SimulatedLoop``, so timers take no
wall-clock time. What a real broker would do through the network goes
through ``Network``: each store call waits a latency there and back, and fails with
``StoreUnavailable`` when the broker is cut off from ZooKeeper; watch notifications travel
the same way, and those sent while cut off are lost (the broker reads everything again when
it reconnects, as it does on a real reconnection). Requests between brokers and from
clients (``serve``: the replica fetchers', the producers') go to the target's own handlers;
a run may lose a share of them or of their answers, and a paused broker (SIGSTOP) neither
reads, sends, pings ZooKeeper nor hears its notifications until it resumes, while its
clients time out.

A run (``Simulation.run``) draws a schedule from its seed - produce requests (acks 0, 1,
all), idempotent producers retrying their batches with the same sequence, CreateTopics,
CreatePartitions and DeleteTopics through random brokers, brokers crashed (kill -9: the
session is left to expire), restarted and paused, brokers cut off from ZooKeeper and
healed, sessions expired by ZooKeeper - and after every step checks the invariants in
``invariants.py``. At the end every fault is healed and the cluster left alone until it
must have converged; then every live broker's view must equal the store's. A failing seed
raises ``InvariantBroken`` naming the seed, the step and the command that replays it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, cast

from ..config import BrokerConfig
from ..broker.context import RequestContext
from ..broker.dispatch import dispatch
from ..broker.services import BrokerServices, ClusterIdentity, build_services
from ..controller.live_brokers import LiveBrokers
from ..coordinator.leadership import CoordinatorLeadership
from ..membership import ClusterMembership
from ..controller.store import (BrokerRegistration, Endpoint, NodeIdInUse, StoreCalls,
                                StoreTimedOut, StoreUnavailable)
from ..partition import LeadershipLease, PartitionManager
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages import (AddPartitionsToTxnRequest, EndTxnRequest,
                                 FetchResponse, FindCoordinatorRequest, InitProducerIdRequest,
                                 ProduceRequest)
from ..protocol.records import make_batch
from ..replication.fetcher import ReplicaFetcher
from ..storage import FileRegion
from .invariants import Observer
from .loop import SimulatedLoop
from .zookeeper import MemoryZooKeeper
from .zookeeper_store import SimulatedZooKeeperStore

log = logging.getLogger(__name__)

_P = ParamSpec("_P")
_T = TypeVar("_T")
ZOOKEEPER = "zookeeper"
PORT = 9092  # every simulated broker registers its name and this port


@dataclass
class Settings:
    """One run's shape; ``Settings.draw`` picks them from the seed."""
    brokers: int = 3
    steps: int = 60
    session_timeout_s: float = 6.0
    replica_lag_s: float = 10.0
    mean_step_s: float = 1.0
    latency_s: tuple[float, float] = (0.0005, 0.005)
    topic_names: int = 4
    drop_rate: float = 0.0  # of requests and of answers between clients and brokers
    producers: int = 2  # idempotent ones
    transactional: int = 1  # transactional producers

    @classmethod
    def draw(cls, rng: random.Random) -> Settings:
        return cls(brokers=rng.choice((2, 3, 3, 4)), steps=rng.randint(20, 60),
                   session_timeout_s=rng.choice((2.0, 6.0, 10.0)),
                   replica_lag_s=rng.choice((1.0, 10.0, 30.0)),
                   mean_step_s=rng.choice((0.05, 0.5, 2.0)),
                   latency_s=rng.choice(((0.0002, 0.002), (0.001, 0.02), (0.005, 0.3))),
                   topic_names=rng.randint(2, 6),
                   drop_rate=rng.choice((0.0, 0.0, 0.01, 0.05)),
                   producers=rng.randint(1, 3),
                   transactional=rng.choice((0, 1, 2)))


class Network:
    """Who can reach whom, and how long a message takes (drawn from the run's random)."""

    def __init__(self, rng: random.Random, latency_s: tuple[float, float],
                 drop_rate: float = 0.0) -> None:
        self.rng = rng
        self.latency_range = latency_s
        self.drop_rate = drop_rate
        self.cut: set[frozenset[str]] = set()

    def latency(self) -> float:
        low, high = self.latency_range
        return self.rng.uniform(low, high)

    def connected(self, a: str, b: str) -> bool:
        return not self.cut or frozenset((a, b)) not in self.cut

    def dropped(self) -> bool:
        """Whether one message is lost (a connection that breaks while it travels)."""
        return self.drop_rate > 0 and self.rng.random() < self.drop_rate


class SimulatedStoreCalls(StoreCalls):
    """Store calls as a broker makes them over the simulated network: there (a latency),
    executed at ZooKeeper at once, back (another); ``StoreUnavailable`` after the store's
    request timeout when the broker is cut off either way."""

    def __init__(self, node: Node) -> None:  # no thread pool
        self.node = node

    async def __call__(self, function: Callable[_P, _T], *args: _P.args,
                       **kwargs: _P.kwargs) -> _T:
        node, network = self.node, self.node.world.network
        await node.running()  # a paused broker sends nothing
        if not node.reaches_zookeeper():
            await asyncio.sleep(node.world.request_timeout_s)
            raise StoreUnavailable(f"broker {node.node_id} is cut off from ZooKeeper")
        await asyncio.sleep(network.latency())
        if not node.reaches_zookeeper() or not node.alive:
            await asyncio.sleep(node.world.request_timeout_s)
            raise StoreUnavailable(f"broker {node.node_id}'s request was lost")
        result = function(*args, **kwargs)
        await asyncio.sleep(network.latency())
        await node.running()  # nor reads its answers
        if not node.reaches_zookeeper():  # done at ZooKeeper, but the answer is lost
            await asyncio.sleep(node.world.request_timeout_s)
            raise StoreUnavailable(f"broker {node.node_id}'s answer was lost")
        return result

    async def within(self, timeout_s: float, function: Callable[_P, _T], *args: _P.args,
                     **kwargs: _P.kwargs) -> _T:
        try:
            return await asyncio.wait_for(self(function, *args, **kwargs), timeout_s)
        except TimeoutError:
            raise StoreTimedOut(f"no answer within {timeout_s:g} s") from None

    def close(self) -> None:
        pass


_API_KEYS: dict[type, ApiKey] = {}  # request class -> its API key

# what a producer retries (Kafka's RetriableException subclasses, as a produce answers them)
RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.CORRUPT_MESSAGE})
# what a transactional producer retries at its coordinator
COORDINATOR_RETRIABLE = frozenset({
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.REQUEST_TIMED_OUT})
TRANSACTIONAL = 0x10  # a batch's attributes: part of a transaction
TRANSACTION_TIMEOUT_MS = 20_000
REQUEST_TIMEOUT_S = 30.0  # request.timeout.ms and replica.socket.timeout.ms


async def serve(world: World, sender: str, target: Node | None, request: Any, version: int,
                client_id: str, served: dict[str, int] | None = None) -> Any:
    """A request from ``sender`` to broker ``target`` over the simulated network, answered
    by oncelog's own handler; ``ConnectionError`` when it cannot get there or back (after a
    connection timeout's worth of waiting), when the request or its answer is lost (the
    run's drop rate), or when no answer comes within the request timeout (the target is
    paused, say). The target handles a request that arrived even when the sender has given
    up on it by then, as a real broker would. ``served`` receives, for a produce request,
    the incarnation (``created_version``) of each of its topics the target held when it
    answered: what the client cannot know, and the invariants must."""
    timeout_s = 2.0
    sending_node = world.node_named(sender)
    if sending_node is not None:
        await sending_node.running()
    if target is None or not target.alive or not world.network.connected(sender, target.name):
        await asyncio.sleep(timeout_s)
        raise ConnectionError(f"{target.name if target else 'no broker'} cannot be reached")
    answer = asyncio.ensure_future(_handle(world, sender, target, request, version, client_id,
                                           served))
    # the sender may give up on it (a timeout, or its own task cancelled) before it fails
    answer.add_done_callback(_ignore_result)
    try:
        response = await asyncio.wait_for(asyncio.shield(answer), REQUEST_TIMEOUT_S)
    except TimeoutError:
        raise ConnectionError(f"no answer from {target.name} within "
                              f"{REQUEST_TIMEOUT_S:g} s") from None
    await asyncio.sleep(world.network.latency())
    if world.network.dropped():
        await asyncio.sleep(timeout_s)
        raise ConnectionError(f"the connection to {target.name} broke: the answer was lost")
    if sending_node is not None:
        await sending_node.running()
    if not world.network.connected(sender, target.name) or (
            sending_node is not None and not sending_node.alive):
        await asyncio.sleep(timeout_s)
        raise ConnectionError(f"the answer from {target.name} was lost")
    return _as_received(response)


async def _handle(world: World, sender: str, target: Node, request: Any, version: int,
                  client_id: str, served: dict[str, int] | None) -> Any:
    """The target's side: the request travels, waits while the target is paused, and is
    answered by the target's handler (unless the target died or restarted meanwhile)."""
    incarnation = target.incarnation
    await asyncio.sleep(world.network.latency())
    if world.network.dropped():
        await asyncio.sleep(2.0)
        raise ConnectionError(f"the connection to {target.name} broke: the request was lost")
    await target.running()
    if not target.alive or target.incarnation != incarnation:
        raise ConnectionError(f"{target.name} reset the connection")
    assert target.services is not None  # made by start(), before it first waits
    api_key = _API_KEYS.get(type(request))
    if api_key is None:
        api_key = _API_KEYS[type(request)] = ApiKey(request.API_KEY)
    ctx = RequestContext(api_key, version, 0, client_id, sender, target.services, "PLAINTEXT")
    if served is not None and target.partitions is not None:
        # the incarnation the append goes to: the one held as the request is served (the
        # topic may be deleted, or deleted and created again, before the answer)
        for topic_data in request.topic_data:
            topic = target.partitions.topics.get(topic_data.name)
            if topic is not None:
                served[topic_data.name] = topic.record.created_version
    return await dispatch(ctx, request)


def _ignore_result(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved: a late failure nobody waits for is not an error


def _as_received(response: Any) -> Any:
    """Record sets as a client receives them: bytes in a buffer (a region is read), none
    when empty."""
    if isinstance(response, FetchResponse):
        for topic in response.responses:
            for partition in topic.partitions:
                records: Any = partition.records
                if isinstance(records, FileRegion):
                    records = records.read()
                partition.records = cast(Any, memoryview(bytes(records)) if records else None)
    return response


class SimulatedLeaderClient:
    """A broker's connection to a partition leader (a follower's, or the transaction
    markers'), through the simulated network."""

    def __init__(self, node: Node, leader_id: int, client_id: str = "replica-fetcher") -> None:
        self.node = node
        self.leader_id = leader_id
        self.client_id = client_id
        self.host, self.port = f"broker-{leader_id}", PORT  # as the leader registers

    async def request(self, request: Any, version: int) -> Any:
        leader = self.node.world.nodes.get(self.leader_id)
        return await serve(self.node.world, self.node.name, leader, request, version,
                           self.client_id)

    def close(self) -> None:
        pass


async def _inline(function: Callable[..., _T], *args: Any) -> _T:
    return function(*args)


class Node:
    """One simulated broker: a process that can be started, crashed and started again on the
    same data directory."""

    def __init__(self, world: World, node_id: int) -> None:
        self.world = world
        self.node_id = node_id
        self.name = f"broker-{node_id}"
        self.data_dir = world.directory / self.name
        self.alive = False
        self.store: SimulatedZooKeeperStore | None = None
        self.partitions: PartitionManager | None = None
        self.membership: ClusterMembership | None = None
        self.lease: LeadershipLease | None = None
        self.brokers: LiveBrokers | None = None
        self.config: BrokerConfig | None = None
        # what its request handlers use, built as a Broker builds its own
        self.services: BrokerServices | None = None
        self._task: asyncio.Task[None] | None = None
        self.incarnation = 0
        self.start_requested = False  # a restart the schedule asked for, not begun yet
        self.paused = False
        self._resumed: asyncio.Event | None = None

    async def running(self) -> None:
        """Wait while this broker is paused (SIGSTOP): it neither reads nor sends."""
        while self.paused and self._resumed is not None:
            await self._resumed.wait()

    def pause(self) -> None:
        """SIGSTOP: what it was sending and what is sent to it waits until it resumes; so
        do its ZooKeeper pings (a pause longer than its session expires the session). Its
        own timers still fire meanwhile - the one liberty taken: what they do reaches
        nobody until it resumes."""
        self.paused = True
        self._resumed = asyncio.Event()

    def resume(self) -> None:
        self.paused = False
        if self._resumed is not None:
            self._resumed.set()

    def reaches_zookeeper(self) -> bool:
        return self.alive and self.world.network.connected(self.name, ZOOKEEPER)

    async def start(self) -> None:
        world = self.world
        loop = asyncio.get_running_loop()
        self.incarnation += 1
        self.start_requested = False
        self.resume()
        if world.observer is not None:
            world.observer.forget_node(self.node_id)
        config = BrokerConfig({
            "node.id": str(self.node_id), "log.dirs": str(self.data_dir),
            "zookeeper.connect": "sim:2181/oncelog",
            "zookeeper.session.timeout.ms": str(int(world.settings.session_timeout_s * 1000)),
            "replica.lag.time.max.ms": str(int(world.settings.replica_lag_s * 1000)),
            "default.replication.factor": str(min(3, world.settings.brokers)),
            "min.insync.replicas": "1", "num.partitions": "2",
            "replica.fetch.wait.max.ms": "500", "replica.fetch.backoff.ms": "100",
            "transaction.state.log.num.partitions": "2",
            "transaction.state.log.replication.factor": str(min(3, world.settings.brokers)),
            "transaction.state.log.min.isr": "2",
            "offsets.topic.num.partitions": "2",
            "offsets.topic.replication.factor": str(min(3, world.settings.brokers)),
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"})
        self.config = config
        self.alive = True
        calls = SimulatedStoreCalls(self)
        store = SimulatedZooKeeperStore(world.zookeeper, self, config)
        self.store = store
        self.lease = LeadershipLease(0.8 * world.settings.session_timeout_s, loop.time)

        def clock() -> int:
            return int(loop.time() * 1000)

        self.partitions = PartitionManager(config, store, clock, self.node_id,
                                           lease=self.lease, calls=calls)
        self.partitions.new_topic_id = world.new_topic_id  # a replay names the same ids
        self.partitions.run_blocking = _inline
        self.brokers = LiveBrokers(monotonic=loop.time)
        self.partitions.live_broker_ids = lambda: sorted(self.brokers.live) if self.brokers \
            else [self.node_id]
        registration = BrokerRegistration(self.node_id, self.name, PORT)
        self.services = build_services(
            config, ClusterIdentity(True, (Endpoint("PLAINTEXT", "PLAINTEXT", registration.host,
                                             registration.port),)),
            self.partitions, store, calls, self.brokers, clock, connect=self._connect)
        services = self.services
        # the coordinators follow the leadership of their internal topics' partitions, as
        # a Broker's do (Broker._join_cluster)
        leadership = CoordinatorLeadership(self.node_id, self.partitions,
                                           services.group_coordinator,
                                           services.transaction_coordinator)
        membership = self.membership = ClusterMembership(
            config, store, calls, self.partitions, self.lease, self.brokers,
            lambda: registration, fetcher_factory=self._fetcher, monotonic=loop.time,
            run_blocking=_inline, on_applied=leadership.follow)
        generation = self.incarnation
        while True:  # as the broker's start: retried until ZooKeeper answers
            try:
                await calls(store.connect)
                break
            except StoreUnavailable:
                await asyncio.sleep(1.0)
            if self.incarnation != generation or not self.alive:
                return
        if self.incarnation != generation or not self.alive:
            return  # killed, or started again, while connecting
        membership.watch()
        while True:  # as Broker._register_in_cluster: our killed self may still be registered
            try:
                await calls(membership.register)
                await membership.sync.read_everything()
                break
            except (StoreUnavailable, NodeIdInUse):
                await asyncio.sleep(0.5)
            if self.incarnation != generation or not self.alive:
                return  # killed while starting
        if self.incarnation != generation or not self.alive:
            return
        self._task = loop.create_task(self._run(), name=f"{self.name}-{self.incarnation}")

    def _connect(self, host: str, port: int) -> SimulatedLeaderClient:
        """The transaction markers' connection to the broker registered at host:port."""
        leader_id = next((n.node_id for n in self.world.nodes.values()
                          if (n.name, PORT) == (host, port)), -1)  # -1: reaches no one
        return SimulatedLeaderClient(self, leader_id, "transaction-markers")

    def _fetcher(self, leader_id: int, registration: BrokerRegistration) -> ReplicaFetcher:
        assert self.partitions is not None and self.config is not None
        return ReplicaFetcher(self.node_id, leader_id, registration.host, registration.port,
                              self.partitions.all_partitions, self.config,
                              client=SimulatedLeaderClient(self, leader_id),
                              monotonic=asyncio.get_running_loop().time)

    async def _run(self) -> None:
        assert self.membership is not None and self.services is not None
        services = self.services
        try:
            async with asyncio.TaskGroup() as tasks:  # as Broker.run's background tasks
                tasks.create_task(services.group_coordinator.timer.run())
                tasks.create_task(services.transaction_coordinator.run())
                tasks.create_task(self.membership.run())
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            self.world.failures.append(f"{self.name}: membership died: {error!r}")
            raise

    def crash(self) -> None:
        """kill -9: every task stops; ZooKeeper ends the session only when it expires."""
        self.alive = False
        self.incarnation += 1  # a start in progress gives up
        self.resume()  # what waited on a paused broker finds it dead
        if self._task is not None:
            self._task.cancel()
        if self.services is not None:
            self.services.transaction_coordinator.close()
        if self.partitions is not None:
            self.partitions.close()
        if self.store is not None:
            self.store.abandon()

    async def create_topic(self, name: str, partitions: int, replication: int) -> str:
        assert self.partitions is not None and self.brokers is not None
        configs = {"min.insync.replicas": "2"} if replication >= 2 else {}
        try:
            await self.partitions.create_topic(name, partitions, replication, configs,
                                               live_brokers=sorted(self.brokers.live),
                                               timeout_s=30.0)
        except KafkaError as error:
            return error.code.name
        return "NONE"

    async def delete_topic(self, name: str) -> str:
        assert self.partitions is not None
        try:
            await self.partitions.delete_topic(name, timeout_s=30.0)
        except KafkaError as error:
            return error.code.name
        return "NONE"

    async def create_partitions(self, name: str, count: int) -> str:
        assert self.partitions is not None and self.brokers is not None
        try:
            await self.partitions.create_partitions(name, count,
                                                    live_brokers=sorted(self.brokers.live),
                                                    timeout_s=30.0)
        except KafkaError as error:
            return error.code.name
        return "NONE"


@dataclass
class IdempotentProducer:
    """A client's idempotent producer (enable.idempotence, acks=all, one batch in flight per
    partition): a producer id from InitProducerId, a sequence per partition, a batch retried
    with the same sequence until it is acknowledged or its delivery times out - then the
    producer starts again with a new id, as Kafka's does once a batch's fate is unknown."""
    name: str
    producer_id: int = -1
    epoch: int = -1
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)  # by topic-partition
    in_flight: set[tuple[str, int]] = field(default_factory=set)
    initializing: bool = False

    def reset(self) -> None:
        self.producer_id, self.epoch = -1, -1
        self.sequences.clear()


@dataclass
class TransactionalProducer:
    """A client's transactional producer (transactional.id): its coordinator, found with
    FindCoordinator; a producer id and epoch from InitProducerId (which fences its previous
    instance and ends that one's transaction); one transaction at a time."""
    transactional_id: str
    producer_id: int = -1
    epoch: int = -1
    coordinator: int = -1
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)  # by topic-partition
    busy: bool = False

    def reset(self) -> None:
        """After an error it cannot go on from: a new instance, InitProducerId again."""
        self.producer_id, self.epoch = -1, -1
        self.sequences.clear()


@dataclass
class Transaction:
    """One transaction as its client saw it: the values it sent where (the topic incarnation
    the leader held when it answered, or the one the client's metadata named for a batch
    not acknowledged), whether every batch was acknowledged, and its outcome - committed or
    aborted when EndTxn said so, unknown otherwise (open until EndTxn)."""
    transactional_id: str
    producer_id: int
    epoch: int
    keys: list[tuple[str, int, int]]
    values: list[tuple[tuple[str, int, int], bytes]] = field(default_factory=list)
    all_acknowledged: bool = True
    outcome: str = "open"


def _add_partitions_code(response: Any) -> ErrorCode:
    """AddPartitionsToTxn v3 answers per partition: the first error, or NONE."""
    for topic in response.results_by_topic_v3_and_below:
        for result in topic.results_by_partition:
            if result.partition_error_code:
                return ErrorCode(result.partition_error_code)
    return ErrorCode.NONE


def _keys_text(keys: list[tuple[str, int, int]]) -> str:
    return ", ".join(f"{name}-{index}" for name, _created, index in keys)


@dataclass
class World:
    seed: int
    settings: Settings
    directory: Path
    rng: random.Random
    network: Network
    zookeeper: MemoryZooKeeper
    nodes: dict[int, Node] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    observer: Observer | None = None
    # (topic, created_version, partition) -> values acknowledged with acks=all
    acknowledged: dict[tuple[str, int, int], list[bytes]] = field(default_factory=dict)
    # values idempotent producers sent (acknowledged or not): each is in its log once at most
    idempotent: set[bytes] = field(default_factory=set)
    producers: list[IdempotentProducer] = field(default_factory=list)
    transactional: list[TransactionalProducer] = field(default_factory=list)
    transactions: list[Transaction] = field(default_factory=list)
    produced: int = 0
    # topic ids, drawn apart from the schedule's random (so ids never shift the schedule)
    ids: random.Random = field(default_factory=lambda: random.Random(0))

    def new_topic_id(self) -> str:
        return str(uuid.UUID(int=self.ids.getrandbits(128), version=4))

    @property
    def request_timeout_s(self) -> float:
        return max(2.0, self.settings.session_timeout_s)

    def live_nodes(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.alive]

    def node_named(self, name: str) -> Node | None:
        if not name.startswith("broker-"):
            return None
        return self.nodes.get(int(name.split("-")[1]))


class InvariantBroken(AssertionError):
    pass


def replay_command(seed: int) -> str:
    return f"python -m oncelog.simulation --seed {seed} -v"


class Simulation:
    def __init__(self, seed: int, settings: Settings | None = None,
                 directory: Path | None = None) -> None:
        rng = random.Random(seed)
        self.settings = settings or Settings.draw(rng)
        self.seed = seed
        self._own_directory = directory is None
        self.directory = directory or Path(tempfile.mkdtemp(prefix=f"oncelog-sim-{seed}-",
                                                            dir=_scratch()))
        self.loop = SimulatedLoop()
        self.loop.set_exception_handler(self._unhandled)
        self.world = World(seed, self.settings, self.directory, rng,
                           Network(rng, self.settings.latency_s, self.settings.drop_rate),
                           MemoryZooKeeper(self.loop.time), ids=random.Random(seed))
        self.observer = Observer(self.world)
        self.world.observer = self.observer

    def run(self) -> World:
        try:
            self.loop.run_until_complete(self._main())
        finally:
            self._close()
        return self.world

    def _close(self) -> None:
        for node in self.world.nodes.values():
            if node.alive:
                node.crash()
        try:
            self.loop.run_until_complete(asyncio.sleep(0))
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            self.loop.close()
            if self._own_directory:
                shutil.rmtree(self.directory, ignore_errors=True)

    def _unhandled(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """A broker's task that died of an exception nobody awaited: a crash the run must
        report, not a line in a log."""
        error = context.get("exception")
        self.world.failures.append(f"{context.get('message', 'unhandled')}: {error!r}")
        loop.default_exception_handler(context)

    def _note(self, text: str) -> None:
        self.world.log.append(f"{self.loop.time():9.3f} {text}")

    def _fail(self, step: int, what: str) -> InvariantBroken:
        tail = "\n".join(self.world.log[-25:])
        return InvariantBroken(f"seed {self.seed}, step {step}: {what}\n"
                               f"replay: {replay_command(self.seed)}\n"
                               f"last events:\n{tail}")

    async def _main(self) -> None:
        world, rng = self.world, self.world.rng
        ticker = asyncio.get_running_loop().create_task(self._zookeeper_ticker())
        world.producers = [IdempotentProducer(f"producer-{n}")
                           for n in range(1, self.settings.producers + 1)]
        world.transactional = [TransactionalProducer(f"transactional-{n}")
                               for n in range(1, self.settings.transactional + 1)]
        for node_id in range(1, self.settings.brokers + 1):
            world.nodes[node_id] = Node(world, node_id)
            await world.nodes[node_id].start()
        pending: set[asyncio.Task[Any]] = set()
        for step in range(self.settings.steps):
            await asyncio.sleep(rng.expovariate(1 / self.settings.mean_step_s))
            task = self._act(rng)
            if task is not None:
                pending.add(task)
                task.add_done_callback(pending.discard)
            self._check(step)
        await self._heal_all()
        await self._settle(pending)
        if pending:
            await asyncio.wait(pending, timeout=300)
        self._check(self.settings.steps)
        problems = self.observer.converged()
        if problems:
            raise self._fail(self.settings.steps, "did not converge: " + "; ".join(problems))
        problems = self.observer.durable() + self.observer.transactions()
        if problems:
            raise self._fail(self.settings.steps, "; ".join(problems))
        ticker.cancel()

    async def _settle(self, pending: set[asyncio.Task[Any]]) -> None:
        """After healing: wait until the cluster has settled - every broker's view the
        store's, every acknowledged record where it belongs, no transaction left open - and
        has stayed so for a session's length (what a late session expiry or a coordinator's
        abort could still change), or until the time it is given runs out (three sessions,
        the replica lag and 5 s; a transaction's timeout and 10 s more when there were
        transactions). The checks that follow say what is wrong when it never settles."""
        loop = asyncio.get_running_loop()
        sessions = self.settings.session_timeout_s
        budget = 3 * sessions + self.settings.replica_lag_s + 5.0
        if self.world.transactions:  # what its client left open, its coordinator aborts
            budget += TRANSACTION_TIMEOUT_MS / 1000 + 10.0
        deadline = loop.time() + budget
        settled_since: float | None = None
        while loop.time() < deadline:
            await asyncio.sleep(1.0)
            if pending or self.world.failures or not self._settled():
                settled_since = None
            elif settled_since is None:
                settled_since = loop.time()
            elif loop.time() - settled_since >= sessions:
                return

    def _settled(self) -> bool:
        observer = self.observer
        return not (observer.converged() or observer.durable() or observer.transactions())

    def _check(self, step: int) -> None:
        if self.world.failures:
            raise self._fail(step, "; ".join(self.world.failures))
        problems = self.observer.check()
        if problems:
            raise self._fail(step, "; ".join(problems))

    async def _zookeeper_ticker(self) -> None:
        """ZooKeeper's side: heartbeats from connected brokers, expired sessions, and watch
        notifications carried to their brokers."""
        world = self.world
        interval_s = 0.1
        while True:
            await asyncio.sleep(interval_s)
            for node in world.nodes.values():
                if node.store is not None and node.reaches_zookeeper() and not node.paused:
                    node.store.heartbeat()
            world.zookeeper.expire_due()
            for node in world.nodes.values():
                if node.store is not None and node.alive and not node.paused:
                    node.store.carry_events(world.network)

    # -- the schedule ----------------------------------------------------------------------

    def _act(self, rng: random.Random) -> asyncio.Task[Any] | None:
        world = self.world
        loop = asyncio.get_running_loop()
        live = world.live_nodes()
        dead = [n for n in world.nodes.values() if not n.alive]
        action = rng.choices(
            ["produce", "idempotent", "transaction", "create", "delete", "grow", "crash",
             "restart", "cut", "heal", "expire", "isolate", "pause"],
            weights=[8, 6, 6, 6, 2, 2, 1, 2, 1, 3, 1, 1, 1])[0]
        if action == "produce" and live:
            return loop.create_task(self._produce(rng, rng.choice(live)))
        if action == "idempotent" and live:
            producer = rng.choice(world.producers)
            return loop.create_task(self._produce_idempotent(rng, producer))
        if action == "transaction" and live and world.transactional:
            transactional = rng.choice(world.transactional)
            return loop.create_task(self._transaction(rng, transactional))
        name = f"topic-{rng.randrange(self.settings.topic_names)}"
        if action in ("create", "delete", "grow") and live:
            node = rng.choice(live)
            if action == "create":
                replication = rng.randint(1, min(3, len(world.nodes)))
                partitions = rng.randint(1, 3)
                self._note(f"{node.name}: CreateTopics {name} x{partitions} RF {replication}")
                return loop.create_task(self._client(node.create_topic(name, partitions,
                                                                       replication),
                                                     node, f"CreateTopics {name}"))
            if action == "delete":
                self._note(f"{node.name}: DeleteTopics {name}")
                return loop.create_task(self._client(node.delete_topic(name), node,
                                                     f"DeleteTopics {name}"))
            count = rng.randint(2, 5)
            self._note(f"{node.name}: CreatePartitions {name} to {count}")
            return loop.create_task(self._client(node.create_partitions(name, count), node,
                                                 f"CreatePartitions {name}"))
        if action == "crash" and len(live) > 1:
            node = rng.choice(live)
            self._note(f"{node.name}: kill -9")
            node.crash()
        elif action == "restart" and dead:
            node = rng.choice(dead)
            self._note(f"{node.name}: restarted")
            node.start_requested = True  # healing, right after this step, must not start it too
            return loop.create_task(self._start(node))
        elif action == "cut" and live:
            node = rng.choice(live)
            self._note(f"{node.name}: cut off from ZooKeeper")
            world.network.cut.add(frozenset((node.name, ZOOKEEPER)))
            if node.store is not None:
                node.store.disconnected()
        elif action == "heal" and world.network.cut:
            cut = sorted(world.network.cut, key=sorted)[rng.randrange(len(world.network.cut))]
            self._heal(cut)
        elif action == "isolate" and live:
            node = rng.choice(live)
            others = [n.name for n in world.nodes.values() if n is not node]
            peer = rng.choice([*others, "client"])
            self._note(f"{node.name}: cut off from {peer}")
            world.network.cut.add(frozenset((node.name, peer)))
        elif action == "pause" and live:
            node = rng.choice(live)
            if not node.paused:
                pause_s = self.settings.session_timeout_s * rng.uniform(0.3, 1.8)
                self._note(f"{node.name}: paused (SIGSTOP) for {pause_s:.3f} s")
                node.pause()
                loop.call_later(pause_s, self._resume, node, node.incarnation)
        elif action == "expire" and live:
            # cut off from ZooKeeper for longer than its session: ZooKeeper expires it, as
            # it would (never before a session timeout without word from the broker: the
            # leadership lease counts on that)
            node = rng.choice(live)
            cut = frozenset((node.name, ZOOKEEPER))
            if cut not in world.network.cut:
                self._note(f"{node.name}: cut off from ZooKeeper past its session")
                world.network.cut.add(cut)
                if node.store is not None:
                    node.store.disconnected()
                loop.call_later(self.settings.session_timeout_s * rng.uniform(1.2, 2.0),
                                self._heal, cut)
        return None

    async def _produce(self, rng: random.Random, node: Node) -> None:
        """A client's produce, routed by what ``node`` says the leader is."""
        world = self.world
        if node.partitions is None or not node.partitions.topics:
            return
        names = sorted(n for n in node.partitions.topics if not n.startswith("__"))
        if not names:
            return
        topic = node.partitions.topics[rng.choice(names)]
        index = rng.randrange(topic.partition_count)
        leader = world.nodes.get(topic.states[index].leader)
        acks = rng.choice((0, 1, -1, -1))
        world.produced += 1
        value = f"{self.seed}/{world.produced}".encode()
        P = ProduceRequest
        request = P(transactional_id=None, acks=acks, timeout_ms=3000, topic_data=[
            P.TopicProduceData(name=topic.name, partition_data=[
                P.TopicProduceData.PartitionProduceData(index=index, records=make_batch(
                    [value], timestamp_ms=int(self.loop.time() * 1000)))])])
        served: dict[str, int] = {}
        try:
            response = await serve(world, "client", leader, request, 9, "producer", served)
        except ConnectionError:
            return
        code = response.responses[0].partition_responses[0].error_code
        if acks == -1 and code == 0 and topic.name in served:
            key = (topic.name, served[topic.name], index)
            world.acknowledged.setdefault(key, []).append(value)
            self._note(f"{leader.name if leader else '?'}: acknowledged {value!r} on "
                       f"{topic.name}-{index} (acks=all)")

    async def _produce_idempotent(self, rng: random.Random, producer: IdempotentProducer
                                  ) -> None:
        """One batch of an idempotent producer, retried until acknowledged or timed out."""
        world = self.world
        if producer.producer_id < 0:
            await self._init_producer_id(rng, producer)
            return
        node = rng.choice(world.live_nodes() or [None])  # whose metadata the client has
        if node is None or node.partitions is None:
            return
        names = sorted(n for n in node.partitions.topics if not n.startswith("__"))
        if not names:
            return
        topic = node.partitions.topics[rng.choice(names)]
        key = (topic.name, rng.randrange(topic.partition_count))
        if key in producer.in_flight:
            return
        producer.in_flight.add(key)
        try:
            await self._deliver(rng, producer, key)
        finally:
            producer.in_flight.discard(key)

    async def _deliver(self, rng: random.Random, producer: IdempotentProducer,
                       key: tuple[str, int]) -> None:
        """Like Kafka's producer, it knows partitions by name: a topic deleted and created
        again gets the next sequence, which the new partition refuses."""
        world = self.world
        name, index = key
        world.produced += 1
        value = f"{self.seed}/{world.produced}".encode()
        sequence = producer.sequences.get(key, 0)
        producer_id, epoch = producer.producer_id, producer.epoch
        batch = make_batch([value], timestamp_ms=int(self.loop.time() * 1000),
                           producer_id=producer_id, producer_epoch=epoch,
                           base_sequence=sequence)
        world.idempotent.add(value)
        P = ProduceRequest
        request = P(transactional_id=None, acks=-1, timeout_ms=3000, topic_data=[
            P.TopicProduceData(name=name, partition_data=[
                P.TopicProduceData.PartitionProduceData(index=index, records=batch)])])
        deadline = self.loop.time() + 120.0  # delivery.timeout.ms
        outcome = "timed out"
        while self.loop.time() < deadline and producer.producer_id == producer_id:
            leader = self._leader_as_seen(key)
            if leader is None:
                outcome = "no leader known"
            else:
                served: dict[str, int] = {}
                try:
                    response = await serve(world, "client", leader, request, 9, producer.name,
                                           served)
                except ConnectionError as error:
                    outcome = str(error)
                else:
                    code = ErrorCode(response.responses[0].partition_responses[0].error_code)
                    if code is ErrorCode.NONE:
                        world.acknowledged.setdefault((name, served[name], index),
                                                      []).append(value)
                        producer.sequences[key] = sequence + 1
                        self._note(f"{leader.name}: acknowledged {value!r} on {name}-{index} "
                                   f"({producer.name}, id {producer_id}, sequence {sequence})")
                        return
                    outcome = code.name
                    if code not in RETRIABLE:
                        break
            await asyncio.sleep(rng.uniform(0.1, 1.0))  # retry.backoff.ms
        if producer.producer_id == producer_id:
            self._note(f"{producer.name}: {value!r} on {name}-{index} not delivered "
                       f"({outcome}); a new producer id")
            producer.reset()

    def _leader_as_seen(self, key: tuple[str, int]) -> Node | None:
        """The leader a client's fresh metadata names: the first live broker's view that
        has the partition."""
        name, index = key
        for node in self.world.live_nodes():
            topic = node.partitions.topics.get(name) if node.partitions is not None else None
            if topic is not None and index < topic.partition_count:
                return self.world.nodes.get(topic.states[index].leader)
        return None

    async def _init_producer_id(self, rng: random.Random, producer: IdempotentProducer
                                ) -> None:
        world = self.world
        if producer.initializing or not world.live_nodes():
            return
        producer.initializing = True
        try:
            node = rng.choice(world.live_nodes())
            request = InitProducerIdRequest(transactional_id=None,
                                            transaction_timeout_ms=60000, producer_id=-1,
                                            producer_epoch=-1)
            try:
                response = await serve(world, "client", node, request, 4, producer.name)
            except ConnectionError:
                return
            if response.error_code == 0:
                producer.producer_id, producer.epoch = response.producer_id, \
                    response.producer_epoch
                self._note(f"{producer.name}: producer id {producer.producer_id} from "
                           f"{node.name}")
        finally:
            producer.initializing = False

    # -- transactions ------------------------------------------------------------------------

    async def _transaction(self, rng: random.Random, producer: TransactionalProducer) -> None:
        """One transaction of a transactional producer: (InitProducerId,) AddPartitionsToTxn,
        a batch per partition, EndTxn - commit or abort - each retried as Kafka's producer
        retries it; its outcome is what the last EndTxn answer says, or unknown."""
        if producer.busy:
            return
        producer.busy = True
        try:
            if producer.producer_id < 0 and not await self._init_transactional(rng, producer):
                return
            await self._one_transaction(rng, producer)
        finally:
            producer.busy = False

    async def _one_transaction(self, rng: random.Random, producer: TransactionalProducer
                               ) -> None:
        world = self.world
        node = rng.choice(world.live_nodes() or [None])
        if node is None or node.partitions is None:
            return
        topics = sorted(name for name in node.partitions.topics if not name.startswith("__"))
        if not topics:
            return
        keys = set()
        for _ in range(rng.randint(1, 3)):
            topic = node.partitions.topics[rng.choice(topics)]
            keys.add((topic.name, topic.record.created_version,
                      rng.randrange(topic.partition_count)))
        record = Transaction(producer.transactional_id, producer.producer_id, producer.epoch,
                             sorted(keys))
        world.transactions.append(record)
        A = AddPartitionsToTxnRequest
        by_topic: dict[str, list[int]] = {}
        for name, _created, index in record.keys:
            by_topic.setdefault(name, []).append(index)
        add = A(v3_and_below_transactional_id=producer.transactional_id,
                v3_and_below_producer_id=producer.producer_id,
                v3_and_below_producer_epoch=producer.epoch,
                v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=name, partitions=indexes)
                                     for name, indexes in sorted(by_topic.items())])
        code = await self._ask_coordinator(rng, producer, add, 3, _add_partitions_code)
        self._note(f"{producer.transactional_id}: AddPartitionsToTxn "
                   f"{_keys_text(record.keys)} -> {code.name}")
        if code is not ErrorCode.NONE:
            record.outcome = "unknown"  # nothing written; the partitions may be added
            producer.reset()
            return
        commit = rng.random() < 0.7
        for key in record.keys:
            if not await self._transactional_batch(rng, producer, record, key):
                commit = False
        end = EndTxnRequest(transactional_id=producer.transactional_id,
                            producer_id=producer.producer_id, producer_epoch=producer.epoch,
                            committed=commit)
        code = await self._ask_coordinator(rng, producer, end, 3,
                                           lambda response: ErrorCode(response.error_code))
        word = "commit" if commit else "abort"
        self._note(f"{producer.transactional_id}: EndTxn {word} -> {code.name}")
        if code is ErrorCode.NONE:
            record.outcome = "committed" if commit else "aborted"
        else:
            record.outcome = "unknown"
            producer.reset()

    async def _transactional_batch(self, rng: random.Random, producer: TransactionalProducer,
                                   record: Transaction, key: tuple[str, int, int]) -> bool:
        world = self.world
        name, created, index = key
        world.produced += 1
        value = f"{self.seed}/{world.produced}".encode()
        sequence = producer.sequences.get((name, index), 0)
        batch = make_batch([value], timestamp_ms=int(self.loop.time() * 1000),
                           producer_id=producer.producer_id, producer_epoch=producer.epoch,
                           base_sequence=sequence, attributes=TRANSACTIONAL)
        P = ProduceRequest
        request = P(transactional_id=producer.transactional_id, acks=-1, timeout_ms=3000,
                    topic_data=[P.TopicProduceData(name=name, partition_data=[
                        P.TopicProduceData.PartitionProduceData(index=index, records=batch)])])
        deadline = self.loop.time() + 60.0
        while self.loop.time() < deadline:
            leader = self._leader_as_seen((name, index))
            if leader is not None:
                served: dict[str, int] = {}
                try:
                    response = await serve(world, "client", leader, request, 9,
                                           producer.transactional_id, served)
                except ConnectionError:
                    pass
                else:
                    code = ErrorCode(response.responses[0].partition_responses[0].error_code)
                    if code is ErrorCode.NONE:
                        producer.sequences[(name, index)] = sequence + 1
                        record.values.append(((name, served[name], index), value))
                        return True
                    if code not in RETRIABLE:
                        self._note(f"{producer.transactional_id}: {value!r} on "
                                   f"{name}-{index} -> {code.name}")
                        break
            await asyncio.sleep(rng.uniform(0.1, 1.0))
        else:
            self._note(f"{producer.transactional_id}: {value!r} on {name}-{index} not "
                       "delivered")
        record.values.append((key, value))  # perhaps written; must not be read
        record.all_acknowledged = False
        return False

    async def _init_transactional(self, rng: random.Random, producer: TransactionalProducer
                                  ) -> bool:
        request = InitProducerIdRequest(transactional_id=producer.transactional_id,
                                        transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                                        producer_id=-1, producer_epoch=-1)
        answer: list[Any] = []

        def code_of(response: Any) -> ErrorCode:
            answer.append(response)
            return ErrorCode(response.error_code)

        code = await self._ask_coordinator(rng, producer, request, 4, code_of)
        if code is not ErrorCode.NONE:
            self._note(f"{producer.transactional_id}: InitProducerId -> {code.name}")
            return False
        producer.producer_id, producer.epoch = answer[-1].producer_id, answer[-1].producer_epoch
        producer.sequences.clear()
        self._note(f"{producer.transactional_id}: producer id {producer.producer_id} epoch "
                   f"{producer.epoch}")
        return True

    async def _ask_coordinator(self, rng: random.Random, producer: TransactionalProducer,
                               request: Any, version: int,
                               code_of: Callable[[Any], ErrorCode]) -> ErrorCode:
        """A request to the transactional id's coordinator, found (again) with FindCoordinator
        when needed, retried on what Kafka's producer retries, for up to a minute."""
        world = self.world
        deadline = self.loop.time() + 60.0
        code = ErrorCode.REQUEST_TIMED_OUT
        while self.loop.time() < deadline:
            coordinator = world.nodes.get(producer.coordinator)
            if coordinator is None or not coordinator.alive:
                producer.coordinator = await self._find_coordinator(rng, producer)
                coordinator = world.nodes.get(producer.coordinator)
            if coordinator is not None:
                try:
                    response = await serve(world, "client", coordinator, request, version,
                                           producer.transactional_id)
                except ConnectionError:
                    code = ErrorCode.REQUEST_TIMED_OUT
                else:
                    code = code_of(response)
                    if code not in COORDINATOR_RETRIABLE:
                        return code
                    if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                        producer.coordinator = -1
            await asyncio.sleep(rng.uniform(0.1, 1.0))
        return code

    async def _find_coordinator(self, rng: random.Random, producer: TransactionalProducer
                                ) -> int:
        world = self.world
        live = world.live_nodes()
        if not live:
            return -1
        node = rng.choice(live)
        try:
            response = await serve(world, "client", node, FindCoordinatorRequest(
                key=producer.transactional_id, key_type=1), 3, producer.transactional_id)
        except ConnectionError:
            return -1
        return int(response.node_id) if response.error_code == 0 else -1

    def _resume(self, node: Node, incarnation: int) -> None:
        if node.paused and node.incarnation == incarnation:
            self._note(f"{node.name}: resumed (SIGCONT)")
            node.resume()

    async def _start(self, node: Node) -> None:
        try:
            await node.start()
        except Exception as error:
            self.world.failures.append(f"{node.name} did not start: {error!r}")

    async def _client(self, operation: Any, node: Node, what: str) -> None:
        try:
            code = await operation
        except Exception as error:  # a request that crashed its handler gets no answer
            self.world.failures.append(f"{node.name}: {what} raised {error!r}")
            return
        self._note(f"{node.name}: {what} -> {code}")

    def _heal(self, cut: frozenset[str]) -> None:
        if cut not in self.world.network.cut:
            return
        self._note(f"healed {' - '.join(sorted(cut))}")
        self.world.network.cut.discard(cut)
        for node in self.world.nodes.values():
            if node.name in cut and node.store is not None and node.alive:
                node.store.reconnected()

    async def _heal_all(self) -> None:
        self.world.network.drop_rate = 0.0
        for node in self.world.nodes.values():
            if node.paused:
                self._resume(node, node.incarnation)
        for cut in sorted(self.world.network.cut, key=sorted):
            self._heal(cut)
        for node in self.world.nodes.values():
            if not node.alive and not node.start_requested:
                self._note(f"{node.name}: restarted (healing)")
                await node.start()


def _scratch() -> str | None:
    """Memory-backed scratch space when there is some: thousands of runs write logs."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None
