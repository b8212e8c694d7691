"""The fault schedule: a pure function of its arguments, well spaced, and replayable."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from oncelog.verify.schedule import (CLUSTER_FAULTS, FAULTS, MAX_COUNT, MIN_GAP_S, WINDOW,
                                     FaultSchedule, ScheduledFault, parse_faults)


def test_the_same_seed_gives_the_same_schedule():
    first = FaultSchedule.generate(42, list(FAULTS), 120, "at-least-once")
    again = FaultSchedule.generate(42, list(FAULTS), 120, "at_least_once")
    assert first == again and len(first) >= len(FAULTS)
    assert FaultSchedule.generate(43, list(FAULTS), 120, "at-least-once") != first


def test_the_schedule_is_the_same_for_every_semantics():
    schedules = [FaultSchedule.generate(5, ["kill-broker", "drop-acks"], 60, semantics)
                 for semantics in ("at-most-once", "at-least-once", "exactly-once", "all")]
    assert all(s.faults == schedules[0].faults for s in schedules)
    assert [s.semantics for s in schedules] == ["at_most_once", "at_least_once",
                                                "exactly_once", "all"]


def test_a_known_schedule_is_stable_across_releases():
    """A recorded --seed must replay the same faults after the code changes: this golden
    schedule fails the test if the generator's use of its random source changes."""
    schedule = FaultSchedule.generate(7, ["kill-broker", "drop-acks"], 60, "exactly-once")
    assert list(schedule) == [
        ScheduledFault(10.9, "kill-broker", {"duration_s": 1.308, "signal": "SIGKILL"}),
        ScheduledFault(24.29, "drop-acks", {"duration_s": 2.197, "rate": 0.43, "mode": "close",
                                             "seed": 161042648}),
        ScheduledFault(33.132, "drop-acks", {"duration_s": 4.666, "rate": 0.35,
                                              "mode": "close", "seed": 1862494042}),
        ScheduledFault(42.267, "kill-broker", {"duration_s": 2.941, "signal": "SIGKILL"}),
    ]


def test_an_unknown_fault_is_one_sentence_naming_the_valid_ones():
    with pytest.raises(ValueError) as error:
        FaultSchedule.generate(1, ["kill-broker", "unplug-datacenter"], 60, "all")
    message = str(error.value)
    assert message == ("unknown fault 'unplug-datacenter'; valid faults are kill-broker, "
                       "kill-consumer, kill-driver, drop-acks, kill-leader, pause-broker, "
                       "kill-executor, partition-leader, isolate-zookeeper, split, cut-link "
                       "and slow-net")
    assert "\n" not in message


def test_a_known_cluster_schedule_is_stable_across_releases():
    """The cluster faults' golden schedule: kill-leader is a kill -9 for 1-3 s like the
    other kills; pause-broker is a SIGSTOP for 2-9 s, healed with SIGCONT. Which broker
    each hits is decided when it happens, so it is not in the schedule."""
    schedule = FaultSchedule.generate(31, ["kill-leader", "pause-broker"], 25, "at-least-once")
    assert list(schedule) == [
        ScheduledFault(4.104, "kill-leader", {"duration_s": 1.961, "signal": "SIGKILL"}),
        ScheduledFault(8.864, "pause-broker", {"duration_s": 8.258, "signal": "SIGSTOP"}),
    ]


def test_adding_the_cluster_faults_left_every_older_schedule_alone():
    """The generator draws from one random source in the order of the requested kinds; new
    kinds only add draws when they are requested, so a recorded seed replays as before."""
    older = ["kill-broker", "kill-consumer", "kill-driver", "drop-acks"]
    schedule = FaultSchedule.generate(2024, older, 90, "all")
    assert not {fault.name for fault in schedule} & set(CLUSTER_FAULTS)
    assert schedule == FaultSchedule.generate(2024, older, 90, "all")
    assert set(CLUSTER_FAULTS) < set(FAULTS)


def test_network_partitions_are_scheduled_like_the_other_cluster_faults():
    """Each network partition lasts on either side of the 5 s session (cut-link 3-8 s,
    slow-net 5-10 s), and asking for them leaves the older kinds' draws alone."""
    from oncelog.verify.schedule import NETWORK_FAULTS
    assert set(NETWORK_FAULTS) < set(CLUSTER_FAULTS) < set(FAULTS)
    durations: dict[str, list[float]] = {}
    for seed in range(40):
        for fault in FaultSchedule.generate(seed, list(NETWORK_FAULTS), 120, "at-least-once"):
            assert fault.params["signal"] == "network"
            durations.setdefault(fault.name, []).append(fault.params["duration_s"])
    assert set(durations) == set(NETWORK_FAULTS)
    for name in ("partition-leader", "isolate-zookeeper", "split"):
        assert min(durations[name]) < 5 < max(durations[name]) <= 10
    assert 3 <= min(durations["cut-link"]) and max(durations["cut-link"]) <= 8
    assert 5 <= min(durations["slow-net"]) and max(durations["slow-net"]) <= 10


def test_pauses_sometimes_outlast_the_verify_clusters_zookeeper_session():
    """pause-broker lasts 2-9 s: on either side of the 5 s ZooKeeper session a verify
    cluster runs with, so a paused broker sometimes keeps its session and sometimes loses
    it (and with it its leaderships)."""
    from oncelog.verify.runner import SESSION_TIMEOUT_MS
    pauses = [fault.params["duration_s"] for seed in range(100)
              for fault in FaultSchedule.generate(seed, ["pause-broker"], 120, "all")]
    assert all(2.0 <= pause <= 9.0 for pause in pauses)
    assert any(pause * 1000 < SESSION_TIMEOUT_MS for pause in pauses)
    assert any(pause * 1000 > SESSION_TIMEOUT_MS for pause in pauses)


def test_other_bad_arguments():
    with pytest.raises(ValueError, match="too short"):
        FaultSchedule.generate(1, list(FAULTS), 10, "all")
    with pytest.raises(ValueError, match="positive"):
        FaultSchedule.generate(1, [], 0, "all")
    with pytest.raises(ValueError, match="integer"):
        FaultSchedule.generate("1", [], 10, "all")
    with pytest.raises(ValueError, match="unknown semantics"):
        FaultSchedule.generate(1, [], 10, "twice")


def test_no_faults_is_an_empty_schedule():
    schedule = FaultSchedule.generate(1, [], 5, "exactly-once")
    assert list(schedule) == [] and schedule.timeline() == []


def test_parse_faults():
    assert parse_faults("kill-broker, drop-acks,") == ["kill-broker", "drop-acks"]
    with pytest.raises(ValueError, match="valid faults are"):
        parse_faults("kill-broker,kill-zookeeper")


def test_json_round_trip():
    schedule = FaultSchedule.generate(2024, list(FAULTS), 90, "all")
    restored = FaultSchedule.from_json(schedule.to_json())
    assert restored == schedule
    assert restored.to_json() == schedule.to_json()


def test_timeline_pairs_every_injection_with_its_heal():
    schedule = FaultSchedule.generate(9, ["kill-consumer", "drop-acks"], 60, "all")
    timeline = schedule.timeline()
    assert [t for t, _, _ in timeline] == sorted(t for t, _, _ in timeline)
    assert [action for _, _, action in timeline] == ["inject", "heal"] * len(schedule)
    drop = next(fault for fault in schedule if fault.name == "drop-acks")
    assert 0.3 <= drop.params["rate"] <= 0.7 and drop.params["mode"] == "close"
    assert isinstance(drop.params["seed"], int)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**64), duration_s=st.floats(45, 1800),
       kinds=st.lists(st.sampled_from(FAULTS), unique=True, max_size=len(FAULTS)))
def test_any_schedule_is_well_spaced_and_complete(seed, duration_s, kinds):
    # every kind at its shortest, with the gaps between, inside the middle 70 % of the run:
    # all twelve kinds need about 69 s (the network partitions last 3 s or more each)
    from oncelog.verify.schedule import _DURATION_MS
    shortest_s = (sum(_DURATION_MS[kind][0] for kind in kinds) / 1000
                  + MIN_GAP_S * max(0, len(kinds) - 1)) / (WINDOW[1] - WINDOW[0])
    if duration_s < shortest_s:
        with pytest.raises(ValueError, match="too short for these faults"):
            FaultSchedule.generate(seed, kinds, duration_s, "all")
        return
    schedule = FaultSchedule.generate(seed, kinds, duration_s, "all")
    assert schedule == FaultSchedule.generate(seed, kinds, duration_s, "all")
    assert schedule.requested == tuple(kinds)
    for kind in FAULTS:
        n = sum(1 for fault in schedule if fault.name == kind)
        assert (1 <= n <= MAX_COUNT[kind]) if kind in kinds else n == 0
    faults = list(schedule)
    if faults:
        assert faults[0].at_s >= duration_s * WINDOW[0] - 0.001
        assert faults[-1].heal_at_s <= duration_s * WINDOW[1] + 0.001
    for before, after in zip(faults, faults[1:]):
        assert after.at_s - before.heal_at_s >= MIN_GAP_S - 1e-9
    for fault in faults:
        assert fault.params["duration_s"] >= 1.0
        assert ScheduledFault.from_dict(fault.to_dict()) == fault
