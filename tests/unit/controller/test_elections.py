"""The controller's election rules (``controller.elections``), Given/When/Then: a partition
state and the live brokers, the rule, the state to write."""

from __future__ import annotations

from oncelog.controller.elections import for_controlled_shutdown, on_brokers_changed
from oncelog.controller.store import NO_LEADER, PartitionState

REPLICAS = (1, 2, 3)


def state(leader, epoch, *isr) -> PartitionState:
    return PartitionState(leader, epoch, tuple(isr), version=4)


def test_a_live_leader_keeps_leading_and_dead_followers_leave_the_isr():
    assert on_brokers_changed(state(1, 5, 1, 2, 3), REPLICAS, {1, 2}, False) \
        == state(1, 5, 1, 2)
    assert on_brokers_changed(state(1, 5, 1, 2), REPLICAS, {1, 2, 3}, False) is None


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member_with_a_new_epoch():
    new = on_brokers_changed(state(1, 5, 1, 2, 3), REPLICAS, {2, 3}, False)
    assert (new.leader, new.leader_epoch, new.isr) == (2, 6, (2, 3))


def test_the_preferred_order_is_the_assignment_not_the_isr_order():
    new = on_brokers_changed(state(1, 0, 1, 3, 2), REPLICAS, {2, 3}, False)
    assert new.leader == 2


def test_no_live_isr_member_and_clean_elections_only_leave_the_partition_offline():
    new = on_brokers_changed(state(1, 5, 1), REPLICAS, {2, 3}, False)
    assert (new.leader, new.leader_epoch, new.isr) == (NO_LEADER, 6, (1,))
    assert on_brokers_changed(new, REPLICAS, {2, 3}, False) is None  # stays offline


def test_the_last_isr_member_returning_is_elected():
    offline = state(NO_LEADER, 6, 1)
    new = on_brokers_changed(offline, REPLICAS, {1, 2}, False)
    assert (new.leader, new.leader_epoch, new.isr) == (1, 7, (1,))


def test_unclean_election_takes_any_live_replica_as_the_whole_isr():
    new = on_brokers_changed(state(1, 5, 1), REPLICAS, {3}, True)
    assert (new.leader, new.leader_epoch, new.isr) == (3, 6, (3,))


def test_controlled_shutdown_moves_leadership_to_another_isr_member():
    new = for_controlled_shutdown(state(1, 5, 1, 2, 3), REPLICAS, {2, 3}, leaving=1)
    assert (new.leader, new.leader_epoch, new.isr) == (2, 6, (2, 3))
    follower = for_controlled_shutdown(state(2, 5, 1, 2, 3), REPLICAS, {2, 3}, leaving=1)
    assert (follower.leader, follower.leader_epoch, follower.isr) == (2, 5, (2, 3))


def test_controlled_shutdown_keeps_a_sole_isr_member_leading():
    assert for_controlled_shutdown(state(1, 5, 1), REPLICAS, {2, 3}, leaving=1) is None
