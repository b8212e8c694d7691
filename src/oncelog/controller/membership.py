"""A broker's membership of a cluster: what it does in cluster mode besides serving requests.

``ClusterMembership.run()`` owns, in one TaskGroup:

- **the metadata sync**: the store's watches mark the view dirty; the sync re-reads topics,
  partition states, live brokers and the controller (in a thread) and applies them on the
  event loop (``PartitionManager.sync``): local replicas become leaders or followers, new
  topics are opened, deleted ones dropped. Then follower fetchers are started or stopped
  (one per leader broker), and the group coordinator loads the ``__consumer_offsets``
  partitions this broker now leads and unloads the ones it lost;
- **ISR changes**: a leader's proposals (a follower caught up; followers lagging for
  ``replica.lag.time.max.ms``, checked on a timer) are written by compare-and-set; the
  partition stays ``Pending*`` until the answer, and a lost race re-reads the state;
- **the leadership lease** (``partition.LeadershipLease``): renewed each time the store
  confirms our session (every fifth of the session timeout), revoked when the session is
  lost, so a paused or partitioned broker stops acting as leader before anyone replaces it;
- **the controller role**: whoever holds it runs ``Controller.elect_all`` whenever brokers
  come or go, and every few seconds;
- **controlled shutdown** (``controlled_shutdown``, called on SIGTERM before the listener
  closes): fetchers stop, leadership moves to other in-sync replicas, and the broker waits
  briefly until its local replicas know it (so clients are redirected at once).

Store calls block, so they run in threads; everything that changes broker state runs on the
event loop, in plain methods (no ``await`` half-way through a change).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..partition import Partition
from ..replication.fetcher import ReplicaFetcher
from .controller import Controller
from .store import (BrokerRegistration, MetadataChange, MetadataStore, NodeIdInUse,
                    PartitionState, StoreUnavailable, TopicRecord)

if TYPE_CHECKING:
    from ..broker.broker import Broker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
CONTROLLER_PASS_INTERVAL_S = 5.0
HIGH_WATERMARK_CHECKPOINT_INTERVAL_S = 5.0
# How late the ISR check may wake before this broker counts it as having been stopped
# (a busy event loop is late by milliseconds; SIGSTOP or a swapped-out process by seconds).
STALL_TOLERANCE_S = 0.2

# What read_snapshot read: topics, their partitions' states, live brokers, the controller
Snapshot = tuple[dict[str, TopicRecord], dict[str, list[PartitionState | None]],
                 dict[int, BrokerRegistration], int]


class ClusterMembership:
    def __init__(self, broker: Broker, store: MetadataStore) -> None:
        self.broker = broker
        self.store = store
        self.config = broker.config
        self.node_id = broker.node_id
        self.partitions = broker.partitions
        assert broker.lease is not None, "a broker in a cluster holds a leadership lease"
        self.lease = broker.lease
        self.controller = Controller(store, self.node_id, self._unclean_for)
        self.fetchers: dict[int, tuple[ReplicaFetcher, asyncio.Task[None]]] = {}
        self._metadata_dirty = asyncio.Event()
        self._controller_dirty = asyncio.Event()
        self._session_lost = False
        self._tasks: asyncio.TaskGroup | None = None
        self._stopping = False
        self.partitions.isr_listener = self._on_isr_proposal

    # -- start-up (before the listener opens) ------------------------------------------

    def register(self) -> None:
        """Blocking: register this broker (NodeIdInUse if another live broker has our id)."""
        self.store.register_broker(BrokerRegistration(
            self.node_id, self.broker.advertised_host, self.broker.advertised_port))
        self.lease.renew(time.monotonic())

    def apply_snapshot(self, snapshot: Snapshot) -> None:
        """On the event loop: take a view read by ``read_snapshot`` (in a thread)."""
        self._apply(*snapshot)

    # -- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()

        def on_change(change: MetadataChange) -> None:  # called on the store's thread
            loop.call_soon_threadsafe(self._on_change, change)
        self.store.watch(on_change)
        async with asyncio.TaskGroup() as tasks:
            self._tasks = tasks
            tasks.create_task(self._sync_loop())
            tasks.create_task(self._controller_loop())
            tasks.create_task(self._isr_shrink_loop())
            tasks.create_task(self._lease_loop())
            tasks.create_task(self._checkpoint_loop())
            self._metadata_dirty.set()
            self._controller_dirty.set()

    def _on_change(self, change: MetadataChange) -> None:
        if change is MetadataChange.SESSION_LOST:
            log.warning("broker %d: ZooKeeper session lost; acting as leader of nothing until "
                        "it is back", self.node_id)
            self._session_lost = True
            self.lease.revoke()
        elif change is MetadataChange.SESSION_RESTORED:
            log.info("broker %d: ZooKeeper session restored; registering again", self.node_id)
        self._metadata_dirty.set()
        if change in (MetadataChange.BROKERS, MetadataChange.CONTROLLER,
                      MetadataChange.SESSION_RESTORED, MetadataChange.TOPICS):
            self._controller_dirty.set()

    async def _sync_loop(self) -> None:
        while True:
            await self._metadata_dirty.wait()
            self._metadata_dirty.clear()
            try:
                if self._session_lost:
                    await asyncio.to_thread(self._register_again)
                snapshot = await asyncio.to_thread(self.read_snapshot)
            except (StoreUnavailable, NodeIdInUse) as error:
                log.warning("broker %d: cannot read the cluster's metadata: %s; retrying",
                            self.node_id, error)
                await asyncio.sleep(1)
                self._metadata_dirty.set()
                continue
            self._apply(*snapshot)

    def _register_again(self) -> None:
        self.register()
        self._session_lost = False

    def read_snapshot(self) -> Snapshot:
        topics = self.store.load_topics()
        states = {name: self.store.partition_states(name, record.partitions)
                  for name, record in topics.items()}
        return topics, states, self.store.live_brokers(), self.store.controller_id()

    def _apply(self, topics: dict[str, TopicRecord],
               states: dict[str, list[PartitionState | None]],
               live_brokers: dict[int, BrokerRegistration], controller_id: int) -> None:
        self.broker.brokers.update(live_brokers)
        self.broker.controller_id = controller_id
        changed = self.partitions.sync(topics, states)
        self._reconcile_fetchers(changed)
        self._reconcile_group_coordinator()

    # -- follower fetchers -----------------------------------------------------------------

    def _reconcile_fetchers(self, changed: list[Partition]) -> None:
        if self._stopping or self._tasks is None:
            return
        leaders = {p.leader_id for p in self.partitions.all_partitions()
                   if not p.is_leader and p.leader_id >= 0}
        for leader_id, (fetcher, task) in list(self.fetchers.items()):
            registration = self.broker.live_brokers.get(leader_id)
            if (leader_id not in leaders or registration is None
                    or fetcher.address != (registration.host, registration.port)):
                task.cancel()
                del self.fetchers[leader_id]
        for leader_id in leaders:
            registration = self.broker.live_brokers.get(leader_id)
            if leader_id in self.fetchers or registration is None:
                continue
            fetcher = ReplicaFetcher(self.node_id, leader_id, registration.host,
                                     registration.port, self.partitions.all_partitions,
                                     self.config)
            self.fetchers[leader_id] = (fetcher, self._tasks.create_task(fetcher.run()))
        for fetcher, _ in self.fetchers.values():
            fetcher.wake.set()

    def stop_fetchers(self) -> None:
        for _, task in self.fetchers.values():
            task.cancel()
        self.fetchers.clear()

    # -- the group coordinator follows __consumer_offsets leadership -------------------------

    def _reconcile_group_coordinator(self) -> None:
        coordinator = self.broker.group_coordinator
        topic = self.partitions.topics.get(OFFSETS_TOPIC)
        if topic is not None and not coordinator.manager.partition_count:
            coordinator.manager.partition_count = topic.partition_count
        self._follow_leadership(OFFSETS_TOPIC, "group", coordinator.manager.owned_partitions,
                                coordinator.load_partition, coordinator.unload_partition)
        transactions = self.broker.transaction_coordinator
        self._follow_leadership(TRANSACTION_STATE_TOPIC, "transaction",
                                transactions.owned_partitions, transactions.load_partition,
                                transactions.unload_partition)

    def _follow_leadership(self, name: str, kind: str, owned: set[int],
                           load: Callable[[int], None], unload: Callable[[int], None]) -> None:
        """A coordinator loads the partitions of its topic this broker leads, and unloads
        the ones it stopped leading."""
        topic = self.partitions.topics.get(name)
        if topic is None:
            return
        for index, partition in topic.local.items():
            if partition.is_leader and index not in owned:
                load(index)
                log.info("broker %d: now %s coordinator for %s-%d", self.node_id, kind, name,
                         index)
            elif not partition.is_leader and index in owned:
                unload(index)
                log.info("broker %d: no longer %s coordinator for %s-%d", self.node_id, kind,
                         name, index)

    # -- ISR changes -----------------------------------------------------------------------

    def _on_isr_proposal(self, partition: Partition, proposed: PartitionState) -> None:
        if self._tasks is not None:
            self._tasks.create_task(self._write_isr(partition, proposed))

    async def _write_isr(self, partition: Partition, proposed: PartitionState) -> None:
        try:
            stored = await asyncio.to_thread(self.store.compare_and_set_partition_state,
                                             partition.topic, partition.index, proposed)
        except StoreUnavailable as error:
            log.warning("%s: ISR change not written: %s", partition, error)
            stored = None
        partition.complete_isr_change(stored)
        if stored is None:
            self._metadata_dirty.set()  # someone wrote first: take their state
        else:
            self.partitions.apply_partition_state(partition.topic, partition.index, stored)
            log.info("%s: ISR is now %s", partition, list(stored.isr))

    async def _isr_shrink_loop(self) -> None:
        """Every half lag, the followers that fell behind leave the ISR. A wake-up later than
        planned by more than ``STALL_TOLERANCE_S`` means this broker itself stopped running
        (SIGSTOP, a stall): that time is excused to the followers, who could not fetch."""
        lag_ms = self.config["replica.lag.time.max.ms"]
        interval_s = max(lag_ms / 2000, 0.05)
        last = time.monotonic()
        while True:
            await asyncio.sleep(interval_s)
            now = time.monotonic()
            late_s = now - last - interval_s
            last = now
            stalled_ms = int(late_s * 1000) if late_s > STALL_TOLERANCE_S else 0
            if stalled_ms:
                log.info("broker %d did not run for %d ms; not counted as its followers' lag",
                         self.node_id, stalled_ms)
            for partition in list(self.partitions.all_partitions()):
                proposed = partition.maybe_shrink_isr(lag_ms, stalled_ms)
                if proposed is not None:
                    self._on_isr_proposal(partition, proposed)

    async def _checkpoint_loop(self) -> None:
        """Every replica's HW on disk every few seconds (Kafka's
        ``replica.high.watermark.checkpoint.interval.ms``, 5 s): after kill -9 a broker
        restarts near the HW it had, not at its log start."""
        while True:
            await asyncio.sleep(HIGH_WATERMARK_CHECKPOINT_INTERVAL_S)
            for partition in list(self.partitions.all_partitions()):
                try:
                    partition.checkpoint_high_watermark()
                except OSError as error:
                    log.error("%s: cannot checkpoint the high watermark: %s", partition, error)

    # -- the lease -------------------------------------------------------------------------

    async def _lease_loop(self) -> None:
        interval_s = self.lease.duration_s / 5
        while True:
            asked_at = time.monotonic()
            try:
                confirmed = await asyncio.wait_for(
                    asyncio.to_thread(self.store.confirm_session), interval_s * 2)
            except (TimeoutError, StoreUnavailable):
                confirmed = False
            if confirmed:
                self.lease.renew(asked_at)
            elif not self._session_lost:
                self._metadata_dirty.set()
            await asyncio.sleep(interval_s)

    # -- the controller role ---------------------------------------------------------------

    async def _controller_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._controller_dirty.wait(), CONTROLLER_PASS_INTERVAL_S)
            except TimeoutError:
                pass
            self._controller_dirty.clear()
            if self._stopping:
                continue
            try:
                if await asyncio.to_thread(self.store.try_become_controller, self.node_id):
                    if self.broker.controller_id != self.node_id:
                        log.info("broker %d is the controller", self.node_id)
                        self.broker.controller_id = self.node_id
                    await asyncio.to_thread(self.controller.elect_all)
            except StoreUnavailable as error:
                log.warning("broker %d: controller pass failed: %s", self.node_id, error)

    def _unclean_for(self, record: TopicRecord) -> bool:
        configs = self.partitions.effective_topic_configs(record)
        return configs["unclean.leader.election.enable"].strip().lower() == "true"

    # -- controlled shutdown ---------------------------------------------------------------

    async def controlled_shutdown(self, timeout_s: float = 5.0) -> None:
        """Move leadership away before stopping, so producers see a short gap, not a
        session timeout's worth of errors."""
        self._stopping = True
        self.stop_fetchers()
        try:
            moved = await asyncio.wait_for(
                asyncio.to_thread(self.controller.move_leadership_away), timeout_s)
        except (TimeoutError, StoreUnavailable) as error:
            log.warning("broker %d: controlled shutdown could not move leadership: %s",
                        self.node_id, error or "timed out")
            return
        log.info("broker %d: controlled shutdown moved %d partition states", self.node_id,
                 moved)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            snapshot = await asyncio.to_thread(self.read_snapshot)
            self._apply(*snapshot)
            if not any(p.is_leader and len(p.isr) > 1
                       for p in self.partitions.all_partitions()):
                return
            await asyncio.sleep(0.05)
