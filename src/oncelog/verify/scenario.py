"""A verify scenario is data: which semantics, which faults, how long, which seed, how fast.

``Scenario.build`` validates what a user typed (one ``BadInput`` sentence for anything
wrong), ``schedule()`` derives the seeded fault schedule, and ``to_dict()`` goes into
``result.json`` so a run can be read back and replayed: same seed and faults, same schedule.

``exactly_once_stage`` exists to prove the verifier can fail: ``pipeline`` (the default) is
the real exactly-once stage (the Spark copy job into a ``TransactionalSink``);
``at-least-once-consumer`` delivers the exactly-once run with the at-least-once consumer
while it keeps its exactly-once label - a deliberately broken configuration that the
checker must catch (duplicates after ``kill-consumer``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .checker import SEMANTICS, normalize_semantics
from .schedule import FAULTS, FaultSchedule, parse_faults

__all__ = ["BadInput", "DEFAULT_FAULTS", "EXACTLY_ONCE_STAGES", "RunFailed", "Scenario"]

DEFAULT_FAULTS = FAULTS  # kill-broker, kill-consumer, kill-driver, drop-acks
EXACTLY_ONCE_STAGES = ("pipeline", "at-least-once-consumer")


class BadInput(ValueError):
    """Something the user asked for cannot run; one sentence, raised before anything runs."""


class RunFailed(RuntimeError):
    """The run could not complete (a process would not start or restart); one sentence."""


@dataclass(frozen=True)
class Scenario:
    semantics: tuple[str, ...]              # normalized: at_most_once, ...
    faults: tuple[str, ...]                 # validated fault names
    duration_s: float
    seed: int
    out_dir: Path = Path("verify-out")
    bootstrap: str | None = None            # None: the run starts its own broker
    sink: str | None = None                 # None: a SQLite file per semantics in out_dir
    rate: float = 400.0                     # records per second, all producers together
    producers: int = 2
    partitions: int = 3
    exactly_once_stage: str = "pipeline"
    drain_timeout_s: float = 120.0
    broker_settings: dict[str, str] = field(default_factory=lambda: {
        "group.initial.rebalance.delay.ms": "0"})

    @classmethod
    def build(cls, *, semantics: str, faults: str, duration_s: float, seed: int,
              **options: Any) -> "Scenario":
        text = semantics.strip().lower()
        try:
            names = SEMANTICS if text == "all" else tuple(dict.fromkeys(
                normalize_semantics(name) for name in text.split(",") if name.strip()))
            if not names:
                raise ValueError("--semantics is empty; choose at-most-once, at-least-once, "
                                 "exactly-once or all")
            kinds = () if faults.strip().lower() == "none" else tuple(
                dict.fromkeys(parse_faults(faults)))
        except ValueError as error:
            raise BadInput(str(error)) from None
        scenario = cls(semantics=names, faults=kinds, duration_s=float(duration_s),
                       seed=int(seed), **options)
        scenario._validate()
        return scenario

    def _validate(self) -> None:
        if self.exactly_once_stage not in EXACTLY_ONCE_STAGES:
            raise BadInput(f"unknown exactly-once stage {self.exactly_once_stage!r}; choose "
                           "pipeline or at-least-once-consumer")
        for name, value in (("--rate", self.rate), ("--producers", self.producers),
                            ("--partitions", self.partitions),
                            ("--drain-timeout", self.drain_timeout_s)):
            if not value > 0:
                raise BadInput(f"{name} must be positive, not {value:g}")
        if self.bootstrap is not None:
            host, sep, port = self.bootstrap.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise BadInput(f"--bootstrap expects HOST:PORT, not {self.bootstrap!r}")
            if "kill-broker" in self.faults:
                raise BadInput("kill-broker kills a broker the verifier started itself, so it "
                               "cannot be used with --bootstrap; drop one of them")
        if self.sink is not None:
            from ..spark.sinks.database import parse_url
            from ..spark.sinks.errors import SinkError
            try:
                parse_url(self.sink)
            except SinkError as error:
                raise BadInput(f"--sink: {str(error).rstrip('.')}") from None
        self.schedule()  # a run too short for its faults fails here

    @property
    def uses_pipeline(self) -> bool:
        return "exactly_once" in self.semantics and self.exactly_once_stage == "pipeline"

    def schedule(self) -> FaultSchedule:
        label = self.semantics[0] if len(self.semantics) == 1 else "all"
        try:
            return FaultSchedule.generate(self.seed, self.faults, self.duration_s, label)
        except ValueError as error:
            raise BadInput(str(error)) from None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["semantics"] = [name.replace("_", "-") for name in self.semantics]
        data["faults"] = list(self.faults)
        data["out_dir"] = str(self.out_dir)
        if self.sink is not None:
            from ..spark.sinks.database import hide_password
            data["sink"] = hide_password(self.sink)
        return data
