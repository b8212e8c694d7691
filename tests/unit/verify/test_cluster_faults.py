"""Which broker a cluster fault hits: the leader of the most partitions for kill-leader, a
seeded pick otherwise - the same pick for the same seed and fault. (The faults themselves
run against real processes in tests/fault/test_verify_cluster.py; here only the choice,
over a cluster object that records what was asked of it.)"""

from __future__ import annotations

from oncelog.verify.faults.cluster import (ClusterTarget, KillClusterBroker, KillLeader,
                                           PartitionView, PauseBroker)
from oncelog.verify.schedule import ScheduledFault


class RecordingCluster:
    """Three brokers that are always running; remembers kills, pauses and resumes."""

    def __init__(self) -> None:
        self.brokers = {1: None, 2: None, 3: None}
        self.actions: list[tuple[str, int]] = []

    def is_running(self, node_id: int) -> bool:
        return True

    def broker(self, node_id: int):
        return type("Broker", (), {"pid": 1000 + node_id, "bootstrap": f"h:{node_id}"})()

    def kill(self, node_id: int) -> None:
        self.actions.append(("kill", node_id))

    def pause(self, node_id: int) -> None:
        self.actions.append(("pause", node_id))

    def resume(self, node_id: int) -> None:
        self.actions.append(("resume", node_id))


class Target(ClusterTarget):
    def __init__(self, led: dict[int, list[int]], seed: int = 7) -> None:
        super().__init__(RecordingCluster(), "t", 3, seed=seed, session_timeout_ms=5000)
        self.led = led

    def leaderships(self) -> dict[int, list[int]]:
        return self.led


def test_kill_leader_takes_the_broker_leading_the_most_partitions():
    target = Target({1: [0], 3: [1, 2]})
    detail = KillLeader(target).inject(ScheduledFault(4.0, "kill-leader"))
    assert target.cluster.actions == [("kill", 3)]
    assert detail == {"broker": 3, "led": [1, 2], "pid": 1003, "signal": "SIGKILL",
                      "running": True}


def test_kill_leader_breaks_ties_by_the_lowest_node_id():
    target = Target({3: [2], 2: [1], 1: [0]})
    assert KillLeader(target).choose(ScheduledFault(4.0, "kill-leader"), target.led) == 1


def test_seeded_picks_repeat_for_the_same_seed_and_fault_and_vary_across_faults():
    picks = [Target({}, seed=5).pick(ScheduledFault(at_s, "kill-broker"), [1, 2, 3])
             for at_s in (3.0, 9.5, 14.25, 20.0, 31.5, 40.0)]
    again = [Target({}, seed=5).pick(ScheduledFault(at_s, "kill-broker"), [1, 2, 3])
             for at_s in (3.0, 9.5, 14.25, 20.0, 31.5, 40.0)]
    assert picks == again and len(set(picks)) > 1
    assert KillClusterBroker(Target({})).choose(ScheduledFault(3.0, "kill-broker"), {}) in \
        (1, 2, 3)


def test_pause_picks_a_leader_and_heals_with_sigcont():
    target = Target({2: [0, 1, 2]})
    pause = PauseBroker(target)
    detail = pause.inject(ScheduledFault(5.0, "pause-broker", {"duration_s": 6.5}))
    assert detail["broker"] == 2 and detail["led"] == [0, 1, 2]
    assert detail["outlasts_session"] is True and target.paused == {2}
    assert target.live() == [1, 3] and not target.recovered()  # paused: never ready
    healed = pause.heal()
    assert healed["signal"] == "SIGCONT" and target.paused == set()
    assert target.cluster.actions == [("pause", 2), ("resume", 2)]


def test_a_partition_is_healthy_with_a_leader_and_every_replica_in_sync():
    assert PartitionView(1, (1, 2, 3), (3, 1, 2)).healthy
    assert not PartitionView(1, (1, 2, 3), (1, 2)).healthy
    assert not PartitionView(-1, (1, 2, 3), (1, 2, 3)).healthy
