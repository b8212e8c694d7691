"""The ``Nemesis`` plays a ``FaultSchedule``: each fault is injected at ``at_s`` and healed at
``heal_at_s`` (seconds since the workload started), one step at a time, and every step is
written to the history as a ``FaultEvent`` with what it did (pids, where a kill landed, how
many acknowledgements were dropped).

**Waiting for a recovered target.** A fault whose target is still recovering from the
previous fault (``ready()`` is False: e.g. the Spark copy job, whose JVM takes ~20 s to come
back, has not written a batch since its restart) is not injected yet: the rest of the
schedule *shifts* later until it is ready, at most ``MAX_DELAY_S`` per fault. Killing a
process that is still starting would only prove that start-ups can be interrupted, and
would keep the pipeline from ever running under faults. The shift keeps the schedule's
order, durations, gaps and parameters; only absolute times move, and every event records
the total shift so far (``delay_s``, so ``elapsed_s ~= at_s + delay_s``). The runner extends
the workload by the same amount (``delay_s``).

A heal that waits for its target to recover (``kill-executor``'s watches Spark replace the
executor, for up to 45 s) returns ``shift_s``, how long it waited: the rest of the schedule
shifts by as much, the same way, so the next fault still comes after its gap. Any other step
that runs past the next step's time (``kill-broker``'s heal waits for the restarted broker
to answer: seconds on a loaded machine) shifts the rest by as long as it took.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from ..history import FaultEvent, HistoryWriter
from ..schedule import FaultSchedule, ScheduledFault

__all__ = ["Fault", "MAX_DELAY_S", "Nemesis"]

MAX_DELAY_S = 60.0


class Fault(Protocol):
    name: str

    def ready(self) -> bool:
        """Whether the target is in a state worth faulting (not still recovering)."""
        ...

    def inject(self, scheduled: ScheduledFault) -> dict: ...

    def heal(self) -> dict: ...


class Nemesis:
    def __init__(self, schedule: FaultSchedule, faults: dict[str, Fault],
                 history: HistoryWriter, *,
                 on_event: Callable[[FaultEvent], None] | None = None,
                 max_delay_s: float = MAX_DELAY_S) -> None:
        self.faults = faults
        self.history = history
        self.on_event = on_event
        self.max_delay_s = max_delay_s
        steps = []
        for scheduled in schedule:
            steps += [(scheduled.at_s, "inject", scheduled),
                      (scheduled.heal_at_s, "heal", scheduled)]
        # same order as FaultSchedule.timeline(): by time, a heal before an injection
        self.steps = sorted(steps, key=lambda step: (step[0], step[1] == "inject"))
        self.total = len(schedule)
        self.injected = 0
        self.delay_s = 0.0           # how far the remaining schedule has been shifted
        self._waited_s = 0.0         # of which, for the step at the head now
        self._open: list[ScheduledFault] = []

    @property
    def next_at_s(self) -> float | None:
        """When the next step is due (shift included), in seconds since the start."""
        return self.steps[0][0] + self.delay_s if self.steps else None

    def run_due(self, elapsed_s: Callable[[], float]) -> None:
        """Run every step whose time has come (``elapsed_s()`` is read again after each);
        an injection whose target is not ready shifts the schedule instead."""
        while self.steps and self.steps[0][0] + self.delay_s <= elapsed_s():
            at_s, action, scheduled = self.steps[0]
            fault = self.faults[scheduled.name]
            if (action == "inject" and self._waited_s < self.max_delay_s
                    and not fault.ready()):
                late = elapsed_s() - (at_s + self.delay_s)
                self.delay_s += late
                self._waited_s += late
                return
            self.steps.pop(0)
            started_s = elapsed_s()
            self._step(action, scheduled, started_s, waited_s=self._waited_s)
            self._waited_s = 0.0
            self._shift_past_overrun(started_s, elapsed_s())

    def _shift_past_overrun(self, started_s: float, finished_s: float) -> None:
        """A step that ran into the next step's time (a heal waiting for a restarted broker
        to answer, on a loaded machine) shifts the rest of the schedule by as long as it
        took, as a recovering target does: the next step still comes its gap after."""
        if self.steps and finished_s > self.steps[0][0] + self.delay_s:
            self.delay_s += finished_s - started_s

    def heal_all(self, elapsed_s: float) -> None:
        """Heal whatever is still injected (the run is ending or failing)."""
        for scheduled in list(self._open):
            self._step("heal", scheduled, elapsed_s)
        self.steps = [step for step in self.steps if step[1] != "heal"]

    def _step(self, action: str, scheduled: ScheduledFault, elapsed_s: float, *,
              waited_s: float = 0.0) -> None:
        name = scheduled.name
        fault = self.faults[name]
        started = time.monotonic()
        if action == "inject":
            detail = fault.inject(scheduled)
            self._open.append(scheduled)
            self.injected += 1
            if waited_s > 0.05:
                detail["waited_s"] = round(waited_s, 3)  # for the target to recover
                if waited_s >= self.max_delay_s:
                    detail["note"] = (f"the target was still not ready after "
                                      f"{self.max_delay_s:g} s; injected anyway")
        else:
            if scheduled not in self._open:
                return
            # Healed once, even if healing raises: heal_all (the run failing) must not heal
            # it again and hide the first error behind one about a fault already healed.
            self._open.remove(scheduled)
            detail = fault.heal()
            self.delay_s += float(detail.pop("shift_s", 0.0))
        self._log(name, action, {"at_s": scheduled.at_s if action == "inject"
                                 else scheduled.heal_at_s,
                                 "elapsed_s": round(elapsed_s, 3),
                                 "delay_s": round(self.delay_s, 3),
                                 "took_s": round(time.monotonic() - started, 3), **detail})

    def _log(self, name: str, action: str, detail: dict) -> None:
        event = FaultEvent(name, action, self.history.clock(), detail)
        self.history.append(event)
        if self.on_event is not None:
            self.on_event(event)
