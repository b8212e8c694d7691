"""The fault schedule: which faults happen when, decided up front from a seed.

``FaultSchedule.generate(seed, faults, duration_s, semantics)`` is a pure function: the same
arguments give the same schedule on every machine (one ``random.Random(seed)``; times are
whole milliseconds), so ``--seed`` replays a run's faults. Each ``ScheduledFault`` is
injected at ``at_s`` (seconds from the start of the run) and healed ``params["duration_s"]``
later:

- ``kill-broker`` / ``kill-consumer`` / ``kill-driver`` — ``kill -9`` the process (the broker,
  a consumer, the Spark driver) and restart it after ``duration_s`` (1-3 s).
- ``drop-acks`` — for ``duration_s`` (2-5 s), the fault proxy drops the responses to a
  ``rate`` of Produce requests after the broker handled them (``mode`` "close": the proxy
  also cuts the connection, so the client retries at once); ``seed`` seeds the proxy.
- ``kill-leader`` (a cluster only) — ``kill -9`` the broker leading the most partitions of
  the run's topic, restart it after ``duration_s`` (1-3 s).
- ``pause-broker`` (a cluster only) — ``SIGSTOP`` a broker, ``SIGCONT`` it after
  ``duration_s`` (2-9 s: sometimes shorter, sometimes longer than the 5 s ZooKeeper session
  a verify cluster runs with, see ``runner.CLUSTER_SETTINGS``).
- ``kill-executor`` (a Spark cluster only, ``--spark-master``) — ``kill -9`` an executor of
  the Spark copy job mid-batch; ``duration_s`` (1-3 s) later, the heal starts watching Spark
  replace it (``faults.executor``).
- Network partitions (a cluster only, started isolated: root on Linux; ``faults.partitions``)
  — ``partition-leader`` (the leader cut off from everything), ``isolate-zookeeper`` (one
  ZooKeeper node of three), ``split`` (the leader and one ZooKeeper node against the rest),
  ``cut-link`` (the leader's packets to one follower dropped), each for ``duration_s`` (3-10
  s: shorter and longer than the 5 s session; ``cut-link`` 3-8 s), and ``slow-net`` (brokers
  10 +- 5 ms apart with 1 % loss, 5-10 s).

Which broker a cluster fault hits is only known when it happens (who leads what by then),
so it is not in the schedule; a seeded pick among brokers is derived from the seed and the
fault's time (``faults.cluster``), which keeps existing schedules unchanged.

Spacing: every fault is injected and healed within the middle 70% of the run (the workload
warms up before the first fault and everything recovers before the end, so the final state
of the sink is complete), one at a time, with at least ``MIN_GAP_S`` between one fault's
heal and the next one's injection. Each requested kind happens at least once and at most
``MAX_COUNT[kind]`` times; when the run is too short for all of them, the most numerous
kinds are thinned first, and a run too short for one of each is a ``ValueError``.

``semantics`` is recorded but deliberately not mixed into the randomness: with
``--semantics all`` the three runs get the same schedule, so differences in their outcomes
come from the semantics, not from the luck of the draw.
"""

from __future__ import annotations

import json
import random
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .checker import normalize_semantics

__all__ = ["CLUSTER_FAULTS", "FAULTS", "MAX_COUNT", "MIN_GAP_S", "NETWORK_FAULTS",
           "SPARK_CLUSTER_FAULTS",
           "FaultSchedule", "ScheduledFault", "parse_faults", "random_seed"]

# network partitions: need a cluster the run starts isolated (root on Linux)
NETWORK_FAULTS = ("partition-leader", "isolate-zookeeper", "split", "cut-link", "slow-net")
FAULTS = ("kill-broker", "kill-consumer", "kill-driver", "drop-acks", "kill-leader",
          "pause-broker", "kill-executor", *NETWORK_FAULTS)
# need a cluster: --brokers 2 or more
CLUSTER_FAULTS = ("kill-leader", "pause-broker", *NETWORK_FAULTS)
SPARK_CLUSTER_FAULTS = ("kill-executor",)         # need a Spark cluster: --spark-master
MAX_COUNT = {"kill-broker": 3, "kill-consumer": 3, "kill-driver": 2, "drop-acks": 2,
             "kill-leader": 3, "pause-broker": 2, "kill-executor": 2,
             "partition-leader": 2, "isolate-zookeeper": 2, "split": 2, "cut-link": 2,
             "slow-net": 1}
MIN_GAP_S = 2.0
WINDOW = (0.15, 0.85)  # faults happen within this fraction of the run

# how long each kind lasts, in milliseconds: (shortest, longest)
_DURATION_MS = {"kill-broker": (1000, 3000), "kill-consumer": (1000, 3000),
                "kill-driver": (1000, 3000), "drop-acks": (2000, 5000),
                "kill-leader": (1000, 3000), "pause-broker": (2000, 9000),
                "kill-executor": (1000, 3000), "partition-leader": (3000, 10000),
                "isolate-zookeeper": (3000, 10000), "split": (3000, 10000),
                "cut-link": (3000, 8000), "slow-net": (5000, 10000)}


@dataclass(frozen=True)
class ScheduledFault:
    at_s: float
    name: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def heal_at_s(self) -> float:
        return round(self.at_s + self.params.get("duration_s", 0.0), 3)

    def to_dict(self) -> dict[str, Any]:
        return {"at_s": self.at_s, "name": self.name, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScheduledFault:
        return cls(float(data["at_s"]), _validate_name(data["name"]), dict(data.get("params", {})))


@dataclass(frozen=True)
class FaultSchedule:
    seed: int
    duration_s: float
    semantics: str
    requested: tuple[str, ...]
    faults: tuple[ScheduledFault, ...]

    def __iter__(self) -> Iterator[ScheduledFault]:
        return iter(self.faults)

    def __len__(self) -> int:
        return len(self.faults)

    def timeline(self) -> list[tuple[float, str, str]]:
        """``(time_s, fault name, "inject" | "heal")`` in time order, for the runner."""
        steps = []
        for fault in self.faults:
            steps += [(fault.at_s, fault.name, "inject"), (fault.heal_at_s, fault.name, "heal")]
        return sorted(steps, key=lambda step: (step[0], step[2] == "inject"))

    @classmethod
    def generate(cls, seed: int, faults: Iterable[str], duration_s: float,
                 semantics: str) -> FaultSchedule:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"the seed must be an integer, not {seed!r}")
        if not duration_s > 0:
            raise ValueError(f"the duration must be positive, not {duration_s!r} seconds")
        semantics = "all" if semantics.strip().lower() == "all" else normalize_semantics(semantics)
        kinds = list(dict.fromkeys(_validate_name(name) for name in faults))
        rng = random.Random(seed)
        events = [(kind, rng.randint(*_DURATION_MS[kind]))
                  for kind in kinds for _ in range(rng.randint(1, MAX_COUNT[kind]))]
        rng.shuffle(events)
        window_ms = (round(duration_s * 1000 * WINDOW[0]), round(duration_s * 1000 * WINDOW[1]))
        events = _fit(events, window_ms[1] - window_ms[0], duration_s)
        placed = _place(rng, events, window_ms)
        scheduled = tuple(ScheduledFault(at_ms / 1000, kind, _params(rng, kind, duration_ms))
                          for at_ms, (kind, duration_ms) in placed)
        return cls(seed, float(duration_s), semantics, tuple(kinds), scheduled)

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "duration_s": self.duration_s, "semantics": self.semantics,
                "requested": list(self.requested),
                "faults": [fault.to_dict() for fault in self.faults]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FaultSchedule:
        return cls(int(data["seed"]), float(data["duration_s"]), data["semantics"],
                   tuple(_validate_name(name) for name in data.get("requested", ())),
                   tuple(ScheduledFault.from_dict(fault) for fault in data["faults"]))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, text: str) -> FaultSchedule:
        return cls.from_dict(json.loads(text))


def parse_faults(text: str) -> list[str]:
    """``"kill-broker, drop-acks"`` -> ``["kill-broker", "drop-acks"]``, validated."""
    return [_validate_name(name) for name in text.split(",") if name.strip()]


def random_seed() -> int:
    """A fresh seed for a run that was not given one (print it: it replays the run)."""
    return secrets.randbelow(2**32)


def _validate_name(name: str) -> str:
    normalized = name.strip().lower()
    if normalized not in FAULTS:
        raise ValueError(f"unknown fault {name!r}; valid faults are {', '.join(FAULTS[:-1])} "
                         f"and {FAULTS[-1]}")
    return normalized


def _needed_ms(events: list[tuple[str, int]]) -> int:
    return sum(duration for _, duration in events) + max(0, len(events) - 1) * int(MIN_GAP_S * 1000)


def _fit(events: list[tuple[str, int]], window_ms: int, duration_s: float) -> list:
    """Thin the most numerous kinds until the events fit the window (one of each at least)."""
    events = list(events)
    while _needed_ms(events) > window_ms:
        counts = {kind: sum(1 for k, _ in events if k == kind) for kind, _ in events}
        kind = max(counts, key=lambda each: counts[each])
        if counts[kind] == 1:
            break
        events.pop(max(i for i, (k, _) in enumerate(events) if k == kind))
    if _needed_ms(events) > window_ms:  # one of each: try the shortest durations
        events = [(kind, _DURATION_MS[kind][0]) for kind, _ in events]
    if _needed_ms(events) > window_ms:
        needed_s = _needed_ms(events) / 1000 / (WINDOW[1] - WINDOW[0])
        raise ValueError(f"a {duration_s:g} s run is too short for these faults; "
                         f"give at least --duration {needed_s:.0f}")
    return events


def _place(rng: random.Random, events: list, window_ms: tuple[int, int]) -> list:
    """Start times: the slack left in the window, split at random before each event."""
    slack = window_ms[1] - window_ms[0] - _needed_ms(events)
    cuts = sorted(rng.randint(0, slack) for _ in events)
    placed, cursor, previous_cut = [], window_ms[0], 0
    for cut, (kind, duration_ms) in zip(cuts, events):
        cursor += cut - previous_cut
        placed.append((cursor, (kind, duration_ms)))
        cursor += duration_ms + int(MIN_GAP_S * 1000)
        previous_cut = cut
    return placed


def _params(rng: random.Random, kind: str, duration_ms: int) -> dict[str, Any]:
    params: dict[str, Any] = {"duration_s": duration_ms / 1000}
    if kind == "drop-acks":
        params.update(rate=rng.randint(30, 70) / 100, mode="close", seed=rng.randrange(2**31))
    elif kind == "pause-broker":
        params["signal"] = "SIGSTOP"  # healed with SIGCONT
    elif kind in NETWORK_FAULTS:
        params["signal"] = "network"  # packets dropped or delayed, healed by removing that
    else:
        params["signal"] = "SIGKILL"
    return params
