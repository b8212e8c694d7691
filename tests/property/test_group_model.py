"""The group coordinator under random storms of joins, syncs, heartbeats, leaves, commits,
time passing and restarts, checked against a model of the committed offsets.

Clients act on what they last heard (member id, generation), as real ones do, so they send
stale generations and unknown member ids. After every step:
- the group's own invariants hold (``ClassicGroup.check_invariants``);
- it is never wedged: a rebalancing group has a deadline that moves it on, and every member
  either waits on the coordinator or has a session deadline;
- every commit the coordinator acknowledged is what OffsetFetch returns, before and after a
  restart that rebuilds the coordinator from ``__consumer_offsets``.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from oncelog.coordinator.group import GroupState
from oncelog.protocol.errors import ErrorCode as E

from ..unit.coordinator.harness import REBALANCE_MS, SESSION_MS, Groups

GROUP = "storm"
CLIENTS = 4
PARTITIONS = [("t", 0), ("t", 1), ("u", 0)]


class Client:
    def __init__(self) -> None:
        self.member_id = ""
        self.generation = -1
        self.join = None  # an Answer still being waited on
        self.sync = None


class GroupStorm(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.groups = Groups(initial_rebalance_delay_ms=100)
        self.clients = [Client() for _ in range(CLIENTS)]
        self.committed: dict[tuple[str, int], int] = {}

    # -- what clients hear back ------------------------------------------------------------------

    def _collect(self) -> None:
        for client in self.clients:
            if client.join is not None and client.join.done:
                result = client.join.results[-1]
                client.join = None
                if result.error is E.NONE:
                    client.member_id, client.generation = result.member_id, result.generation_id
                elif result.error is E.MEMBER_ID_REQUIRED:
                    client.member_id = result.member_id
                elif result.error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
                    client.member_id, client.generation = "", -1
            if client.sync is not None and client.sync.done:
                client.sync = None

    # -- rules ------------------------------------------------------------------------------------

    @rule(index=st.integers(0, CLIENTS - 1))
    def join(self, index):
        client = self.clients[index]
        client.join = self.groups.join(GROUP, client.member_id)
        self._collect()

    @rule()
    def cooperate(self):
        """Well-behaved clients: those in the middle of joining finish, time passes to the
        end of the join delay, and everyone who got a generation syncs, the leader first."""
        for client in self.clients:
            if client.join is None and client.member_id and client.generation < 0:
                client.join = self.groups.join(GROUP, client.member_id)
        self.groups.advance(100)
        self._collect()
        group = self.groups.group(GROUP)
        leader = group.leader_id if group is not None else None
        for index in sorted(range(CLIENTS), key=lambda i: self.clients[i].member_id != leader):
            self.sync(index)

    @rule(index=st.integers(0, CLIENTS - 1))
    def sync(self, index):
        client = self.clients[index]
        if client.generation < 0:
            return
        group = self.groups.group(GROUP)
        assignments = None
        if group is not None and group.leader_id == client.member_id:
            assignments = {m: m.encode() for m in group.members}
        client.sync = self.groups.sync(GROUP, client.member_id, client.generation, assignments)
        self._collect()

    @rule(index=st.integers(0, CLIENTS - 1))
    def heartbeat(self, index):
        client = self.clients[index]
        if client.member_id:
            error = self.groups.heartbeat(GROUP, client.member_id, client.generation)
            if error is E.UNKNOWN_MEMBER_ID:
                client.member_id, client.generation = "", -1

    @rule(index=st.integers(0, CLIENTS - 1))
    def leave(self, index):
        client = self.clients[index]
        if client.member_id:
            self.groups.leave(GROUP, client.member_id)
            client.member_id, client.generation = "", -1
        self._collect()

    @rule(index=st.integers(0, CLIENTS - 1), partition=st.sampled_from(PARTITIONS),
          offset=st.integers(0, 10_000))
    def commit(self, index, partition, offset):
        client = self.clients[index]
        result = self.groups.commit(GROUP, client.member_id, client.generation,
                                    {partition: offset})
        if result[partition] is E.NONE:
            self.committed[partition] = offset

    @rule(partition=st.sampled_from(PARTITIONS), offset=st.integers(0, 10_000))
    def admin_commit(self, partition, offset):
        """An administrator resetting offsets: accepted only while the group is Empty (not
        merely without members: during the initial join delay it is still rebalancing)."""
        group = self.groups.group(GROUP)
        result = self.groups.commit(GROUP, "", -1, {partition: offset})
        assert (result[partition] is E.NONE) == (group is None or group.state is GroupState.EMPTY)
        if result[partition] is E.NONE:
            self.committed[partition] = offset

    @rule(ms=st.sampled_from([0, 1, 50, 100, SESSION_MS // 2, SESSION_MS, REBALANCE_MS]))
    def advance(self, ms):
        self.groups.advance(ms)
        self._collect()

    @rule()
    def restart(self):
        """The broker restarts: held requests die with their connections."""
        self.groups = self.groups.restarted()
        for client in self.clients:
            client.join = client.sync = None

    # -- invariants -------------------------------------------------------------------------------

    @invariant()
    def group_is_consistent(self):
        group = self.groups.group(GROUP)
        if group is not None:
            group.check_invariants()

    @invariant()
    def group_is_never_wedged(self):
        group = self.groups.group(GROUP)
        if group is None:
            return
        timer = self.groups.coordinator.timer
        if group.state is GroupState.PREPARING_REBALANCE:
            assert timer.is_scheduled(("join", GROUP))
        if group.state is GroupState.COMPLETING_REBALANCE:
            assert timer.is_scheduled(("sync", GROUP))
        for member_id, member in group.members.items():
            waiting = member.awaiting_join is not None or member.awaiting_sync is not None
            assert waiting or timer.is_scheduled(("heartbeat", GROUP, member_id)), member_id
        for member_id in group.pending_members:
            assert timer.is_scheduled(("pending", GROUP, member_id))

    @invariant()
    def acknowledged_commits_are_never_lost(self):
        error, offsets = self.groups.coordinator.fetch_offsets(GROUP, None)
        assert error is E.NONE
        assert {p: o.offset for p, o in offsets.items()} == self.committed

    def teardown(self):
        # Whatever happened, the group settles once time passes: everyone is gone.
        self.groups.advance(10 * REBALANCE_MS)
        group = self.groups.group(GROUP)
        if group is not None:
            assert group.state is GroupState.EMPTY and not group.members
        restarted = self.groups.restarted()
        error, offsets = restarted.coordinator.fetch_offsets(GROUP, None)
        assert {p: o.offset for p, o in offsets.items()} == self.committed


GroupStorm.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
test_group_storm = GroupStorm.TestCase
