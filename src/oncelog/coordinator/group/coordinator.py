"""The classic group coordinator: membership, generations, rebalances and committed offsets
(Kafka's ``GroupCoordinator``, classic protocol; KIP-62 rebalance timeouts, KIP-134 initial
rebalance delay, KIP-345 static membership, KIP-394 MEMBER_ID_REQUIRED, KIP-496 OffsetDelete,
KIP-814 SkipAssignment).

Owns the timing of every group (session, join, sync and pending-member deadlines, on the
injected clock's ``Timer``); the groups themselves and their records belong to
``GroupMetadataManager``. Every method is synchronous: it changes state whole, writes any
records through ``manager.store`` ("emit, then apply"), then answers — directly, or through
the callback a held JoinGroup/SyncGroup left behind (Kafka's delayed operations). Handlers
await those callbacks; the event loop never blocks.

A rebalance, in brief. A join moves the group to PREPARING_REBALANCE and holds every
JoinGroup response. The join completes when all known members have rejoined, or when the
rebalance timeout (the members' largest ``rebalance_timeout_ms``) passes — then members that
did not rejoin are dropped (static ones are kept, KIP-345) — or, for a group that was EMPTY,
after ``group.initial.rebalance.delay.ms``, extended while new members keep arriving. The
completed join starts a generation (COMPLETING_REBALANCE): every member gets the generation
and the leader gets the members' metadata. The leader's SyncGroup carries the assignment,
which is written to ``__consumer_offsets`` and then handed to each member (STABLE). Members
that never send SyncGroup within the rebalance timeout are removed and the group rebalances.
Members prove liveness with heartbeats (and offset commits) within ``session_timeout_ms``.

This module is the membership half; offset commits, fetches and deletions and group
administration are ``offsets.py`` (split by API), mixed into ``GroupCoordinator``.

Known divergences from Kafka: ``group.max.size`` and offsets retention
(``offsets.retention.minutes``) are not implemented; OffsetCommit's ``retention_time_ms``
(v2-v4) is accepted and ignored; consumer groups of KIP-848 (ConsumerGroupHeartbeat) are not
served. A second JoinGroup (or SyncGroup) from a member whose first is still held answers
the first with REBALANCE_IN_PROGRESS, since responses on one connection leave in order here.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from ...protocol.errors import ErrorCode
from ..timer import Timer
from .manager import GROUP_WRITE_ERRORS, GroupMetadataManager, OffsetsLog
from .offsets import OffsetsAndAdministration
from .params import GroupConfig, JoinGroupParams, LeavingMember, SyncGroupParams
from .records import group_metadata_key, group_metadata_value
from .state import (COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE,
                    ClassicGroup, JoinCallback, JoinResult, Member, SyncCallback, SyncResult)

log = logging.getLogger(__name__)

E = ErrorCode
UNKNOWN_MEMBER_ID = ""
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs


class GroupCoordinator(OffsetsAndAdministration):
    """Membership here; offsets and administration in ``offsets.py``."""

    def __init__(self, config: GroupConfig, offsets_log: OffsetsLog, clock: Callable[[], int],
                 new_uuid: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self.config = config
        self.clock = clock
        self.timer = Timer(clock)
        self.manager = GroupMetadataManager(offsets_log, clock)
        self._new_uuid = new_uuid

    # -- loading -------------------------------------------------------------------------------

    def load(self) -> None:
        """Become coordinator of every partition of ``__consumer_offsets`` not loaded yet (a
        single broker leads them all), rebuilding its groups from the log."""
        self.manager.partition_count = self.manager.offsets_log.partition_count
        for partition in range(self.manager.partition_count):
            if partition not in self.manager.owned_partitions:
                self.load_partition(partition)

    def load_partition(self, partition: int) -> None:
        for group in self.manager.load_partition(partition):
            # Loaded members must heartbeat within a session of the load (Kafka's
            # onGroupLoaded), so a restart mid-group keeps live members in their generation.
            for member in group.members.values():
                self._schedule_heartbeat(group, member)

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating a partition: held responses get NOT_COORDINATOR, so clients look
        for the new coordinator (Kafka's ``onResignation``)."""
        for group in self.manager.unload_partition(partition):
            for member in group.members.values():
                group.invoke_join_callback(member, JoinResult(E.NOT_COORDINATOR, member.member_id))
                group.invoke_sync_callback(member, SyncResult(E.NOT_COORDINATOR))
            self._cancel_group_timers(group)
            group.transition_to(DEAD, self.clock())

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    def is_coordinator_for(self, group_id: str) -> bool:
        return self.manager.is_coordinator_for(group_id)

    def _check_group_id(self, group_id: str | None, allow_empty: bool = False) -> ErrorCode:
        """Kafka's ``validateGroupStatus``: OffsetCommit, OffsetFetch, DescribeGroups and
        DeleteGroups accept the empty group id (older clients used it); the others do not."""
        if group_id is None or (not group_id and not allow_empty):
            return E.INVALID_GROUP_ID
        if not self.manager.is_coordinator_for(group_id):
            return E.NOT_COORDINATOR
        return E.NONE

    # -- JoinGroup -------------------------------------------------------------------------------

    def join_group(self, params: JoinGroupParams, callback: JoinCallback) -> None:
        """Answer now, or hold ``callback`` until the rebalance completes."""
        error = self._check_group_id(params.group_id)
        if error is E.NONE and not (self.config.min_session_timeout_ms
                                    <= params.session_timeout_ms
                                    <= self.config.max_session_timeout_ms):
            error = E.INVALID_SESSION_TIMEOUT
        if error is not E.NONE:
            callback(JoinResult(error, params.member_id))
            return
        is_unknown = params.member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get(params.group_id)
        if group is None:
            if not is_unknown:
                callback(JoinResult(E.UNKNOWN_MEMBER_ID, params.member_id))
                return
            group = self.manager.add(ClassicGroup(params.group_id,
                                                  current_state_timestamp_ms=self.clock()))
        if is_unknown:
            self._join_new_member(group, params, callback)
        else:
            self._join_current_member(group, params, callback)
        self._try_complete_join(group)
        group.check_invariants()

    def _join_new_member(self, group: ClassicGroup, params: JoinGroupParams,
                         callback: JoinCallback) -> None:
        if group.is_in(DEAD):
            callback(JoinResult(E.COORDINATOR_NOT_AVAILABLE, params.member_id))
            return
        if not group.supports_protocols(params.protocol_type, params.protocols):
            callback(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, params.member_id))
            return
        member_id = f"{params.group_instance_id or params.client_id}-{self._new_uuid()}"
        if params.group_instance_id is not None:
            old_member_id = group.static_members.get(params.group_instance_id)
            if old_member_id is not None:
                log.info("group %r: static member %r rejoined without its member id; %s "
                         "replaces %s", group.group_id, params.group_instance_id, member_id,
                         old_member_id)
                self._replace_static_member(group, old_member_id, member_id, params, callback)
            else:
                self._add_member_and_rebalance(group, member_id, params, callback)
        elif params.require_known_member_id:
            # KIP-394: hand out the id first; the member is added when it comes back with it.
            group.pending_members.add(member_id)
            self.timer.schedule(("pending", group.group_id, member_id),
                                params.session_timeout_ms,
                                lambda: self._expire_pending_member(group.group_id, member_id))
            callback(JoinResult(E.MEMBER_ID_REQUIRED, member_id))
        else:
            self._add_member_and_rebalance(group, member_id, params, callback)

    def _join_current_member(self, group: ClassicGroup, params: JoinGroupParams,
                             callback: JoinCallback) -> None:
        member_id, instance_id = params.member_id, params.group_instance_id
        if group.is_in(DEAD):
            callback(JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id))
        elif not group.supports_protocols(params.protocol_type, params.protocols):
            callback(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
        elif member_id in group.pending_members:
            if instance_id is not None:  # pending ids are only given to dynamic members
                callback(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))
                return
            self.timer.cancel(("pending", group.group_id, member_id))
            self._add_member_and_rebalance(group, member_id, params, callback)
        elif group.is_static_member_fenced(instance_id, member_id):
            callback(JoinResult(E.FENCED_INSTANCE_ID, member_id))
        elif not group.has(member_id) or (instance_id is not None
                                          and instance_id not in group.static_members):
            callback(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))
        else:
            self._rejoin(group, group.members[member_id], params, callback)

    def _rejoin(self, group: ClassicGroup, member: Member, params: JoinGroupParams,
                callback: JoinCallback) -> None:
        """A known member joins again (Kafka's ``doCurrentMemberJoinGroup``, by state)."""
        if group.is_in(PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, params, callback, "rejoined")
        elif group.is_in(COMPLETING_REBALANCE):
            if member.matches(params.protocols):
                # It probably lost the JoinGroup response: send this generation's again.
                callback(self._join_result(group, member.member_id))
            else:
                self._update_member_and_rebalance(group, member, params, callback,
                                                  "changed its metadata")
        elif group.is_in(STABLE):
            if group.is_leader(member.member_id) or not member.matches(params.protocols):
                # The leader rejoins to make the group rebalance for changes only it sees
                # (topic metadata); a follower with new metadata does too.
                self._update_member_and_rebalance(group, member, params, callback,
                                                  "rejoined the stable group")
            else:
                callback(self._join_result(group, member.member_id, with_members=False))
        else:  # EMPTY cannot hold members; answer so the member resets and rejoins
            callback(JoinResult(E.UNKNOWN_MEMBER_ID, member.member_id))

    def _join_result(self, group: ClassicGroup, member_id: str,
                     with_members: bool = True) -> JoinResult:
        members = (group.current_member_metadata()
                   if with_members and group.is_leader(member_id) else ())
        return JoinResult(E.NONE, member_id, group.generation_id, group.protocol_type,
                          group.protocol_name, group.leader_id or "", False, members)

    def _add_member_and_rebalance(self, group: ClassicGroup, member_id: str,
                                  params: JoinGroupParams, callback: JoinCallback) -> None:
        member = Member(member_id, params.group_instance_id, params.client_id,
                        params.client_host, params.rebalance_timeout_ms,
                        params.session_timeout_ms, params.protocol_type, list(params.protocols),
                        is_new=True)
        if group.is_in(PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # extends the initial join delay
        group.add(member, callback)
        # A new member has no member id to heartbeat with until its join completes; a dead
        # one must still go eventually, hence a long timeout instead of the session's.
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")

    def _update_member_and_rebalance(self, group: ClassicGroup, member: Member,
                                     params: JoinGroupParams, callback: JoinCallback,
                                     why: str) -> None:
        group.update_member(member, list(params.protocols), params.rebalance_timeout_ms,
                            params.session_timeout_ms, callback)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} {why}")

    def _replace_static_member(self, group: ClassicGroup, old_member_id: str,
                               new_member_id: str, params: JoinGroupParams,
                               callback: JoinCallback) -> None:
        """KIP-345: a restarted static member takes over its old identity without a
        rebalance, unless the group is mid-rebalance or its protocols change the group's
        (Kafka's ``updateStaticMemberAndRebalance``)."""
        instance_id = params.group_instance_id
        assert instance_id is not None, "only a static member is replaced"
        previous_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.timer.cancel(("heartbeat", group.group_id, old_member_id))
        self._schedule_heartbeat(group, member)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, list(params.protocols), params.rebalance_timeout_ms,
                            params.session_timeout_ms, callback)
        if group.is_in(STABLE):
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance(group, f"static member {instance_id} changes "
                                                     "the group's protocol")
                return
            error = self._store_group(group)
            if error is not E.NONE:
                group.update_member(member, *old, None)
                group.replace_static_member(instance_id, new_member_id, old_member_id)
                self.timer.cancel(("heartbeat", group.group_id, new_member_id))
                self._schedule_heartbeat(group, member)
                callback(JoinResult(error, UNKNOWN_MEMBER_ID, group.generation_id,
                                    group.protocol_type, group.protocol_name,
                                    previous_leader or ""))
            elif params.supports_skip_assignment:
                # KIP-814: the leader learns it leads, but must not run the assignor: the
                # group is stable and would ignore a new assignment.
                is_leader = group.is_leader(new_member_id)
                group.invoke_join_callback(member, JoinResult(
                    E.NONE, new_member_id, group.generation_id, group.protocol_type,
                    group.protocol_name, group.leader_id or "", is_leader,
                    group.current_member_metadata() if is_leader else ()))
            else:
                # Before v9, answer with the old leader id, so a returning leader does not
                # believe it leads and compute an assignment nobody would use.
                group.invoke_join_callback(member, JoinResult(
                    E.NONE, new_member_id, group.generation_id, group.protocol_type,
                    group.protocol_name, previous_leader or ""))
        elif group.is_in(COMPLETING_REBALANCE):
            # The leader may be assigning to the old member id: start over.
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during "
                                           "CompletingRebalance")
        # PREPARING_REBALANCE: the member simply waits for the join to complete.

    # -- rebalances ------------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        self.timer.cancel(("sync", group.group_id))
        was_empty = group.is_in(EMPTY)
        group.transition_to(PREPARING_REBALANCE, self.clock())
        log.info("group %r: preparing to rebalance from generation %d (%s)", group.group_id,
                 group.generation_id, reason)
        if was_empty:
            delay_ms = self.config.initial_rebalance_delay_ms
            self._schedule_initial_join(group, delay_ms,
                                        max(group.rebalance_timeout_ms - delay_ms, 0))
        else:
            self._schedule_join(group, group.rebalance_timeout_ms)

    def _schedule_initial_join(self, group: ClassicGroup, delay_ms: int,
                               remaining_ms: int) -> None:
        """KIP-134: a group starting from EMPTY waits ``group.initial.rebalance.delay.ms``
        for more members, again while new ones keep arriving, up to the rebalance timeout."""
        group.initial_join_remaining_ms = remaining_ms
        group_id = group.group_id

        def expire() -> None:
            current = self.manager.get(group_id)
            if current is None or not current.is_in(PREPARING_REBALANCE):
                return
            if current.new_member_added and remaining_ms != 0:
                current.new_member_added = False
                self._schedule_initial_join(
                    current, min(self.config.initial_rebalance_delay_ms, remaining_ms),
                    max(remaining_ms - delay_ms, 0))
            else:
                self._complete_join(current)

        self.timer.schedule(("join", group_id), delay_ms, expire)

    def _schedule_join(self, group: ClassicGroup, timeout_ms: int) -> None:
        group.initial_join_remaining_ms = None
        group_id = group.group_id

        def expire() -> None:
            current = self.manager.get(group_id)
            if current is not None and current.is_in(PREPARING_REBALANCE):
                self._complete_join(current)

        self.timer.schedule(("join", group_id), timeout_ms, expire)
        self._try_complete_join(group)

    def _try_complete_join(self, group: ClassicGroup) -> None:
        """Complete the join as soon as every known member has rejoined (not during the
        initial delay, which always runs its course, as Kafka's InitialDelayedJoin does)."""
        if (group.is_in(PREPARING_REBALANCE) and group.initial_join_remaining_ms is None
                and group.has_all_members_joined()):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """Kafka's ``onCompleteJoin``: drop dynamic members that did not rejoin, start the
        next generation and answer every held JoinGroup."""
        self.timer.cancel(("join", group.group_id))
        group.initial_join_remaining_ms = None
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("group %r: member %s did not rejoin in time; removing it",
                         group.group_id, member.member_id)
                self._remove_member(group, member)
        if group.is_in(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members remain and none rejoined: wait for them, or for their
            # sessions to expire.
            log.warning("group %r: no member rejoined; waiting another rebalance timeout",
                        group.group_id)
            self._schedule_join(group, group.rebalance_timeout_ms)
            return
        group.init_next_generation(self.clock())
        if group.is_in(EMPTY):
            log.info("group %r: generation %d is empty", group.group_id, group.generation_id)
            error = self._store_group(group)
            if error is not E.NONE:  # the previous generation may reappear after a restart
                log.warning("group %r: the empty generation was not written: %s",
                            group.group_id, error.name)
            return
        log.info("group %r: generation %d with %d members (leader %s, protocol %s)",
                 group.group_id, group.generation_id, len(group.members), group.leader_id,
                 group.protocol_name)
        for member in list(group.members.values()):
            group.invoke_join_callback(member, self._join_result(group, member.member_id))
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    def _schedule_pending_sync(self, group: ClassicGroup) -> None:
        group_id, generation_id = group.group_id, group.generation_id

        def expire() -> None:
            current = self.manager.get(group_id)
            if (current is None or current.generation_id != generation_id
                    or not current.is_in(COMPLETING_REBALANCE, STABLE)
                    or not current.pending_sync_members):
                return
            missing = sorted(current.pending_sync_members)
            for member_id in missing:
                self._remove_member(current, current.members[member_id])
            self._prepare_rebalance(current, f"members {missing} sent no SyncGroup in time")

        self.timer.schedule(("sync", group_id), group.rebalance_timeout_ms, expire)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self.timer.cancel(("sync", group.group_id))

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup,
                                              error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            group.invoke_sync_callback(member, SyncResult(error))

    def _set_and_propagate_assignment(self, group: ClassicGroup,
                                      assignments: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignments[member.member_id]
            group.invoke_sync_callback(member, SyncResult(E.NONE, group.protocol_type,
                                                          group.protocol_name,
                                                          member.assignment))
            self._schedule_heartbeat(group, member)

    def _store_group(self, group: ClassicGroup,
                     assignments: dict[str, bytes] | None = None) -> ErrorCode:
        record = group_metadata_value(group.to_record(assignments))
        return self.manager.store(group.group_id, [(group_metadata_key(group.group_id), record)],
                                  replay=False, errors=GROUP_WRITE_ERRORS)

    # -- SyncGroup -------------------------------------------------------------------------------

    def sync_group(self, params: SyncGroupParams, callback: SyncCallback) -> None:
        error = self._check_group_id(params.group_id)
        group = self.manager.get(params.group_id) if error is E.NONE else None
        if error is E.NONE:
            error = self._check_sync(group, params)
        if error is not E.NONE:
            callback(SyncResult(error))
            return
        assert group is not None  # _check_sync refuses a group that does not exist
        member = group.members[params.member_id]
        if group.is_in(STABLE):
            self._remove_pending_sync_member(group, member.member_id)
            self._schedule_heartbeat(group, member)
            callback(SyncResult(E.NONE, group.protocol_type, group.protocol_name,
                                member.assignment))
            return
        # COMPLETING_REBALANCE: hold the response until the leader's assignment is stored.
        group.invoke_sync_callback(member, SyncResult(E.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = callback
        self._remove_pending_sync_member(group, member.member_id)
        if group.is_leader(member.member_id):
            assignments = {m: params.assignments.get(m, b"") for m in group.members}
            missing = [m for m in group.members if m not in params.assignments]
            if missing:
                log.warning("group %r: the leader assigned nothing to %s in generation %d",
                            group.group_id, missing, group.generation_id)
            error = self._store_group(group, assignments)
            if error is not E.NONE:
                self._reset_and_propagate_assignment_error(group, error)
                self._maybe_prepare_rebalance(group, "storing the assignment failed")
            else:
                self._set_and_propagate_assignment(group, assignments)
                group.transition_to(STABLE, self.clock())
                log.info("group %r: generation %d is stable", group.group_id,
                         group.generation_id)
        group.check_invariants()

    def _check_sync(self, group: ClassicGroup | None, params: SyncGroupParams) -> ErrorCode:
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_in(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(params.group_instance_id, params.member_id):
            return E.FENCED_INSTANCE_ID
        if not group.has(params.member_id):
            return E.UNKNOWN_MEMBER_ID
        if params.generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if params.protocol_type is not None and params.protocol_type != group.protocol_type:
            return E.INCONSISTENT_GROUP_PROTOCOL
        if params.protocol_name is not None and params.protocol_name != group.protocol_name:
            return E.INCONSISTENT_GROUP_PROTOCOL
        if group.is_in(EMPTY):
            return E.UNKNOWN_MEMBER_ID
        if group.is_in(PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # -- Heartbeat and LeaveGroup ------------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        error = self._check_group_id(group_id)
        if error is not E.NONE:
            return error
        group = self.manager.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        error = self._check_member(group, member_id, group_instance_id, generation_id)
        if error is not E.NONE:
            return error
        if group.is_in(EMPTY):
            return E.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.members[member_id])
        return E.REBALANCE_IN_PROGRESS if group.is_in(PREPARING_REBALANCE) else E.NONE

    def _check_member(self, group: ClassicGroup, member_id: str, group_instance_id: str | None,
                      generation_id: int) -> ErrorCode:
        if group.is_in(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(group_instance_id, member_id):
            return E.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        return E.NONE

    def leave_group(self, group_id: str,
                    leaving: list[LeavingMember]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(group error, one error per leaving member), as LeaveGroup v3+ reports them."""
        error = self._check_group_id(group_id)
        if error is not E.NONE:
            return error, []
        group = self.manager.get(group_id)
        if group is None:
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_in(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, []
        results = [self._leave(group, member) for member in leaving]
        group.check_invariants()
        return E.NONE, results

    def _leave(self, group: ClassicGroup, leaving: LeavingMember) -> ErrorCode:
        member_id = leaving.member_id
        if member_id == UNKNOWN_MEMBER_ID:
            # An administrator removing a static member by its instance id (KIP-345).
            static_member_id = group.static_members.get(leaving.group_instance_id or "")
            if static_member_id is None:
                return E.UNKNOWN_MEMBER_ID
            member_id = static_member_id
        elif member_id in group.pending_members:
            self._remove_pending_member(group, member_id)
            return E.NONE
        elif group.is_static_member_fenced(leaving.group_instance_id, member_id):
            return E.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return E.UNKNOWN_MEMBER_ID
        log.info("group %r: member %s left (%s)", group.group_id, member_id,
                 leaving.reason or "no reason given")
        self._remove_member_and_update_group(group, group.members[member_id])
        return E.NONE

    def _remove_member(self, group: ClassicGroup, member: Member) -> None:
        """Remove a member and its deadline; answer whatever it still holds."""
        group.invoke_join_callback(member, JoinResult(E.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
        group.invoke_sync_callback(member, SyncResult(E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self.timer.cancel(("heartbeat", group.group_id, member.member_id))

    def _remove_member_and_update_group(self, group: ClassicGroup, member: Member) -> None:
        self._remove_member(group, member)
        if group.is_in(STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"member {member.member_id} is gone")
        elif group.is_in(PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        group.remove(member_id)
        self.timer.cancel(("pending", group.group_id, member_id))
        self._try_complete_join(group)

    def _expire_pending_member(self, group_id: str, member_id: str) -> None:
        group = self.manager.get(group_id)
        if group is not None and member_id in group.pending_members:
            # DEBUG, not Kafka's INFO: every JoinGroup without a member id makes a pending
            # member, so a client repeating one would otherwise write a log line per request
            # (the broker fuzzer's 1,000,000 frames left 36,775 of these).
            log.debug("group %r: pending member %s never came back; forgetting it", group_id,
                     member_id)
            self._remove_pending_member(group, member_id)

    # -- sessions ---------------------------------------------------------------------------------

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member,
                            timeout_ms: int | None = None) -> None:
        group_id, member_id = group.group_id, member.member_id
        self.timer.schedule(("heartbeat", group_id, member_id),
                            member.session_timeout_ms if timeout_ms is None else timeout_ms,
                            lambda: self._expire_heartbeat(group_id, member_id))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.manager.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or group.is_in(DEAD):
            return
        if not member.is_new and (member.awaiting_join is not None
                                  or member.awaiting_sync is not None):
            return  # waiting on the coordinator counts as alive; the rebalance bounds it
        if not self.manager.is_coordinator_for(group_id):
            # Our leadership lease ran out (we were paused or cut off): the member may well be
            # heartbeating to the coordinator that replaced us. Removing it here would answer
            # its next request UNKNOWN_MEMBER_ID from stale state; look again later instead.
            self._schedule_heartbeat(group, member)
            return
        log.info("group %r: member %s sent no heartbeat within %d ms; removing it", group_id,
                 member_id, NEW_MEMBER_JOIN_TIMEOUT_MS if member.is_new
                 else member.session_timeout_ms)
        self._remove_member_and_update_group(group, member)
        group.check_invariants()

    def _cancel_group_timers(self, group: ClassicGroup) -> None:
        for member_id in group.members:
            self.timer.cancel(("heartbeat", group.group_id, member_id))
        for member_id in group.pending_members:
            self.timer.cancel(("pending", group.group_id, member_id))
        self.timer.cancel(("join", group.group_id))
        self.timer.cancel(("sync", group.group_id))
