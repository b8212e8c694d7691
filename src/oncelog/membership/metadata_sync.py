"""This broker's view of the cluster's metadata, kept up to date one change at a time.

The store's notifications (``MetadataEvent``) say what changed: the list of topics, one
topic (it grew), one partition's state, the live brokers, the controller. Each is recorded
as work; one pass at a time reads exactly that from the store (in a thread, through
``StoreCalls``), with watches, so the next change of each is reported too, and applies it on
the event loop through ``PartitionManager.apply_listing`` / ``apply_topic`` /
``apply_partition_state``, which apply only what is newer than what this broker knows. So a
new topic costs every broker one read of that topic, a leader change one read of that
partition's state, whatever the number of partitions (a full re-read of every state, which
took seconds at 2,000 partitions per broker, is gone).

Everything is read again (``everything``) at start-up and whenever the store's watches may
have missed changes: a new session (SESSION_RESTORED, after which this broker registers
again), a reconnection (WATCHES_RESET). A read that fails (the store cannot be reached) is
tried again after ``RETRY_S``, with any work recorded meanwhile.

A topic's watches are set by reading it: ``watched`` holds the topics read with watches in
this session, and a listing's names not in it are read (even a topic this broker created
itself, whose creation it applied without a watch).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ..partition import Partition, PartitionManager
from ..controller.live_brokers import LiveBrokers
from ..controller.store import (BrokerRegistration, MetadataChange, MetadataEvent, MetadataStore,
                    PartitionState, StoreCalls, StoreUnavailable, TopicListing, TopicRecord)

log = logging.getLogger(__name__)

RETRY_S = 1.0


@dataclass
class Work:
    """What to read in the next pass."""
    everything: bool = False
    listing: bool = False
    brokers: bool = False
    controller: bool = False
    topics: set[str] = field(default_factory=set)
    states: set[tuple[str, int]] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.everything or self.listing or self.brokers or self.controller
                    or self.topics or self.states)

    def merge(self, other: Work) -> None:
        self.everything |= other.everything
        self.listing |= other.listing
        self.brokers |= other.brokers
        self.controller |= other.controller
        self.topics |= other.topics
        self.states |= other.states


@dataclass
class Read:
    """What one pass read from the store."""
    everything: bool = False
    listing: TopicListing | None = None
    # topics read whole (None: not there), with every partition's state
    topics: dict[str, tuple[TopicRecord | None, list[PartitionState | None]]] = field(
        default_factory=dict)
    states: dict[tuple[str, int], PartitionState | None] = field(default_factory=dict)
    brokers: dict[int, BrokerRegistration] | None = None
    controller_id: int | None = None


class MetadataSync:
    def __init__(self, store: MetadataStore, calls: StoreCalls, partitions: PartitionManager,
                 brokers: LiveBrokers, on_applied: Callable[[list[Partition], bool], None],
                 before_everything: Callable[[], None] | None = None) -> None:
        self.store = store
        self.calls = calls
        self.partitions = partitions
        self.brokers = brokers
        # called on the event loop after each pass, with the local replicas that are new
        # or whose leader or epoch changed, and whether the pass read everything
        self.on_applied = on_applied
        # called in the reading thread before everything is read (registering again)
        self.before_everything = before_everything
        self.watched: set[str] = set()
        self._work = Work(everything=True)
        self._pending = asyncio.Event()
        self._pending.set()
        self.passes = 0

    # -- what to read --------------------------------------------------------------------

    def on_event(self, event: MetadataEvent) -> None:
        """On the event loop: record what ``event`` says changed."""
        change = event.change
        if change is MetadataChange.BROKERS:
            self._work.brokers = True
        elif change is MetadataChange.CONTROLLER:
            self._work.controller = True
        elif change is MetadataChange.TOPICS:
            self._work.listing = True
        elif change is MetadataChange.TOPIC and event.topic is not None:
            self._work.topics.add(event.topic)
        elif change is MetadataChange.PARTITION_STATE and event.topic is not None:
            assert event.partition is not None, event
            self._work.states.add((event.topic, event.partition))
        elif change in (MetadataChange.SESSION_RESTORED, MetadataChange.WATCHES_RESET):
            self._work.everything = True
        elif change is MetadataChange.SESSION_LOST:
            self._work.brokers = self._work.controller = True
        self._pending.set()

    def request(self, work: Work) -> None:
        self._work.merge(work)
        self._pending.set()

    # -- passes ----------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            await self._pending.wait()
            self._pending.clear()
            if not self._work:
                continue
            work, self._work = self._work, Work()
            try:
                await self._pass(work)
            except StoreUnavailable as error:
                self._retry(work, error)
                await asyncio.sleep(RETRY_S)
            except Exception as error:  # a bug or a document we cannot read: keep going
                log.exception("metadata sync pass failed")
                self._retry(work, error)
                await asyncio.sleep(RETRY_S)

    def _retry(self, work: Work, error: Exception) -> None:
        log.warning("cannot read the cluster's metadata: %s; retrying in %g s", error, RETRY_S)
        self._work.merge(work)
        self._pending.set()

    async def read_everything(self) -> None:
        """One pass reading everything, now (start-up: before the listener serves)."""
        work, self._work = self._work, Work()
        work.everything = True
        try:
            await self._pass(work)
        except BaseException:
            self._work.merge(work)
            self._pending.set()
            raise

    async def _pass(self, work: Work) -> None:
        read = await self.calls(self._read, work, frozenset(self.watched))
        changed = self._apply(read)
        self.passes += 1
        self.on_applied(changed, read.everything)

    # -- reading (in a thread) -------------------------------------------------------------

    def _read(self, work: Work, watched: frozenset[str]) -> Read:
        store = self.store
        if work.everything:
            if self.before_everything is not None:
                self.before_everything()
            listing = store.list_topics(watch=True)
            return Read(everything=True, listing=listing,
                        topics={name: self._read_topic(name) for name in sorted(listing.names)},
                        brokers=store.live_brokers(), controller_id=store.controller_id())
        read = Read()
        names = set(work.topics)
        if work.listing:
            read.listing = store.list_topics(watch=True)
            names |= read.listing.names - watched
        read.topics = {name: self._read_topic(name) for name in sorted(names)}
        states = sorted(key for key in work.states if key[0] not in read.topics)
        if states:
            read.states = store.states_of(states, watch=True)
        if work.brokers:
            read.brokers = store.live_brokers()
        if work.controller:
            read.controller_id = store.controller_id()
        return read

    def _read_topic(self, name: str) -> tuple[TopicRecord | None, list[PartitionState | None]]:
        record = self.store.read_topic(name, watch=True)
        if record is None:
            return None, []
        self.partitions.prepare_directories(record)  # its new replicas' files, off the loop
        return record, self.store.partition_states(name, record.partitions, watch=True)

    # -- applying (on the event loop) ------------------------------------------------------

    def _apply(self, read: Read) -> list[Partition]:
        if read.brokers is not None:
            self.brokers.update(read.brokers)
        if read.controller_id is not None:
            self.brokers.controller_id = read.controller_id
        if read.everything:
            self.watched = set()
        changed: list[Partition] = []
        if read.listing is not None:
            self.partitions.apply_listing(read.listing)
        for name, (record, states) in read.topics.items():
            if record is None:
                self.watched.discard(name)
                continue
            self.watched.add(name)
            changed.extend(self.partitions.apply_topic(record, states))
        for (name, index), state in read.states.items():
            if state is not None and self.partitions.apply_partition_state(name, index, state):
                changed.append(self.partitions.topics[name].local[index])
        if read.listing is not None:  # names gone from the store are watched no more
            self.watched &= read.listing.names | set(read.topics)
        return changed
