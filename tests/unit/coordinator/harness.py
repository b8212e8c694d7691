"""A group coordinator under a fake clock, with ``__consumer_offsets`` kept in memory.

``Groups`` drives one ``GroupCoordinator`` the way handlers do (callbacks for JoinGroup and
SyncGroup) and keeps every batch it writes, so a test can assert the records emitted and
replay them into a fresh coordinator, as a broker restart does.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from oncelog.coordinator.internal_topic import Entry
from oncelog.coordinator.group import (GroupConfig, GroupCoordinator, JoinGroupParams,
                                       JoinResult, LeavingMember, OffsetAndMetadata,
                                       SyncGroupParams, SyncResult)
from oncelog.coordinator.group.records import (GroupMetadataKey, OffsetCommitKey,
                                               decode_group_metadata_value, decode_key,
                                               decode_offset_commit_value)
from oncelog.protocol.errors import ErrorCode, KafkaError

SESSION_MS = 10_000
REBALANCE_MS = 30_000


class FakeClock:
    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


class MemoryOffsetsLog:
    """The partitions of ``__consumer_offsets`` as lists of batches."""

    def __init__(self, partition_count: int = 4) -> None:
        self.batches: list[list[list[tuple[bytes, bytes | None]]]] = [
            [] for _ in range(partition_count)]
        self.fail_with: ErrorCode | None = None
        self.leading = True  # False: as a broker whose leadership lease ran out

    def may_lead(self, partition: int) -> bool:
        return self.leading

    @property
    def partition_count(self) -> int:
        return len(self.batches)

    def append(self, partition: int, records, producer=None) -> None:
        if self.fail_with is not None:
            raise KafkaError(self.fail_with, "injected append failure")
        producer_id = -1 if producer is None else producer[0]
        self.batches[partition].append([Entry(key, value, producer_id) for key, value in records])

    def write_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        self.batches[partition].append([Entry(None, None, producer_id, commit)])

    def read(self, partition: int):
        for batch in self.batches[partition]:
            yield from batch

    def all_records(self) -> list[tuple[bytes, bytes | None]]:
        return [(entry.key, entry.value) for partition in self.batches for batch in partition
                for entry in batch if entry.commit is None]


def describe_record(key: bytes, value: bytes | None):
    """A readable form of one record: ("offset", group, topic, partition, offset, metadata),
    ("group", group, generation, members, assignments) or a tombstone with value None."""
    parsed = decode_key(key)
    if isinstance(parsed, OffsetCommitKey):
        if value is None:
            return ("offset", parsed.group_id, parsed.topic, parsed.partition, None)
        committed = decode_offset_commit_value(value)
        return ("offset", parsed.group_id, parsed.topic, parsed.partition, committed.offset,
                committed.metadata)
    assert isinstance(parsed, GroupMetadataKey)
    if value is None:
        return ("group", parsed.group_id, None)
    group = decode_group_metadata_value(value)
    return ("group", parsed.group_id, group.generation_id,
            tuple(m.member_id for m in group.members),
            {m.member_id: m.assignment for m in group.members})


def consumer_subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


@dataclass
class Answer:
    """What a held request was (or is still waiting to be) answered with."""
    results: list = field(default_factory=list)

    def __call__(self, result) -> None:
        self.results.append(result)

    @property
    def done(self) -> bool:
        return bool(self.results)

    @property
    def result(self):
        assert len(self.results) == 1, f"expected one answer, got {self.results}"
        return self.results[0]


class Groups:
    def __init__(self, offsets_log: MemoryOffsetsLog | None = None,
                 clock: FakeClock | None = None, uuids=None, **config) -> None:
        self.clock = clock or FakeClock()
        self.log = offsets_log or MemoryOffsetsLog()
        config.setdefault("initial_rebalance_delay_ms", 0)
        self.config = GroupConfig(**config)
        # Deterministic member ids, unique across restarts as random UUIDs would be.
        self.uuids = uuids or iter(range(1, 1 << 30))
        self.coordinator = GroupCoordinator(self.config, self.log, self.clock,
                                            new_uuid=lambda: uuid.UUID(int=next(self.uuids)))
        self.coordinator.load()

    def restarted(self) -> Groups:
        """A new coordinator over the same log and clock: what a broker restart does."""
        return Groups(self.log, self.clock, self.uuids, **{
            "initial_rebalance_delay_ms": self.config.initial_rebalance_delay_ms,
            "min_session_timeout_ms": self.config.min_session_timeout_ms,
            "max_session_timeout_ms": self.config.max_session_timeout_ms,
            "offset_metadata_max_bytes": self.config.offset_metadata_max_bytes})

    def group(self, group_id: str):
        return self.coordinator.manager.get(group_id)

    def advance(self, ms: int) -> None:
        """Move time forward, stopping at every deadline on the way (as a real clock would:
        an operation that schedules another counts from when it ran)."""
        target = self.clock.now_ms + ms
        timer = self.coordinator.timer
        while (deadline := timer.next_deadline_ms()) is not None and deadline <= target:
            self.clock.now_ms = max(self.clock.now_ms, deadline)
            timer.run_due()
        self.clock.now_ms = target
        timer.run_due()

    def records(self, group_id: str | None = None) -> list:
        described = [describe_record(k, v) for k, v in self.log.all_records()]
        return [r for r in described if group_id is None or r[1] == group_id]

    # -- requests, as the handlers make them ---------------------------------------------------

    def join(self, group_id: str, member_id: str = "", *, instance_id: str | None = None,
             protocols=(("range", b"r"),), session_ms: int = SESSION_MS,
             rebalance_ms: int = REBALANCE_MS, protocol_type: str = "consumer",
             version: int = 9, client_id: str = "client") -> Answer:
        answer = Answer()
        self.coordinator.join_group(JoinGroupParams(
            group_id=group_id, member_id=member_id, group_instance_id=instance_id,
            client_id=client_id, client_host="/127.0.0.1", session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms, protocol_type=protocol_type,
            protocols=[(n, m) for n, m in protocols],
            require_known_member_id=version >= 4 and instance_id is None,
            supports_skip_assignment=version >= 9), answer)
        return answer

    def join_new(self, group_id: str, **kwargs) -> Answer:
        """The KIP-394 dance: join, get MEMBER_ID_REQUIRED and an id, join with it."""
        first = self.join(group_id, **kwargs)
        assert first.result.error is ErrorCode.MEMBER_ID_REQUIRED, first.results
        return self.join(group_id, first.result.member_id, **kwargs)

    def sync(self, group_id: str, member_id: str, generation_id: int,
             assignments: dict[str, bytes] | None = None,
             instance_id: str | None = None) -> Answer:
        answer = Answer()
        self.coordinator.sync_group(SyncGroupParams(group_id, generation_id, member_id,
                                                    instance_id, None, None,
                                                    assignments or {}), answer)
        return answer

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  instance_id: str | None = None) -> ErrorCode:
        return self.coordinator.heartbeat(group_id, member_id, instance_id, generation_id)

    def leave(self, group_id: str, *member_ids: str) -> tuple[ErrorCode, list[ErrorCode]]:
        return self.coordinator.leave_group(group_id, [LeavingMember(m) for m in member_ids])

    def commit(self, group_id: str, member_id: str, generation_id: int,
               offsets: dict[tuple[str, int], int | tuple[int, str]],
               instance_id: str | None = None) -> dict:
        return self.coordinator.commit_offsets(group_id, member_id, instance_id, generation_id,
                                               {p: _offset(v) for p, v in offsets.items()})

    def committed(self, group_id: str, partitions=None) -> dict:
        error, offsets = self.coordinator.fetch_offsets(group_id, partitions)
        assert error is ErrorCode.NONE, error
        return {p: (o.offset if o is not None else None) for p, o in offsets.items()}

    # -- whole scenarios ------------------------------------------------------------------------

    def stable_group(self, group_id: str, count: int, **join_kwargs) -> list[str]:
        """Given a STABLE group of ``count`` dynamic members, each assigned its own id as
        bytes; returns the member ids, leader first."""
        answers = [self.join_new(group_id, **join_kwargs) for _ in range(count)]
        self.advance(0)  # the initial join delay (0 ms unless configured)
        group = self.group(group_id)
        if not all(a.done for a in answers):  # later members joined after generation 1
            self.advance(REBALANCE_MS)
        results = [a.results[-1] for a in answers]
        assert all(r.error is ErrorCode.NONE for r in results), results
        generation = group.generation_id
        leader = group.leader_id
        member_ids = [leader] + [r.member_id for r in results if r.member_id != leader]
        syncs = [self.sync(group_id, m, generation,
                           {x: x.encode() for x in member_ids} if m == leader else None)
                 for m in member_ids]
        assert all(s.result.error is ErrorCode.NONE for s in syncs), [s.results for s in syncs]
        assert group.state.value == "Stable"
        return member_ids


def _offset(value) -> OffsetAndMetadata:
    if isinstance(value, tuple):
        return OffsetAndMetadata(value[0], -1, value[1])
    return OffsetAndMetadata(value)


__all__ = ["Answer", "FakeClock", "Groups", "JoinResult", "MemoryOffsetsLog", "REBALANCE_MS",
           "SESSION_MS", "SyncResult", "consumer_subscription", "describe_record"]
