"""Replicas of one partition in one process, on a fake clock, with real logs on disk.

No sockets and no sleeps: ``fetch(follower)`` does what a follower's fetcher does against
its leader (read past the follower's end, append the leader's batches as they are, take the
leader's high watermark), ``isr_change`` completes a proposed ISR change as the metadata
store's compare-and-set would, and ``elect`` moves leadership as the controller would, with
the epoch bump. Timing rules (``replica.lag.time.max.ms``) are driven by moving ``clock``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from oncelog.controller.store import NO_LEADER, PartitionState
from oncelog.partition import Partition, TopicSettings
from oncelog.protocol.batches import iter_headers
from oncelog.protocol.records import decode_records, make_batch
from oncelog.storage import Log
from tests.fake_clock import FakeClock

CONFIGS = {"segment.bytes": str(1 << 20), "segment.ms": str(7 * 86400_000),
           "retention.ms": "-1", "retention.bytes": "-1", "index.interval.bytes": "4096",
           "max.message.bytes": str(1 << 20), "message.timestamp.type": "CreateTime",
           "min.insync.replicas": "2"}


class ReplicaSet:
    def __init__(self, directory: Path, replicas=(1, 2, 3), min_insync_replicas: int = 2,
                 configs: dict[str, str] | None = None) -> None:
        self.directory = directory
        self.clock = FakeClock()
        self.replica_ids = tuple(replicas)
        self.settings = TopicSettings.from_configs(
            {**CONFIGS, "min.insync.replicas": str(min_insync_replicas), **(configs or {})})
        self.replicas = {r: self._open(r) for r in replicas}
        self.state = PartitionState(replicas[0], 0, tuple(replicas), version=0)
        for partition in self.replicas.values():
            partition.apply_state(self.state, self.replica_ids)

    def _open(self, replica_id: int) -> Partition:
        log = Log.open(self.directory / f"broker-{replica_id}" / "orders-0",
                       self.settings.log_config, self.clock)
        return Partition("orders", 0, log, self.settings, self.clock, replica_id=replica_id,
                         replicas=self.replica_ids)

    def restart(self, replica_id: int) -> Partition:
        """A clean restart of one replica: close it, open it from disk, re-apply the state."""
        self.replicas[replica_id].close()
        partition = self.replicas[replica_id] = self._open(replica_id)
        partition.apply_state(self.state, self.replica_ids)
        return partition

    @property
    def leader(self) -> Partition:
        return self.replicas[self.state.leader]

    def produce(self, *values: bytes, acks: int = -1, **batch_fields):
        return self.leader.append_records(make_batch(list(values), **batch_fields),
                                          required_acks=acks)

    def fetch(self, replica_id: int, max_bytes: int = 1 << 20) -> int:
        """One fetch of ``replica_id`` from the leader; returns how many records it got."""
        follower, leader = self.replicas[replica_id], self.leader
        data = leader.read_for_follower(replica_id, follower.log_end_offset, max_bytes)
        follower.append_as_follower(data)
        follower.update_follower_high_watermark(leader.high_watermark)
        return sum(h.records_count for _, h in iter_headers(data))

    def isr_change(self, proposed: PartitionState | None, wins: bool = True) -> None:
        """Complete a proposed ISR change as the store's compare-and-set would."""
        if proposed is None:
            return
        stored = None
        if wins and proposed.version == self.state.version:
            stored = self.state = replace(proposed, version=self.state.version + 1)
        self.leader.complete_isr_change(stored)

    def elect(self, leader: int, isr: tuple[int, ...] | None = None) -> PartitionState:
        """The controller's election: a new leader (or NO_LEADER), the epoch bumped, applied
        to every replica given (stopped replicas learn it when they return)."""
        isr = tuple(isr if isr is not None else self.state.isr)
        self.state = replace(self.state.elect(leader, isr), version=self.state.version + 1)
        for partition in self.replicas.values():
            partition.apply_state(self.state, self.replica_ids)
        return self.state

    def catch_up(self, replica_id: int) -> None:
        """Truncate by leader epoch, as a follower does before fetching from a new leader."""
        follower, leader = self.replicas[replica_id], self.leader
        epoch = follower.epoch_cache.latest_epoch
        if epoch < 0:
            return
        leader_epoch, end_offset = leader.end_offset_for_epoch(epoch)
        if leader_epoch == -1:
            follower.truncate_to(leader.log_start_offset)
            return
        if leader_epoch < epoch:  # we know an epoch the leader never had: use its end in ours
            end_offset = min(end_offset, follower.end_offset_for_epoch(leader_epoch)[1])
        follower.truncate_to(min(end_offset, follower.log_end_offset))


def values(partition: Partition, upto: int | None = None) -> list[bytes]:
    """Every record value in the replica's log (below ``upto``, default its LEO)."""
    end = partition.log_end_offset if upto is None else upto
    data = bytes(partition.log.read(partition.log_start_offset, 1 << 30, max_offset=end))
    out = []
    for position, header in iter_headers(data):
        out.extend(r.value for r in decode_records(data[position:position + header.size], header))
    return out


__all__ = ["ReplicaSet", "values", "NO_LEADER"]
