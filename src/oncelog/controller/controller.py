"""The controller: elections over the whole cluster, by compare-and-set in the metadata store.

At most one broker holds the controller role (the ZooKeeper ``/controller`` node). The
controller runs ``elect_all`` whenever the set of live brokers or the controller changes,
and on a slow timer: every partition's state is re-read and passed through
``elections.on_brokers_changed`` with the topic's effective
``unclean.leader.election.enable``; a changed state is written with compare-and-set against
the version just read, and re-read and retried when someone (a leader changing its ISR)
wrote first. Brokers learn of the new states through the store's watches and change roles
themselves (``membership``) — there is no LeaderAndIsr request: the store is the
only channel, so a broker can never act on a state the store does not hold.

``move_leadership_away`` is the stopping broker's half of a controlled shutdown (SIGTERM):
the same compare-and-set, through ``elections.for_controlled_shutdown``.

Everything here blocks on the store: call it in a thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from . import elections
from .store import MetadataStore, PartitionState, TopicRecord

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 10


class Controller:
    def __init__(self, store: MetadataStore, node_id: int,
                 unclean_for: Callable[[TopicRecord], bool]) -> None:
        self.store = store
        self.node_id = node_id
        self.unclean_for = unclean_for

    def elect_all(self) -> int:
        """One pass over every partition; returns how many states were changed."""
        live = set(self.store.live_brokers())
        changed = 0
        for record in self.store.load_topics().values():
            unclean = self.unclean_for(record)
            states = self.store.partition_states(record.name, record.partitions)
            for index, state in enumerate(states):
                rule = partial(elections.on_brokers_changed, replicas=record.replicas(index),
                               live=live, unclean=unclean)
                # read all at once; only a partition that needs a change is read again
                if state is not None and rule(state) is not None:
                    changed += self._update(record.name, index, rule, first=state)
        return changed

    def move_leadership_away(self) -> int:
        """Controlled shutdown of this broker: leadership and ISR membership go elsewhere."""
        live = set(self.store.live_brokers()) - {self.node_id}
        moved = 0
        for record in self.store.load_topics().values():
            for index in range(record.partitions):
                replicas = record.replicas(index)
                if self.node_id in replicas:
                    moved += self._update(
                        record.name, index,
                        partial(elections.for_controlled_shutdown, replicas=replicas, live=live,
                                leaving=self.node_id))
        return moved

    def _update(self, topic: str, index: int,
                rule: Callable[[PartitionState], PartitionState | None],
                first: PartitionState | None = None) -> int:
        for attempt in range(MAX_ATTEMPTS):
            state = first if attempt == 0 and first is not None else \
                self.store.partition_state(topic, index)
            if state is None:
                return 0
            new = rule(state)
            if new is None:
                return 0
            stored = self.store.compare_and_set_partition_state(topic, index, new)
            if stored is not None:
                self._log_change(topic, index, state, stored)
                return 1
        log.warning("%s-%d: the state kept changing under %d attempts; next pass retries",
                    topic, index, MAX_ATTEMPTS)
        return 0

    def _log_change(self, topic: str, index: int, before: PartitionState,
                    after: PartitionState) -> None:
        if after.leader_epoch == before.leader_epoch:
            log.info("%s-%d: ISR %s -> %s (leader %d)", topic, index, list(before.isr),
                     list(after.isr), after.leader)
        elif after.has_leader:
            clean = after.leader in before.isr
            log.log(logging.INFO if clean else logging.WARNING,
                    "%s-%d: leader %d -> %d in epoch %d, ISR %s%s", topic, index,
                    before.leader, after.leader, after.leader_epoch, list(after.isr),
                    "" if clean else " (UNCLEAN: records only the old ISR had are lost)")
        else:
            log.warning("%s-%d: offline, no in-sync replica is alive (ISR %s); "
                        "unclean.leader.election.enable is false", topic, index,
                        list(after.isr))
