"""Leader elections: what a partition's state becomes when brokers come and go (pure rules,
after Kafka's ``PartitionLeaderElectionAlgorithms`` and ``ReplicaStateMachine``).

``on_brokers_changed`` is the controller's rule, applied to every partition whenever the set
of live brokers changes:

- a live leader keeps leading; dead followers leave the ISR (the leader epoch stays: only a
  leader change bumps it);
- a dead (or absent) leader is replaced by the first live ISR member in assignment order
  (the preferred replica first) — a *clean* election: every acknowledged acks=all write is
  on it;
- with no live ISR member, ``unclean.leader.election.enable=true`` elects the first live
  replica anyway, which becomes the whole ISR: records only the old ISR had are lost, and
  the partition is available again; with it false the partition stays offline (no leader,
  the last ISR kept) until an ISR member returns — unavailability instead of loss.

``for_controlled_shutdown`` moves leadership away from a broker that is stopping (SIGTERM):
to another live ISR member, with the stopping broker removed from the ISR so that
acks=all does not wait for it. A partition whose ISR is the stopping broker alone keeps it
as leader (nowhere to move without losing data), as Kafka's controlled shutdown does.

Every election bumps the leader epoch (``PartitionState.elect``).
"""

from __future__ import annotations

from dataclasses import replace

from .store import NO_LEADER, PartitionState


def on_brokers_changed(state: PartitionState, replicas: tuple[int, ...], live: set[int],
                       unclean: bool) -> PartitionState | None:
    """The state after a change of live brokers, or None when nothing changes."""
    live_isr = tuple(r for r in state.isr if r in live)
    if state.has_leader and state.leader in live:
        if live_isr != state.isr:
            return replace(state, isr=live_isr)
        return None
    in_order = [r for r in replicas if r in live_isr]
    if in_order:
        return state.elect(in_order[0], live_isr)
    live_replicas = [r for r in replicas if r in live]
    if unclean and live_replicas:
        return state.elect(live_replicas[0], (live_replicas[0],))
    if not state.has_leader:
        return None
    # Offline: keep the last ISR, so the first of them to return is elected cleanly.
    return state.elect(NO_LEADER, state.isr)


def for_controlled_shutdown(state: PartitionState, replicas: tuple[int, ...], live: set[int],
                            leaving: int) -> PartitionState | None:
    """The state that moves leadership (and ISR membership) off ``leaving``, or None."""
    if leaving not in state.isr:
        return None
    others = [r for r in replicas if r in state.isr and r in live and r != leaving]
    if not others:
        return None
    isr = tuple(r for r in state.isr if r != leaving)
    if state.leader == leaving:
        return state.elect(others[0], isr)
    return replace(state, isr=isr)
