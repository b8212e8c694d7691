"""The nemesis plays a fault schedule on the schedule's clock: injections and heals in
order and on time, every step logged as a FaultEvent, and a target that is still
recovering shifts the rest of the schedule instead of being hit again mid-start-up."""

from __future__ import annotations

import pytest

from oncelog.verify.faults import Nemesis
from oncelog.verify.history import History, HistoryWriter
from oncelog.verify.schedule import FaultSchedule, ScheduledFault


class Clock:
    """The schedule's elapsed seconds, moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeFault:
    def __init__(self, name: str, calls: list) -> None:
        self.name = name
        self.calls = calls
        self.is_ready = True

    def ready(self) -> bool:
        return self.is_ready

    def inject(self, scheduled: ScheduledFault) -> dict:
        self.calls.append(("inject", self.name, scheduled.at_s))
        return {"pid": 1}

    def heal(self) -> dict:
        self.calls.append(("heal", self.name))
        return {"pid": 2}


def schedule(*faults: tuple[float, str, float]) -> FaultSchedule:
    return FaultSchedule(7, 60.0, "all", tuple(sorted({name for _, name, _ in faults})),
                         tuple(ScheduledFault(at_s, name, {"duration_s": duration_s})
                               for at_s, name, duration_s in faults))


def nemesis_for(tmp_path, plan: FaultSchedule, **kwargs):
    calls: list = []
    faults = {name: FakeFault(name, calls) for name in plan.requested}
    writer = HistoryWriter(tmp_path / "faults.jsonl", clock=lambda: 1000.0)
    return Nemesis(plan, faults, writer, **kwargs), faults, calls, writer


def test_steps_run_in_order_when_due_and_are_logged(tmp_path):
    plan = schedule((5.0, "kill-broker", 2.0), (10.0, "drop-acks", 3.0))
    nemesis, _, calls, writer = nemesis_for(tmp_path, plan)
    clock = Clock()
    clock.now = 4.9
    nemesis.run_due(clock)
    assert calls == [] and nemesis.next_at_s == 5.0
    clock.now = 7.5  # the injection and its heal are both due
    nemesis.run_due(clock)
    assert calls == [("inject", "kill-broker", 5.0), ("heal", "kill-broker")]
    clock.now = 20.0
    nemesis.run_due(clock)
    assert calls[2:] == [("inject", "drop-acks", 10.0), ("heal", "drop-acks")]
    assert nemesis.injected == 2 and nemesis.next_at_s is None
    writer.close()
    events = History.load(tmp_path / "faults.jsonl").faults
    assert [(e.name, e.action) for e in events] == [
        ("kill-broker", "inject"), ("kill-broker", "heal"),
        ("drop-acks", "inject"), ("drop-acks", "heal")]
    assert events[0].detail["at_s"] == 5.0 and events[0].detail["elapsed_s"] == 7.5
    assert events[1].detail["at_s"] == 7.0 and events[0].detail["pid"] == 1
    assert all(event.detail["delay_s"] == 0 for event in events)


def test_a_recovering_target_shifts_the_rest_of_the_schedule(tmp_path):
    plan = schedule((5.0, "kill-driver", 2.0), (10.0, "drop-acks", 3.0))
    nemesis, faults, calls, writer = nemesis_for(tmp_path, plan)
    faults["kill-driver"].is_ready = False
    clock = Clock()
    for now in (5.0, 6.0, 8.0):
        clock.now = now
        nemesis.run_due(clock)
    assert calls == [] and nemesis.delay_s == 3.0 and nemesis.next_at_s == 8.0
    faults["kill-driver"].is_ready = True
    clock.now = 8.5
    nemesis.run_due(clock)
    assert calls == [("inject", "kill-driver", 5.0)]
    clock.now = 9.9  # the heal was due at 7 s, now at 7 + 3
    nemesis.run_due(clock)
    assert len(calls) == 1
    clock.now = 10.0
    nemesis.run_due(clock)
    assert calls[-1] == ("heal", "kill-driver") and nemesis.next_at_s == 13.0
    writer.close()
    inject = History.load(tmp_path / "faults.jsonl").faults[0]
    assert inject.detail["waited_s"] == 3.0 and inject.detail["delay_s"] == 3.0


def test_a_target_that_never_recovers_is_hit_anyway_after_the_longest_wait(tmp_path):
    plan = schedule((5.0, "kill-consumer", 1.0))
    nemesis, faults, calls, writer = nemesis_for(tmp_path, plan, max_delay_s=10.0)
    faults["kill-consumer"].is_ready = False
    clock = Clock()
    for now in range(5, 17):
        clock.now = float(now)
        nemesis.run_due(clock)
    assert calls[0] == ("inject", "kill-consumer", 5.0)
    writer.close()
    inject = History.load(tmp_path / "faults.jsonl").faults[0]
    assert "injected anyway" in inject.detail["note"]


def test_heal_all_heals_what_is_still_injected(tmp_path):
    plan = schedule((5.0, "kill-broker", 20.0))
    nemesis, _, calls, writer = nemesis_for(tmp_path, plan)
    clock = Clock()
    clock.now = 6.0
    nemesis.run_due(clock)
    nemesis.heal_all(6.5)
    assert calls == [("inject", "kill-broker", 5.0), ("heal", "kill-broker")]
    assert nemesis.next_at_s is None


def test_a_heal_that_raises_is_not_tried_again_when_the_run_heals_everything(tmp_path):
    # A failed heal ends the run with its own error: heal_all (the run's cleanup) must not
    # heal the same fault again and raise something else in its place.
    plan = schedule((1.0, "kill-leader", 1.0))
    nemesis, faults, calls, _ = nemesis_for(tmp_path, plan)

    def failing_heal() -> dict:
        calls.append(("heal", "kill-leader"))
        raise RuntimeError("the broker did not come back")

    faults["kill-leader"].heal = failing_heal
    clock = Clock()
    clock.now = 1.5
    nemesis.run_due(clock)
    clock.now = 2.5
    with pytest.raises(RuntimeError, match="^the broker did not come back$"):
        nemesis.run_due(clock)
    nemesis.heal_all(3.0)
    assert calls == [("inject", "kill-leader", 1.0), ("heal", "kill-leader")]


def test_a_step_that_runs_into_the_next_ones_time_shifts_the_rest_of_the_schedule(tmp_path):
    """kill-broker's heal waits for the restarted broker to answer; on a loaded machine that
    took 5.4 s and the next injection, due meanwhile, came 3.5 s late with no shift recorded
    (CI, seed 9 of the transform run): the overrun shifts the schedule instead."""
    plan = schedule((5.0, "kill-broker", 1.0), (8.0, "drop-acks", 3.0))
    nemesis, faults, calls, writer = nemesis_for(tmp_path, plan)
    clock = Clock()
    slow_heal = faults["kill-broker"].heal

    def heal() -> dict:
        clock.now += 4.5  # 6.0 -> 10.5, past the injection due at 8.0
        return slow_heal()

    faults["kill-broker"].heal = heal
    for now in (5.0, 6.0):
        clock.now = now
        nemesis.run_due(clock)
    assert calls == [("inject", "kill-broker", 5.0), ("heal", "kill-broker")]
    # its 2 s gap after the heal kept: due at 8.0 + 4.5
    assert nemesis.delay_s == pytest.approx(4.5) and nemesis.next_at_s == pytest.approx(12.5)
    clock.now = 12.5
    nemesis.run_due(clock)
    assert calls[-1] == ("inject", "drop-acks", 8.0)
    writer.close()
    inject = History.load(tmp_path / "faults.jsonl").faults[-1]
    assert inject.detail["elapsed_s"] - inject.detail["at_s"] - inject.detail["delay_s"] \
        == pytest.approx(0.0)
