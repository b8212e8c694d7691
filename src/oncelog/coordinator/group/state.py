"""One classic consumer group: its members, generation, protocol, leader and committed offsets
(Kafka's ``GroupMetadata`` / ``MemberMetadata``, classic protocol, KIP-345 static members,
KIP-394 pending members).

States and their outgoing transitions (legal moves are ``VALID_PREVIOUS``, as in Kafka):

- ``EMPTY``: no members (maybe committed offsets). -> PREPARING_REBALANCE when a member joins;
  -> DEAD when deleted.
- ``PREPARING_REBALANCE``: members are (re)joining; JoinGroup responses are held until all
  known members have rejoined or the rebalance timeout passes. -> COMPLETING_REBALANCE when
  the join completes with members; -> EMPTY when it completes without any; -> DEAD.
- ``COMPLETING_REBALANCE``: a new generation exists; waiting for the leader's SyncGroup with
  the assignment. -> STABLE once that assignment is stored; -> PREPARING_REBALANCE when a
  member joins, leaves or times out first; -> DEAD.
- ``STABLE``: every member has its assignment and heartbeats. -> PREPARING_REBALANCE on a
  join with new metadata, the leader rejoining, a leave or a session timeout; -> DEAD.
- ``DEAD``: deleted (or its partition unloaded); the object is about to go. -> DEAD only.

Invariants (``check_invariants``):
- ``awaiting_join_count`` equals the members holding a JoinGroup response;
- the leader, when there is one, is a member; an EMPTY group has no members;
- each static member's instance id maps to its member id and back;
- pending (MEMBER_ID_REQUIRED) member ids are not members yet.

Everything here is plain synchronous code; callbacks (held JoinGroup/SyncGroup responses)
are called, never awaited.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from ...protocol.errors import ErrorCode
from .records import (GroupMetadataValue, MemberRecord, OffsetAndMetadata,
                      subscribed_topics)

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

VALID_PREVIOUS = {  # after Kafka's GroupMetadata.validPreviousStates
    EMPTY: {PREPARING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
}


class IllegalStateTransition(RuntimeError):
    def __init__(self, group_id: str, current: GroupState, target: GroupState) -> None:
        super().__init__(f"group {group_id!r}: {current.value} -> {target.value} is not a legal "
                         "transition")


@dataclass(frozen=True)
class JoinedMember:
    """A member as the leader sees it in a JoinGroup response."""
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's preference order
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = None
    awaiting_sync: SyncCallback | None = None
    is_new: bool = False  # joined and has not yet been through a completed join

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    """What DescribeGroups reports: live members, and their metadata and assignments once the
    group is STABLE (Kafka's ``GroupMetadata.summary``)."""
    group_id: str
    state: GroupState
    protocol_type: str
    protocol_name: str
    members: tuple[MemberSummary, ...]


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState = EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp_ms: int = -1
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # given by MEMBER_ID_REQUIRED
    pending_sync_members: set[str] = field(default_factory=set)
    awaiting_join_count: int = 0
    new_member_added: bool = False  # a new member joined during the initial join delay
    # While PREPARING_REBALANCE: the rebalance time left after the current initial join delay
    # (Kafka's InitialDelayedJoin), or None when the join waits for members (DelayedJoin).
    initial_join_remaining_ms: int | None = None
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"ClassicGroup({self.group_id!r}, {self.state.value}, generation "
                f"{self.generation_id}, {len(self.members)} members)")

    # -- state ------------------------------------------------------------------------------

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalStateTransition(self.group_id, self.state, target)
        self.state = target
        self.current_state_timestamp_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[PREPARING_REBALANCE]

    def check_invariants(self) -> None:
        assert self.awaiting_join_count == sum(
            1 for m in self.members.values() if m.awaiting_join is not None), self
        assert self.leader_id is None or self.leader_id in self.members, self
        assert self.members or self.leader_id is None, self
        assert not (self.members and self.state is EMPTY), self
        assert all(self.members[m].group_instance_id == i
                   for i, m in self.static_members.items()), self
        assert not (self.pending_members & self.members.keys()), self

    # -- members ----------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """KIP-345: a known instance id arriving with another member id is a zombie copy."""
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(self, member: Member, callback: JoinCallback | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)
        self._set_awaiting_join(member, callback)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            if member.awaiting_join is not None:
                self.awaiting_join_count -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(self, member: Member, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      callback: JoinCallback | None) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self._set_awaiting_join(member, callback)

    def _set_awaiting_join(self, member: Member, callback: JoinCallback | None) -> None:
        previous = member.awaiting_join
        if previous is not None and callback is not None:
            # A JoinGroup from a member that already has one held (its client gave up on the
            # first): answer the first, so the connection it came on is not blocked forever.
            previous(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        if callback is not None and previous is None:
            self.awaiting_join_count += 1
        elif callback is None and previous is not None:
            self.awaiting_join_count -= 1
        member.awaiting_join = callback

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str) -> Member:
        """A static member rejoined without its member id: it gets a new one, and whatever
        the old id was waiting for is answered FENCED_INSTANCE_ID (Kafka's
        ``replaceStaticMember``)."""
        member = self.members.pop(old_member_id)
        self.invoke_join_callback(member, JoinResult(ErrorCode.FENCED_INSTANCE_ID,
                                                     old_member_id))
        self.invoke_sync_callback(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    def invoke_join_callback(self, member: Member, result: JoinResult) -> None:
        callback = member.awaiting_join
        if callback is not None:
            member.awaiting_join = None
            self.awaiting_join_count -= 1
            callback(result)

    def invoke_sync_callback(self, member: Member, result: SyncResult) -> None:
        callback = member.awaiting_sync
        if callback is not None:
            member.awaiting_sync = None
            callback(result)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, or pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join is not None:
                self.leader_id = member_id
                return True
        return False

    # -- protocols --------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        candidates = {name for name, _ in first.protocols}
        for member in members:
            candidates &= {name for name, _ in member.protocols}
        return candidates

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = {name for name, _ in protocols}
        if not self.members:  # Kafka checks "is Empty"; a group with no members accepts any
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins (ties: the
        first member's preference, so the choice does not depend on hashing)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])  # dicts keep first-vote order

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> tuple[JoinedMember, ...]:
        protocol = self.protocol_name
        assert protocol is not None, "a generation with members has chosen a protocol"
        return tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(protocol))
                     for m in self.members.values())

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members of a consumer group subscribe to; None when unknown (not a
        consumer group, no protocol chosen, or metadata we cannot read)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            member_topics = subscribed_topics(member.metadata(self.protocol_name))
            if member_topics is None:
                return None
            topics |= member_topics
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        return True if topics is None else topic in topics

    # -- reports and records -----------------------------------------------------------------

    def summary(self) -> GroupSummary:
        if self.state is STABLE:
            protocol = self.protocol_name or ""
            members = tuple(MemberSummary(m.member_id, m.group_instance_id, m.client_id,
                                          m.client_host, m.metadata(protocol),
                                          m.assignment) for m in self.members.values())
        else:
            members = tuple(MemberSummary(m.member_id, m.group_instance_id, m.client_id,
                                          m.client_host, b"", b"")
                            for m in self.members.values())
            protocol = ""
        return GroupSummary(self.group_id, self.state, self.protocol_type or "", protocol,
                            members)

    def to_record(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadataValue for the current generation; ``assignments`` overrides the
        members' current ones (SyncGroup stores the leader's before applying it)."""
        members = tuple(
            MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                         m.rebalance_timeout_ms, m.session_timeout_ms,
                         m.metadata(self.protocol_name) if self.protocol_name else b"",
                         (assignments or {}).get(m.member_id, m.assignment))
            for m in self.members.values())
        return GroupMetadataValue(self.protocol_type or "", self.generation_id,
                                  self.protocol_name, self.leader_id,
                                  self.current_state_timestamp_ms, members)

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue,
                    offsets: dict[tuple[str, int], OffsetAndMetadata]) -> ClassicGroup:
        """A group as the log last described it: STABLE with its members, or EMPTY."""
        group = cls(group_id, state=STABLE if value.members else EMPTY,
                    generation_id=value.generation_id,
                    protocol_type=value.protocol_type or None,
                    protocol_name=value.protocol_name,
                    current_state_timestamp_ms=value.current_state_timestamp_ms,
                    offsets=offsets)
        for record in value.members:
            protocols = [(value.protocol_name or "", record.subscription)]
            member = Member(record.member_id, record.group_instance_id, record.client_id,
                            record.client_host, record.rebalance_timeout_ms,
                            record.session_timeout_ms, value.protocol_type, protocols,
                            assignment=record.assignment)
            group.add(member, None)
        if value.leader_id in group.members:
            group.leader_id = value.leader_id
        return group
