"""The topics this broker knows and the partition replicas it hosts (Kafka's ReplicaManager
and its metadata cache).

Owns: the name -> ``Topic`` map (every topic of the cluster, with the metadata store's view of
each partition's ``PartitionState``), the opening and closing of the replicas assigned to
this broker, topic creation, deletion and partition growth. The durable truth lives in the
metadata store (``controller``): changes are written there first (awaited off the event
loop, through ``StoreCalls``), then applied here with ``apply_topic`` /
``apply_partition_state``, the same path a change made by another broker takes.

Metadata only moves forward. Every read from the store carries versions (``created_version``
of a topic, ``(created_version, version)`` of a partition state, the version of a topic
listing), and what is applied here is never older than what is here already: a read made
before a topic was created cannot make this broker forget it (``apply_listing`` drops a topic
only when the listing is newer than the topic's creation), and a read made before a topic
was deleted cannot bring it back (a deleted topic's incarnation is remembered). A topic's
files are deleted only when the store has said it is deleted.

Replica assignment for new topics follows Kafka's rack-unaware ``assignReplicasToBrokers``:
partition p's first replica is broker ``(start + p) % n`` of the sorted live brokers, and
its followers follow at a shift that grows every n partitions, so leaders and followers
spread evenly; explicit assignments (CreateTopics ``assignments``) are taken as given.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import shutil
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from ..config import BrokerConfig, ConfigError, validate_topic_configs
from ..controller.store import (MetadataStore, PartitionState, StoreCalls, StoreUnavailable,
                                TopicExists, TopicGrew, TopicListing, TopicRecord,
                                new_topic_id)
from ..protocol.errors import ErrorCode, KafkaError
from ..storage import Log, files
from ..storage.cleaner import LogCleaner
from .flusher import Flusher
from .partition import LeadershipLease, Partition, TopicSettings

log = logging.getLogger(__name__)

# CreatePartitions planned again after another request grew the topic first
_GROW_ATTEMPTS = 5

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249


def check_topic_name(name: str | None) -> None:
    """Kafka's rules for topic names (Topic.validate)."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is not allowed")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name is {len(name)} characters; the limit is 249")
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name {name!r} has characters other than ASCII letters, digits, "
                         "'.', '_' and '-'")


@dataclass
class Topic:
    record: TopicRecord
    # the replicas hosted here, by partition index (every partition on a single broker)
    local: dict[int, Partition] = field(default_factory=dict)
    # the metadata store's state of every partition, hosted here or not
    states: list[PartitionState] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")

    @property
    def partition_count(self) -> int:
        return self.record.partitions

    @property
    def partitions(self) -> list[Partition]:
        """The local replicas, in partition order."""
        return [self.local[i] for i in sorted(self.local)]


def assign_replicas(partitions: int, replication_factor: int, brokers: list[int],
                    first_partition: int = 0, start: int = 0) -> list[list[int]]:
    """Kafka's rack-unaware replica assignment (``AdminUtils.assignReplicasToBrokers``)."""
    brokers = sorted(brokers)
    count = len(brokers)
    if replication_factor > count:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"replication factor {replication_factor} is larger than the {count} "
                         f"live broker{'s' if count != 1 else ''} {brokers}")
    assignment, shift = [], start % count
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % count == 0:
            shift += 1
        first = (p + start) % count
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (count - 1)) % count])
        assignment.append(replicas)
    return assignment


class PartitionManager:
    def __init__(self, config: BrokerConfig, store: MetadataStore,
                 clock: Callable[[], int], node_id: int = 1,
                 lease: LeadershipLease | None = None, calls: StoreCalls | None = None) -> None:
        self.config = config
        self.store = store
        # how store calls are made from the event loop: on threads, awaited
        self.calls = calls or StoreCalls()
        self.clock = clock
        self.node_id = node_id
        self.lease = lease
        # cluster mode: called with (partition, proposed state) when a leader proposes an ISR
        # change while serving a follower's fetch
        self.isr_listener: Callable[[Partition, PartitionState], None] | None = None
        # the group-commit flusher (the broker sets it): under log.flush.policy=ack each
        # partition's high watermark waits for it
        self.flusher: Flusher | None = None
        # the brokers new replicas may be placed on (the broker sets it: live brokers)
        self.live_broker_ids: Callable[[], list[int]] = lambda: [self.node_id]
        # one directory's partition.metadata written by one thread at a time (the loop
        # opening a replica, or a thread preparing it): they share its temporary file
        self._claiming = threading.Lock()
        # runs disk work off the event loop (a thread; inline in the simulation)
        self.run_blocking: Callable[..., Awaitable[object]] = asyncio.to_thread
        # a new topic's id (a random UUID; the simulation draws them from its seed)
        self.new_topic_id: Callable[[], str] = new_topic_id
        self.topics: dict[str, Topic] = {}
        # name -> created_version of the last incarnation deleted: no read that old brings
        # it back
        self._deleted: dict[str, int] = {}
        self.cleaner = LogCleaner()

    def load(self) -> None:
        """A single broker's start: every topic in the (local) store."""
        for record in self.store.load_topics().values():
            self._add_topic(record, _known_states(
                record, self.store.partition_states(record.name, record.partitions)))
        if self.topics:
            log.info("loaded %d topics, %d local partitions", len(self.topics),
                     sum(len(t.local) for t in self.topics.values()))

    def _add_topic(self, record: TopicRecord, states: list[PartitionState]) -> Topic:
        topic = Topic(record)
        self.topics[record.name] = topic
        self._grow(topic, states)
        return topic

    def _grow(self, topic: Topic, states: list[PartitionState]) -> None:
        """Open the local replicas of partitions ``len(topic.states)`` onwards."""
        settings = self.topic_settings(topic.record)
        for index in range(len(topic.states), topic.record.partitions):
            state = states[index]
            topic.states.append(state)
            replicas = topic.record.replicas(index)
            if self.node_id in replicas:
                partition = self._open_partition(topic.name, index, settings, replicas,
                                                 topic.record.topic_id)
                if state.version >= 0:
                    partition.apply_state(state, replicas)
                topic.local[index] = partition

    def effective_topic_configs(self, record: TopicRecord) -> dict[str, str]:
        configs = self.config.topic_defaults()
        configs.update(record.configs)
        return configs

    def topic_settings(self, record: TopicRecord) -> TopicSettings:
        return TopicSettings.from_configs(self.effective_topic_configs(record))

    def _open_partition(self, topic: str, index: int, settings: TopicSettings,
                        replicas: tuple[int, ...], topic_id: str) -> Partition:
        directory = self.config.data_dir / f"{topic}-{index}"
        with self._claiming:
            _claim_directory(directory, topic_id)
        log_config = replace(settings.log_config,
                             cache_retain_bytes=self.config["log.cache.retain.bytes"])
        partition_log = Log.open(directory, log_config, self.clock)
        partition = Partition(topic, index, partition_log, settings, self.clock,
                              replica_id=self.node_id, replicas=replicas, lease=self.lease)
        partition.topic_id = topic_id
        partition.isr_listener = self.isr_listener
        partition.leader_cache_retain_bytes = self.config["log.cache.retain.bytes"]
        partition.follower_cache_retain_bytes = self.config["replica.cache.retain.bytes"]
        if self.flusher is not None and self.config["log.flush.policy"] == "ack":
            partition.flush_requester = self.flusher.request
        return partition

    # -- lookups ---------------------------------------------------------------------------

    def get_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return topic

    def get_partition(self, topic_name: str, index: int) -> Partition:
        """The local replica; NOT_LEADER_OR_FOLLOWER for a partition hosted elsewhere."""
        topic = self.get_topic(topic_name)
        if not 0 <= index < topic.partition_count:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {topic_name!r} has no partition {index}")
        partition = topic.local.get(index)
        if partition is None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"{topic_name}-{index} has no replica on broker {self.node_id}")
        return partition

    def all_partitions(self) -> Iterator[Partition]:
        for topic in self.topics.values():
            yield from topic.partitions

    # -- changes ---------------------------------------------------------------------------

    async def create_topic(self, name: str, num_partitions: int = -1,
                           replication_factor: int = -1, configs: dict[str, str] | None = None,
                           validate_only: bool = False,
                           assignment: list[list[int]] | None = None,
                           live_brokers: list[int] | None = None,
                           timeout_s: float | None = None) -> Topic | None:
        """Create a topic in the store, then host its local replicas. ``live_brokers``
        (default: this one) are what replicas are assigned over. The store is waited on off
        the event loop, at most ``timeout_s`` (REQUEST_TIMED_OUT after it; the topic may
        still be created, as with Kafka)."""
        check_topic_name(name)
        if name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        brokers = sorted(live_brokers or self.live_broker_ids())
        if assignment:
            num_partitions = len(assignment)
            self._check_assignment(name, assignment, brokers)
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"number of partitions must be positive, got {num_partitions}")
        self._check_partition_limit(name, num_partitions)
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if replication_factor <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"replication factor must be positive, got {replication_factor}")
        if not assignment:
            assignment = assign_replicas(num_partitions, replication_factor, brokers,
                                         start=self._assignment_start(name, brokers))
        try:
            configs = validate_topic_configs(configs or {})
        except ConfigError as error:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(error)) from None
        if validate_only:
            return None
        record = TopicRecord(name, self.new_topic_id(), num_partitions, configs, assignment)
        states = [PartitionState(replicas[0], 0, tuple(replicas)) for replicas in assignment]
        try:
            record, states = await self._store(timeout_s, self.store.create_topic, record,
                                               states)
        except TopicExists:
            await self._catch_up(name)  # another broker's topic: know it now
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"topic {name!r} already exists") from None
        await self.run_blocking(self.prepare_directories, record)
        self.apply_topic(record, states)
        topic = self.topics.get(name)
        if topic is None or topic.record.topic_id != record.topic_id:
            # deleted (and maybe created again) by another broker while we waited
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {name!r} was deleted as it was created")
        log.info("created topic %s with %d partitions%s%s", name, num_partitions,
                 f", replicas {assignment}" if replication_factor > 1 or len(brokers) > 1 else "",
                 f" and configs {configs}" if configs else "")
        return topic

    def _assignment_start(self, name: str, brokers: list[int]) -> int:
        # Kafka starts at a random broker; a hash of the name spreads topics just as well
        # and keeps assignments reproducible in tests.
        return sum(name.encode()) % len(brokers) if len(brokers) > 1 else 0

    @staticmethod
    def _check_assignment(name: str, assignment: list[list[int]], brokers: list[int]) -> None:
        for index, replicas in enumerate(assignment):
            if not replicas or len(set(replicas)) != len(replicas):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"topic {name!r} partition {index}: replicas {replicas} must be "
                                 "distinct and non-empty")
            unknown = [r for r in replicas if r not in brokers]
            if unknown:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"topic {name!r} partition {index}: brokers {unknown} are not "
                                 f"live (live: {brokers})")
        if len({len(r) for r in assignment}) != 1:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"topic {name!r}: every partition needs the same number of replicas")

    def _check_partition_limit(self, name: str, count: int) -> None:
        """A fuzzed or mistyped count (CreateTopics with 500,000 partitions) must not stall
        the broker while it opens that many logs on the event loop."""
        limit = self.config["max.partitions.per.topic"]
        if count > limit:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"topic {name!r}: {count} partitions exceeds "
                             f"max.partitions.per.topic={limit}")

    async def _store(self, timeout_s: float | None, function: Callable[..., _T], *args: object
                     ) -> _T:
        """A store call made for a request: REQUEST_TIMED_OUT when the store does not answer
        in time (``StoreTimedOut``) or cannot be reached (``StoreUnavailable``); at once
        NOT_CONTROLLER, which admin clients retry at the controller another broker names,
        while this broker's lease has lapsed (cut off from the store: the call would wait
        out its timeout)."""
        if self.lease is not None and self.lease.lapsed():
            raise KafkaError(ErrorCode.NOT_CONTROLLER,
                             f"broker {self.node_id} is cut off from the metadata store; "
                             "ask another broker")
        try:
            if timeout_s is None:
                return await self.calls(function, *args)
            return await self.calls.within(timeout_s, function, *args)
        except StoreUnavailable as error:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, str(error)) from None

    async def _catch_up(self, name: str) -> None:
        """Read one topic from the store and apply it (a request named a topic this broker
        has not heard of yet, or one it was about to create, or one whose growth it missed)."""
        try:
            record, states = await self.calls(self._read_topic, name)
        except StoreUnavailable:
            return
        if record is not None:
            self.apply_topic(record, states)

    def _read_topic(self, name: str) -> tuple[TopicRecord | None, list[PartitionState | None]]:
        record = self.store.read_topic(name)
        if record is None:
            return None, []
        self.prepare_directories(record)  # in the same thread
        return record, self.store.partition_states(name, record.partitions)

    def prepare_directories(self, record: TopicRecord) -> None:
        """Off the event loop (a thread, as the store is read), before a topic's new local
        replicas are opened on it: make each one's directory that does not exist yet, with
        its ``partition.metadata`` fsynced, so opening it (``_claim_directory``) only reads
        that file. Two fsyncs per partition on the loop held every client of the broker up:
        a topic of fifty partitions took 1.3 s of the loop on this machine, and seconds when
        the disk was busy. A directory that exists is left to the loop (it may be an older
        incarnation's, in use). A topic dropped before it is opened leaves its empty
        directories behind."""
        for index, replicas in enumerate(record.assignment[:record.partitions]):
            if self.node_id not in replicas:
                continue
            directory = self.config.data_dir / f"{record.name}-{index}"
            if directory.exists():
                continue
            with self._claiming:
                if directory.exists():
                    continue
                try:
                    directory.mkdir(parents=True)
                    files.replace(directory / PARTITION_METADATA,
                                  _partition_metadata(record.topic_id), fsync=True,
                                  sync_directory=True)
                except OSError as error:  # opening it on the loop tries again, says why
                    log.warning("cannot prepare %s: %s", directory, error)

    async def partition_gone(self, name: str, index: int) -> bool:
        """Whether the store says partition ``index`` of ``name`` does not exist: no such
        topic, or one too small to have it. Asked of the store, not of this broker's view,
        which may not have heard of a newer incarnation yet (what it reads is applied);
        False when the store cannot be reached."""
        try:
            record, states = await self.calls(self._read_topic, name)
        except StoreUnavailable:
            return False
        if record is None:
            return True
        self.apply_topic(record, states)
        return not 0 <= index < record.partitions

    async def known_topic(self, name: str) -> Topic:
        """The topic, asking the store for it if this broker has not heard of it yet;
        UNKNOWN_TOPIC_OR_PARTITION if the store has not either."""
        if name not in self.topics:
            await self._catch_up(name)
        return self.get_topic(name)

    async def delete_topic(self, name: str, timeout_s: float | None = None) -> Topic:
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        topic = await self.known_topic(name)
        await self._store(timeout_s, self.store.delete_topic, name)
        self.forget_topic(name, topic.record.created_version)
        return topic

    def forget_topic(self, name: str, created_version: int) -> None:
        """Drop a topic the store deleted (the incarnation created at ``created_version``
        or any older one), and its local replicas' files. Reads at least that old are stale
        from now on."""
        self._deleted[name] = max(self._deleted.get(name, -1), created_version)
        topic = self.topics.get(name)
        if topic is None or topic.record.created_version > created_version:
            return
        del self.topics[name]
        for partition in topic.partitions:
            partition.delete()
        log.info("deleted topic %s", name)

    async def create_partitions(self, name: str, count: int, validate_only: bool = False,
                                live_brokers: list[int] | None = None,
                                assignment: list[list[int]] | None = None,
                                timeout_s: float | None = None) -> None:
        """Grow ``name`` to ``count`` partitions. When another request (on this broker or
        another) grew the topic between our read and our write, the store refuses the
        write (``TopicGrew``): the topic is read again and the request planned again - so
        it ends as INVALID_PARTITIONS when the topic has ``count`` partitions or more by
        then, as it would have had it come second."""
        for _attempt in range(_GROW_ATTEMPTS):
            try:
                await self._create_partitions(name, count, validate_only, live_brokers,
                                              assignment, timeout_s)
                return
            except TopicGrew as grew:
                log.info("topic %s grew to %d partitions while a request grew it to %d; "
                         "planning again", name, grew.partitions, count)
                await self._catch_up(name)
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                         f"topic {name!r} kept growing while this request grew it")

    async def _create_partitions(self, name: str, count: int, validate_only: bool,
                                 live_brokers: list[int] | None,
                                 assignment: list[list[int]] | None,
                                 timeout_s: float | None) -> None:
        topic = await self.known_topic(name)
        current = topic.partition_count
        if count <= current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"topic {name!r} has {current} partitions; the new count {count} "
                             "must be larger")
        self._check_partition_limit(name, count)
        brokers = sorted(live_brokers or self.live_broker_ids())
        replication_factor = len(topic.record.replicas(0)) or 1
        if assignment:
            if len(assignment) != count - current:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"topic {name!r}: {len(assignment)} assignments for "
                                 f"{count - current} new partitions")
            self._check_assignment(name, assignment, brokers)
            if len(assignment[0]) != replication_factor:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"topic {name!r} has {replication_factor} replicas per "
                                 f"partition; the new ones were given {len(assignment[0])}")
            added = assignment
        else:
            added = assign_replicas(count - current, replication_factor, brokers,
                                    first_partition=current,
                                    start=self._assignment_start(name, brokers))
        if validate_only:
            return
        grown = replace(topic.record, partitions=count,
                        assignment=[*topic.record.assignment, *added])
        new_states = [PartitionState(replicas[0], 0, tuple(replicas)) for replicas in added]
        try:
            new_states = await self._store(timeout_s, self.store.add_partitions, grown,
                                           new_states)
        except KeyError:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {name!r} was deleted meanwhile") from None
        await self.run_blocking(self.prepare_directories, grown)
        self.apply_topic(grown, [*topic.states, *new_states])
        log.info("topic %s grew from %d to %d partitions", name, current, count)

    # -- applying the store's metadata, only forward ------------------------------------------

    def apply_listing(self, listing: TopicListing) -> list[str]:
        """Take a listing of every topic: forget the topics it proves deleted (missing from
        a listing newer than their creation), and return the names it has that this broker
        has not heard of."""
        for name, topic in list(self.topics.items()):
            if name not in listing.names and listing.version > topic.record.created_version:
                self.forget_topic(name, topic.record.created_version)
        return sorted(listing.names - self.topics.keys())

    def apply_topic(self, record: TopicRecord, states: Sequence[PartitionState | None]
                    ) -> list[Partition]:
        """Take a topic read from the store with its partitions' states (all of them, or
        None where a state was missing): open what is new, apply what is newer, ignore what
        is older. Returns the local replicas that are new or whose leader or epoch changed."""
        if record.created_version <= self._deleted.get(record.name, -1):
            return []  # read before its deletion
        topic = self.topics.get(record.name)
        if topic is not None and topic.record.created_version > record.created_version:
            return []  # read before the incarnation we know was created
        if topic is not None and topic.record.created_version < record.created_version:
            # deleted and created again since we last heard
            self.forget_topic(record.name, topic.record.created_version)
            topic = None
        known = _known_states(record, states)
        if topic is None:
            if len(known) < record.partitions:
                return []  # caught half-way through its creation; its watch brings the rest
            topic = self._add_topic(record, known)
            return list(topic.partitions)
        changed: list[Partition] = []
        if record.partitions > topic.partition_count and len(known) >= record.partitions:
            topic.record = record
            before = set(topic.local)
            self._grow(topic, known)
            changed.extend(topic.local[i] for i in sorted(set(topic.local) - before))
        for index, state in enumerate(known[:topic.partition_count]):
            if self.apply_partition_state(record.name, index, state):
                changed.append(topic.local[index])
        return changed

    def apply_partition_state(self, topic_name: str, index: int, state: PartitionState) -> bool:
        """Take a state read from the store, if it is newer than ours (and of the topic's
        incarnation we know): update the cache, and the local replica's role. Returns True
        when the local replica's leader or epoch changed."""
        topic = self.topics.get(topic_name)
        if topic is None or index >= len(topic.states):
            return False
        if (state.created_version < topic.record.created_version
                or state.order <= topic.states[index].order):
            return False
        topic.states[index] = state
        partition = topic.local.get(index)
        if partition is None:
            return False
        return partition.apply_state(state, topic.record.replicas(index))

    def run_log_maintenance(self) -> None:
        """Time-based rolls, retention (``cleanup.policy`` delete), compaction (compact) and
        producer-state upkeep; called periodically."""
        for topic in list(self.topics.values()):
            configs = self.effective_topic_configs(topic.record)
            policies = set(configs["cleanup.policy"].split(","))
            for partition in list(topic.partitions):
                self._maintain_partition(partition, policies, configs)

    def _maintain_partition(self, partition: Partition, policies: set[str],
                            configs: dict[str, str]) -> None:
        partition.log.roll_if_due()
        if "compact" in policies and self.config["log.cleaner.enable"]:
            try:
                # Up to the LSO only: open transactions and unreplicated records stay.
                self.cleaner.maybe_clean(partition.log, self.clock(),
                                         int(configs["delete.retention.ms"]),
                                         partition.last_stable_offset)
            except (OSError, KafkaError) as error:  # the log stays as it was; retry next time
                log.error("%s: compaction failed: %s", partition, error)
        if "delete" in policies:
            deleted = partition.apply_retention()
            if deleted:
                log.info("retention deleted %d segments of %s; log start offset is now %d",
                         deleted, partition, partition.log_start_offset)
        self._maintain_producer_state(partition)

    def _maintain_producer_state(self, partition: Partition) -> None:
        """Expire idle producers (``producer.id.expiration.ms``) and snapshot what changed,
        so a restart replays only the batches written since."""
        expired = partition.producer_state.expire(self.clock(),
                                                  self.config["producer.id.expiration.ms"])
        if expired:
            log.info("%s: %d idle producer ids expired", partition, expired)
        partition.take_producer_snapshot()
        partition.checkpoint_high_watermark()

    def close(self) -> None:
        for partition in self.all_partitions():
            partition.close()


_T = TypeVar("_T")
NO_STATE = PartitionState(-1, -1, (), version=-1)
PARTITION_METADATA = "partition.metadata"


def kafka_topic_id(topic_id: str) -> str:
    """A topic id as Kafka writes it: the UUID's 16 bytes in base64url, unpadded."""
    try:
        raw = uuid.UUID(topic_id).bytes
    except ValueError:
        return topic_id
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _claim_directory(directory: Path, topic_id: str) -> None:
    """Kafka's ``partition.metadata`` (KIP-516): the id of the topic a replica's directory
    belongs to. A directory left by an older incarnation of the topic - deleted and created
    again while this broker was down or cut off - is deleted, not taken for this one's: its
    records would otherwise be served, and fetched, as the new topic's (found by the
    simulation: an in-sync replica whose log differed from its leader's)."""
    path = directory / PARTITION_METADATA
    expected = kafka_topic_id(topic_id)
    found = None
    if path.exists():
        for line in path.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "topic_id":
                found = value.strip()
    if found == expected:
        return
    if found is not None:
        log.warning("%s holds a replica of an older incarnation of the topic (topic id %s, "
                    "now %s); deleting it", directory, found, expected)
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    files.replace(path, _partition_metadata(topic_id), fsync=True, sync_directory=True)


def _partition_metadata(topic_id: str) -> str:
    return f"version: 0\ntopic_id: {kafka_topic_id(topic_id)}\n"


def _known_states(record: TopicRecord, states: Sequence[PartitionState | None]
                  ) -> list[PartitionState]:
    """The states of a topic's partitions as far as all were read; a missing one (its znode
    not created yet, or deleted) is a placeholder older than any stored state."""
    return [state or NO_STATE for state in states[:record.partitions]]
