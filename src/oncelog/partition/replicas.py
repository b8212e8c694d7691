"""What a partition's leader knows about its replicas: the ISR and each follower's progress.

The ISR is one of three states (Kafka's ``PartitionState`` in ``Partition.scala``, KIP-497):

- ``CommittedIsr(isr)``: what the metadata store holds;
- ``PendingExpand(isr, adding)``: a compare-and-set adding ``adding`` is under way;
- ``PendingShrink(isr, removing)``: a compare-and-set removing ``removing`` is under way.

Each answers two questions differently on purpose. ``maximal`` is who *might* be in the
ISR once the change lands: the high watermark advances only when all of them have a record,
so a write acknowledged during a shrink is still on the replicas being removed, and one
acknowledged during an expansion is already on the one being added. ``committed`` is what
the store says now; ``min.insync.replicas`` is checked against it (the conservative view:
an expansion that has not landed does not let a write through).

Follower progress follows Kafka's ``Replica``: a follower is caught up at time T if a fetch
at T asked for an offset at or past the leader's log end (or past the log end the leader
had at the follower's previous fetch); a follower not caught up for
``replica.lag.time.max.ms`` leaves the ISR. Only time the leader itself ran counts: a leader
that was stopped (SIGSTOP, a long stall) served no fetches meanwhile, so on waking it
``excuse``-s that time before judging anyone (Kafka does not, and drops every follower after
a long enough GC pause only to take them back a moment later).
"""

from __future__ import annotations

from dataclasses import dataclass


class _IsrBase:
    """What the three states share: ``isr`` is the committed ISR (the store's)."""
    isr: tuple[int, ...]
    is_pending = True

    @property
    def committed(self) -> tuple[int, ...]:
        return self.isr

    @property
    def maximal(self) -> tuple[int, ...]:
        return self.isr


@dataclass(frozen=True)
class CommittedIsr(_IsrBase):
    isr: tuple[int, ...]
    is_pending = False


@dataclass(frozen=True)
class PendingExpand(_IsrBase):
    isr: tuple[int, ...]
    adding: int

    @property
    def maximal(self) -> tuple[int, ...]:
        return (*self.isr, self.adding)


@dataclass(frozen=True)
class PendingShrink(_IsrBase):
    """``maximal`` stays the committed ISR: the replicas being removed still count for the
    high watermark until the store confirms their removal."""
    isr: tuple[int, ...]
    removing: tuple[int, ...]


IsrState = CommittedIsr | PendingExpand | PendingShrink


@dataclass
class FollowerState:
    """A follower as its leader sees it, from the follower's fetches."""
    replica_id: int
    log_end_offset: int = -1          # the offset it asked for last: all below it it has
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_offset_at_last_fetch: int = -1

    def record_fetch(self, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.leader_end_offset_at_last_fetch >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.leader_end_offset_at_last_fetch = leader_end_offset
        self.last_fetch_ms = now_ms

    def excuse(self, stalled_ms: int, now_ms: int) -> None:
        """The leader did not run for ``stalled_ms``: that time is not this follower's lag."""
        self.last_caught_up_ms = min(self.last_caught_up_ms + stalled_ms, now_ms)

    def is_lagging(self, now_ms: int, lag_time_max_ms: int) -> bool:
        return now_ms - self.last_caught_up_ms > lag_time_max_ms
