"""Did the faults land? What each fault of a run actually did, read from its history.

A contract kept under faults that never took effect proves nothing: a ``drop-acks`` that
dropped no response (``acks=0`` sends none), a ``kill -9`` of a process that was not
running, a fault the run never got to inject. ``fault_outcomes(events, planned, ...)``
pairs each planned fault with its ``inject`` and ``heal`` events (``faults.jsonl``) and says,
per fault, whether it **landed** and what it did, in one sentence and in numbers:

| fault | landed when | what is recorded |
|---|---|---|
| ``kill-broker``, ``kill-leader`` | the broker was running when ``kill -9`` hit it | its pid, how long it was down, its new pid; records acknowledged while it was down and in the ``SEEN_AFTER_S`` after its restart (clients saw the restart: they reconnected and were answered by the new process) |
| ``pause-broker`` | the broker was running when ``SIGSTOP`` hit it | its pid, how long it was paused |
| ``kill-consumer``, ``kill-driver`` | the stage's process was running when it was killed | its pid, what it was (``target``: ``SPARK_DRIVER``, or a consumer or reader when the stage has no Spark driver), where in its work the kill landed, how long it was down; for the Spark copy job, the batch window (``window``, see ``workloads.delivery``) |
| ``drop-acks`` | the proxy dropped at least one Produce response | how many |
| ``partition-leader``, ``isolate-zookeeper``, ``split``, ``cut-link``, ``slow-net`` | the cut was applied (``faults.partitions``) | what was cut (which broker led what, which ZooKeeper node, which halves or link), how long, and who led each partition while it was cut |
| ``kill-executor`` | a live executor JVM of the copy job's application was SIGKILLed (its pid found on this machine) | its pid, executor and application ids, the batch it hit and how many tasks were running on it; from the heal: the executor(s) that replaced it and ran tasks (``replaced_by``, ``replacement_s``), the tasks that died with the killed executor (``lost_tasks``; written batches show they ran again), the first batch written after the kill (``batch_after``); ``recovered`` when both a replacement ran tasks and a batch was written |

A planned fault with no ``inject`` event was **skipped** (not landed). ``verdict`` turns the
outcomes and the checker's counts into one of ``kept``, ``broken`` and ``inconclusive``
(see ``checker.CheckResult.verdict``): a semantics none of whose faults landed is
inconclusive, never kept; one whose faults partly landed is judged on those that did, and
the report lists the others as "did not land".
"""  # noqa: E501 - a table's rows stay one line each

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .history import FaultEvent

__all__ = ["FaultOutcome", "SEEN_AFTER_S", "SPARK_DRIVER", "describe_window", "fault_outcomes"]

SEEN_AFTER_S = 10.0      # how long after a broker's restart its acknowledgements are counted
SPARK_DRIVER = "Spark copy job"  # the target of a kill in the one stage with a Spark driver
_SETTLE_S = 0.5          # acknowledgements of requests answered just before the kill


@dataclass(frozen=True)
class FaultOutcome:
    name: str
    at_s: float                       # when it was planned (seconds into the run)
    elapsed_s: float | None           # when it was injected; None: never injected
    landed: bool
    effect: str                       # one sentence: what it did, or why it did not land
    detail: dict[str, Any] = field(default_factory=dict)   # pid, down_s, dropped, window, ...

    def to_dict(self) -> dict[str, Any]:
        return {**self.detail, "name": self.name, "at_s": self.at_s,
                "elapsed_s": self.elapsed_s, "landed": self.landed, "effect": self.effect}


def fault_outcomes(events: Sequence[FaultEvent], planned: Iterable[Any] = (), *,
                   acknowledged_times: Sequence[float] = ()) -> list[FaultOutcome]:
    """One ``FaultOutcome`` per planned fault (``planned``: items with ``name`` and
    ``at_s``, e.g. ``ScheduledFault``), and per injected fault that was not planned.
    ``acknowledged_times`` are the producers' acknowledgement times (the history's clock),
    used to tell whether clients saw a broker restart."""
    pairs = _pair(events)
    outcomes = []
    acknowledged = sorted(acknowledged_times)
    unplanned = list(pairs)
    for scheduled in planned:
        match = next((pair for pair in unplanned if pair[0].name == scheduled.name
                      and pair[0].detail.get("at_s") == scheduled.at_s), None)
        if match is None:
            outcomes.append(FaultOutcome(scheduled.name, scheduled.at_s, None, False,
                                         "skipped: never injected"))
            continue
        unplanned.remove(match)
        outcomes.append(_outcome(*match, acknowledged))
    outcomes += [_outcome(*pair, acknowledged) for pair in unplanned]
    return sorted(outcomes, key=lambda outcome: outcome.at_s)


def _pair(events: Sequence[FaultEvent]) -> list[tuple[FaultEvent, FaultEvent | None]]:
    """(inject, heal or None) in injection order; faults of one name never overlap."""
    pairs: list[list] = []
    open_by_name: dict[str, list] = {}
    for event in events:
        if event.action in ("inject", "execute"):
            pair = [event, None]
            pairs.append(pair)
            if event.action == "inject":
                open_by_name[event.name] = pair
        elif event.action == "heal" and event.name in open_by_name:
            open_by_name.pop(event.name)[1] = event
    return [(inject, heal) for inject, heal in pairs]


def _outcome(inject: FaultEvent, heal: FaultEvent | None,
             acknowledged: list[float]) -> FaultOutcome:
    name, done = inject.name, dict(inject.detail)
    healed = dict(heal.detail) if heal is not None else {}
    at_s = float(done.get("at_s", 0.0))
    elapsed_s = done.get("elapsed_s")
    if name == "drop-acks":
        dropped = healed.get("dropped")
        landed = bool(dropped)
        if dropped is None:
            effect = "never healed: how many responses it dropped is unknown"
        elif dropped:
            what = "request" if done.get("mode") == "request" else "response"
            effect = f"dropped {dropped} Produce {what}(s)"
        else:
            effect = "dropped nothing" + (f" ({done['note']})" if done.get("note") else "")
        return FaultOutcome(name, at_s, elapsed_s, landed, effect,
                            {"dropped": dropped, "rate": done.get("rate")})
    if name == "kill-executor":
        return _executor_outcome(done, healed, heal is not None, at_s, elapsed_s)
    if done.get("signal") == "network":
        return _network_outcome(name, done, healed, at_s, elapsed_s)
    pid = done.get("pid")
    running = bool(done.get("running", pid is not None)) and pid is not None
    detail: dict[str, Any] = {"pid": pid, "running": running}
    if "broker" in done:
        detail["broker"] = done["broker"]
    if not running:
        where = done.get("landed") or "its target was not running"
        return FaultOutcome(name, at_s, elapsed_s, False, f"{where} (pid {pid})", detail)
    if name == "pause-broker":
        detail["paused_s"] = healed.get("paused_s")
        effect = f"SIGSTOP of broker {done.get('broker')} (pid {pid})"
        if detail["paused_s"] is not None:
            effect += f", paused {detail['paused_s']:g} s"
        return FaultOutcome(name, at_s, elapsed_s, True, effect, detail)
    if done.get("target"):
        detail["target"] = done["target"]  # what was killed: kill-driver may hit a consumer
    target = done.get("target") or (f"broker {done['broker']}" if "broker" in done
                                    else "the broker")
    effect = f"kill -9 of {target} (pid {pid})"
    if done.get("landed"):
        effect += f"; {done['landed']}"
        detail["where"] = done["landed"]  # where in its work the kill hit it
    if done.get("window"):
        detail["window"] = done["window"]
        effect += f"; {describe_window(done['window'])}"
    if heal is not None:
        detail["down_s"] = healed.get("down_s")
        detail["restarted_pid"] = healed.get("pid")
        if detail["down_s"] is not None:
            effect += f", down {detail['down_s']:g} s"
    if name in ("kill-broker", "kill-leader") and heal is not None:
        # Clients saw the restart: answered again, by the new process (the old one is dead).
        down = [t for t in acknowledged if inject.time + _SETTLE_S <= t < heal.time]
        after = [t for t in acknowledged if heal.time <= t < heal.time + SEEN_AFTER_S]
        detail.update(acknowledged_while_down=len(down), acknowledged_after_restart=len(after),
                      clients_saw_restart=bool(after))
        effect += (f"; clients answered again after the restart ({len(after)} acknowledged "
                   f"within {SEEN_AFTER_S:g} s)" if after else
                   "; no acknowledgement after the restart")
    return FaultOutcome(name, at_s, elapsed_s, True, effect, detail)


def _network_outcome(name: str, done: dict, healed: dict, at_s: float,
                     elapsed_s: float | None) -> FaultOutcome:
    """A network partition: landed when it was applied (the isolation layer's rules in
    place); the caption says what was cut, for how long, and who led meanwhile."""
    detail: dict[str, Any] = {key: done[key] for key in (
        "caption", "broker", "led", "zookeeper", "follower", "minority", "majority",
        "leaders") if key in done}
    effect = str(done.get("caption", name))
    if healed:
        detail["cut_s"] = healed.get("cut_s")
        detail["leaders_meanwhile"] = meanwhile = healed.get("leaders_meanwhile", {})
        if detail["cut_s"] is not None:
            effect += f" for {detail['cut_s']:g} s"
        before = done.get("leaders", {})
        if meanwhile and meanwhile != before:
            moved = sorted(p for p in meanwhile if before.get(p) != meanwhile[p])
            effect += "; led meanwhile: " + ", ".join(
                f"partition {p} by broker {meanwhile[p]}" for p in moved)
        elif meanwhile:
            effect += "; the leaders stayed where they were"
        else:
            effect += "; no broker answered for the leaders meanwhile"
    else:
        effect += "; never healed"
    return FaultOutcome(name, at_s, elapsed_s, True, effect, detail)


def _executor_outcome(done: dict, healed: dict, was_healed: bool, at_s: float,
                      elapsed_s: float | None) -> FaultOutcome:
    """``kill-executor``: landed when a live executor's JVM was killed (see the table)."""
    pid = done.get("pid")
    detail: dict[str, Any] = {key: done.get(key) for key in (
        "pid", "executor_id", "app_id", "host", "batch", "running_tasks")}
    detail["running"] = landed = bool(done.get("running")) and pid is not None
    if not landed:
        return FaultOutcome("kill-executor", at_s, elapsed_s, False,
                            done.get("landed") or "no executor was running", detail)
    effect = (f"kill -9 of executor {done.get('executor_id')} of {done.get('app_id')} "
              f"(pid {pid}); {done.get('landed')}")
    if done.get("killed") is False:
        effect += "; its process had not gone 5 s later"
    if was_healed:
        replaced_by = list(healed.get("replaced_by") or [])
        detail.update(replaced_by=replaced_by, replacement_s=healed.get("replacement_s"),
                      lost_tasks=healed.get("lost_tasks"), batch_after=healed.get("batch_after"))
        detail["recovered"] = bool(replaced_by) and healed.get("batch_after") is not None
        if replaced_by:
            effect += (f"; executor {', '.join(replaced_by)} came up and ran tasks "
                       f"{healed.get('replacement_s'):g} s later")
        else:
            effect += (f"; no new executor ran tasks within "
                       f"{healed.get('recover_timeout_s', 0):g} s")
        if healed.get("lost_tasks"):
            effect += f"; {healed['lost_tasks']} task(s) died with it"
        effect += (f"; batch {healed['batch_after']} written after the kill"
                   if healed.get("batch_after") is not None else
                   "; no batch written after the kill before the heal gave up")
    return FaultOutcome("kill-executor", at_s, elapsed_s, True, effect, detail)


def describe_window(window: dict[str, Any]) -> str:
    """``{"name": ..., "batch": 12, ...}`` -> ``batch 12: after the sink's transaction,
    before Spark's commit log``."""
    batch = window.get("batch")
    prefix = f"batch {batch}: " if batch is not None else ""
    return prefix + str(window.get("name", "window unknown"))
