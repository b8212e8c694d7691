"""A broker's membership of a cluster: what it does in cluster mode besides serving requests.

``ClusterMembership.run()`` owns, in one TaskGroup:

- **the metadata sync** (``metadata_sync``): each change the store reports is read (in a
  thread) and applied on the event loop, only forward: local replicas become leaders or
  followers, new topics are opened, deleted ones dropped. Then follower fetchers are started
  or stopped (one per leader broker), and ``on_applied`` (the broker's: the coordinators load
  the partitions of their topics this broker now leads and unload the ones it lost) runs;
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

Store calls block, so they run on ``StoreCalls``' threads; everything that changes broker
state runs on the event loop, in plain methods (no ``await`` half-way through a change). The
membership is given what it uses - the config, the store and its calls, the partition
manager, the lease, the live-broker view it keeps, this broker's registration - not the
broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..partition import LeadershipLease, Partition, PartitionManager
from ..net.connector import PLAINTEXT, Connector
from ..replication.fetcher import ReplicaFetcher
from ..controller.controller import Controller
from ..controller.live_brokers import LiveBrokers
from .metadata_sync import MetadataSync, Work
from ..controller.store import (BrokerRegistration, MetadataChange, MetadataEvent, MetadataStore,
                    PartitionState, StoreCalls, StoreUnavailable, TopicRecord)

if TYPE_CHECKING:
    from ..config import BrokerConfig

log = logging.getLogger(__name__)


class Fetcher(Protocol):
    """A follower's fetcher from one leader (``replication.ReplicaFetcher``)."""
    address: tuple[str, int]
    wake: asyncio.Event

    async def run(self) -> None: ...


FetcherFactory = Callable[[int, BrokerRegistration], Fetcher]
RunBlocking = Callable[..., Awaitable[Any]]

CONTROLLER_PASS_INTERVAL_S = 5.0
HIGH_WATERMARK_CHECKPOINT_INTERVAL_S = 5.0
# How late the ISR check may wake before this broker counts it as having been stopped
# (a busy event loop is late by milliseconds; SIGSTOP or a swapped-out process by seconds).
STALL_TOLERANCE_S = 0.2

class ClusterMembership:
    def __init__(self, config: BrokerConfig, store: MetadataStore, calls: StoreCalls,
                 partitions: PartitionManager, lease: LeadershipLease, brokers: LiveBrokers,
                 registration: Callable[[], BrokerRegistration],
                 on_applied: Callable[[], None] = lambda: None, *,
                 fetcher_factory: FetcherFactory | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 run_blocking: RunBlocking = asyncio.to_thread,
                 on_lease_lapsed: Callable[[], None] = lambda: None,
                 connector: Connector = PLAINTEXT) -> None:
        self.config = config
        self.store = store
        self.calls = calls
        self.node_id: int = config["node.id"]
        self.partitions = partitions
        self.lease = lease
        self.brokers = brokers
        # this broker's registration (its advertised port is known once it listens)
        self.registration = registration
        self.on_applied = on_applied
        # called once each time the leadership lease runs out unrenewed (cut off from the
        # store): the broker drops its clients' connections (see _lease_loop)
        self.on_lease_lapsed = on_lease_lapsed
        # the world, injected (a simulation passes its own): follower fetchers, the clock,
        # and how blocking file writes are run
        self.fetcher_factory = fetcher_factory or self._real_fetcher
        self.connector = connector  # how the real fetchers reach leaders (TLS, SASL)
        self.monotonic = monotonic
        self.run_blocking = run_blocking
        self.controller = Controller(store, self.node_id, self._unclean_for)
        self.sync = MetadataSync(store, calls, partitions, brokers, self._applied,
                                 before_everything=self._register_if_lost)
        self.fetchers: dict[int, tuple[Fetcher, asyncio.Task[None]]] = {}
        self._controller_dirty = asyncio.Event()
        self._session_lost = False
        # After a lost session the lease stays revoked until the cluster's state has been
        # read again under the new session and applied: until then the broker may believe it
        # leads partitions the controller gave to others meanwhile (found by the simulation:
        # the lease was renewed as the broker registered again, before it read anything).
        self._sessions_lost = 0
        self._read_for_losses = 0
        self._lease_held_back = False
        self._tasks: asyncio.TaskGroup | None = None
        self._stopping = False
        self.partitions.isr_listener = self._on_isr_proposal

    # -- start-up (before the listener opens) ------------------------------------------

    def register(self) -> None:
        """Blocking: register this broker (NodeIdInUse if another live broker has our id)."""
        self.store.register_broker(self.registration())
        if not self._lease_held_back:
            self.lease.renew(self.monotonic())

    def watch(self) -> None:
        """Have the store's notifications recorded by the sync (from now on: call before
        the first read, so no change falls between the read and the watch)."""
        loop = asyncio.get_running_loop()

        def on_event(event: MetadataEvent) -> None:  # called on the store's thread
            loop.call_soon_threadsafe(self._on_event, event)
        self.store.watch(on_event)

    # -- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            self._tasks = tasks
            tasks.create_task(self.sync.run())
            tasks.create_task(self._controller_loop())
            tasks.create_task(self._isr_shrink_loop())
            tasks.create_task(self._lease_loop())
            tasks.create_task(self._checkpoint_loop())
            self._controller_dirty.set()
            self._reconcile_fetchers()

    def _on_event(self, event: MetadataEvent) -> None:
        change = event.change
        if change is MetadataChange.SESSION_LOST:
            log.warning("broker %d: ZooKeeper session lost; acting as leader of nothing until "
                        "it is back", self.node_id)
            self._session_lost = True
            self._sessions_lost += 1
            self._lease_held_back = True
            self.lease.revoke()
        elif change is MetadataChange.SESSION_RESTORED:
            log.info("broker %d: ZooKeeper session restored; registering again", self.node_id)
        self.sync.on_event(event)
        if change in (MetadataChange.BROKERS, MetadataChange.CONTROLLER,
                      MetadataChange.SESSION_RESTORED, MetadataChange.TOPICS):
            self._controller_dirty.set()

    def _register_if_lost(self) -> None:
        """In the sync's thread, before it reads everything again: after a lost session our
        registration is gone; make it again first."""
        losses = self._sessions_lost
        if self._session_lost:
            self.register()
            self._session_lost = False
        self._read_for_losses = losses

    def _applied(self, changed: list[Partition], everything: bool) -> None:
        if everything and self._lease_held_back and self._read_for_losses == self._sessions_lost:
            log.info("broker %d: the cluster's state read again; leading again", self.node_id)
            self._lease_held_back = False
            self.brokers.cut_off = False  # what it knows is current again
        self._reconcile_fetchers()
        self.on_applied()

    # -- follower fetchers -----------------------------------------------------------------

    def _reconcile_fetchers(self) -> None:
        if self._stopping or self._tasks is None:
            return
        leaders = {p.leader_id for p in self.partitions.all_partitions()
                   if not p.is_leader and p.leader_id >= 0}
        for leader_id, (fetcher, task) in list(self.fetchers.items()):
            registration = self.brokers.live.get(leader_id)
            if (leader_id not in leaders or registration is None
                    or fetcher.address != (registration.host, registration.port)):
                task.cancel()
                del self.fetchers[leader_id]
        for leader_id in leaders:
            registration = self.brokers.live.get(leader_id)
            if leader_id in self.fetchers or registration is None:
                continue
            fetcher = self.fetcher_factory(leader_id, registration)
            self.fetchers[leader_id] = (fetcher, self._tasks.create_task(fetcher.run()))
        for fetcher, _ in self.fetchers.values():
            fetcher.wake.set()

    def _real_fetcher(self, leader_id: int, registration: BrokerRegistration) -> Fetcher:
        return ReplicaFetcher(self.node_id, leader_id, registration.host, registration.port,
                              self.partitions.all_partitions, self.config,
                              connector=self.connector)

    def stop_fetchers(self) -> None:
        for _, task in self.fetchers.values():
            task.cancel()
        self.fetchers.clear()

    # -- ISR changes -----------------------------------------------------------------------

    def _on_isr_proposal(self, partition: Partition, proposed: PartitionState) -> None:
        if self._tasks is not None:
            self._tasks.create_task(self._write_isr(partition, proposed))

    async def _write_isr(self, partition: Partition, proposed: PartitionState) -> None:
        try:
            stored = await self.calls(self.store.compare_and_set_partition_state,
                                      partition.topic, partition.index, proposed)
        except StoreUnavailable as error:
            log.warning("%s: ISR change not written: %s", partition, error)
            stored = None
        partition.complete_isr_change(stored)
        if stored is None:  # someone wrote first: take their state
            self.sync.request(Work(states={(partition.topic, partition.index)}))
        else:
            self.partitions.apply_partition_state(partition.topic, partition.index, stored)
            log.info("%s: ISR is now %s", partition, list(stored.isr))

    async def _isr_shrink_loop(self) -> None:
        """Every half lag, the followers that fell behind leave the ISR. A wake-up later than
        planned by more than ``STALL_TOLERANCE_S`` means this broker itself stopped running
        (SIGSTOP, a stall): that time is excused to the followers, who could not fetch."""
        lag_ms = self.config["replica.lag.time.max.ms"]
        interval_s = max(lag_ms / 2000, 0.05)
        last = self.monotonic()
        while True:
            await asyncio.sleep(interval_s)
            now = self.monotonic()
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
        restarts near the HW it had, not at its log start. Only HWs that moved are written,
        in a thread: at 2,000 partitions, writing them all on the event loop stalled every
        client of the broker for a good part of a second."""
        written: dict[tuple[str, int], tuple[Partition, int]] = {}
        while True:
            await asyncio.sleep(HIGH_WATERMARK_CHECKPOINT_INTERVAL_S)
            due = []
            for partition in list(self.partitions.all_partitions()):
                key = (partition.topic, partition.index)
                last = written.get(key)
                if partition.is_replicated and (last is None or last[0] is not partition
                                                or last[1] != partition.high_watermark):
                    due.append((partition, partition.high_watermark))
            done = await self.run_blocking(_write_checkpoints, due)
            current = {(p.topic, p.index) for p in self.partitions.all_partitions()}
            written = {key: value for key, value in written.items() if key in current}
            written.update(((p.topic, p.index), (p, hw)) for p, hw in done)

    # -- the lease -------------------------------------------------------------------------

    async def _lease_loop(self) -> None:
        """Renew the lease while the store confirms our session. When it runs out instead,
        the clients' connections are dropped once (``on_lease_lapsed``): a broker cut off
        from the store cannot say who leads now, and its metadata is what it was - a client
        that only talks to it (librdkafka keeps connections to the brokers it needs only)
        would be told again and again that it still leads, and wait there until the
        network heals. Reconnecting, the client asks another broker, learns the new leader
        and its newer leader epoch, and no longer believes this one."""
        interval_s = self.lease.duration_s / 5
        was_valid = self.lease.valid()
        while True:
            asked_at = self.monotonic()
            try:
                confirmed = await self.calls.within(interval_s * 2, self.store.confirm_session)
            except StoreUnavailable:
                confirmed = False
            if confirmed and not self._lease_held_back:
                self.lease.renew(asked_at)
            elif not self._session_lost:  # who is live and in control, as far as we can tell
                self.sync.request(Work(brokers=True, controller=True))
            valid = self.lease.valid()
            if was_valid and not valid and not self._stopping:
                log.warning("broker %d: the leadership lease ran out (cut off from the "
                            "metadata store); dropping client connections", self.node_id)
                if self.brokers.controller_id == self.node_id:
                    # its /controller node goes with its session: whoever wins next is the
                    # controller; until the store says who, none that we know of
                    self.brokers.controller_id = -1
                self.brokers.cut_off = True
                self.on_lease_lapsed()
            elif valid and self.brokers.cut_off:
                log.info("broker %d: the leadership lease is renewed", self.node_id)
                self.brokers.cut_off = False
            was_valid = valid
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
                if await self.calls(self.store.try_become_controller, self.node_id):
                    if self.brokers.controller_id != self.node_id:
                        log.info("broker %d is the controller", self.node_id)
                        self.brokers.controller_id = self.node_id
                    await self.calls(self.controller.elect_all)
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
            moved = await self.calls.within(timeout_s, self.controller.move_leadership_away)
        except StoreUnavailable as error:
            log.warning("broker %d: controlled shutdown could not move leadership: %s",
                        self.node_id, error or "timed out")
            return
        log.info("broker %d: controlled shutdown moved %d partition states", self.node_id,
                 moved)
        deadline = self.monotonic() + timeout_s
        while self.monotonic() < deadline:  # the sync applies the moves as they are read
            if not any(p.is_leader and len(p.isr) > 1
                       for p in self.partitions.all_partitions()):
                return
            await asyncio.sleep(0.05)


def _write_checkpoints(due: list[tuple[Partition, int]]) -> list[tuple[Partition, int]]:
    """In a thread: write each HW; returns those written (a partition deleted meanwhile is
    skipped quietly, another failure logged and tried again next time)."""
    done = []
    for partition, high_watermark in due:
        try:
            partition.write_high_watermark_checkpoint(high_watermark)
        except FileNotFoundError:
            continue  # its topic was deleted
        except OSError as error:
            log.error("%s: cannot checkpoint the high watermark: %s", partition, error)
            continue
        done.append((partition, high_watermark))
    return done
