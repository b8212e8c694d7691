"""A verify scenario is data: which semantics, which faults, how long, which seed, how fast.

``Scenario.build`` validates what a user typed (one ``BadInput`` sentence for anything
wrong), ``schedule()`` derives the seeded fault schedule, and ``to_dict()`` goes into
``result.json`` so a run can be read back and replayed: same seed and faults, same schedule.

``exactly_once_stage`` says what delivers the exactly-once run: ``pipeline`` (the default),
the Spark copy job into a ``TransactionalSink``; ``transform``, Kafka's own exactly-once end
to end: the records go through a consume-transform-produce worker (one Kafka transaction
per batch, offsets included) into an output topic, read with ``read_committed`` into the
sink; and, to prove the verifier can fail, ``at-least-once-consumer`` delivers the exactly-once run with the at-least-once consumer
while it keeps its exactly-once label - a deliberately broken configuration that the
checker must catch (duplicates after ``kill-consumer``).

``transactional`` (asked for by name; ``all`` is the three guarantees) runs transactional
producers that abort a share ``abort_probability`` of their transactions, read by the
exactly-once reader with ``isolation`` ``read_committed``. ``read_uncommitted`` is the
negative control: the same workload read without the isolation, where the checker must
report aborted reads and the broken contract.

``brokers`` is how many brokers the run starts: 1 (the default) is today's single broker
with no ZooKeeper; 2 or more is a ``LocalCluster`` with its own ZooKeeper, which the
cluster faults (``kill-leader``, ``pause-broker``) need. ``--brokers`` and ``--bootstrap``
exclude each other: one says which broker to use, the other asks to start some.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .checker import SEMANTICS, TRANSACTIONAL, normalize_semantics
from .schedule import CLUSTER_FAULTS, FaultSchedule, parse_faults

__all__ = ["BadInput", "DEFAULT_FAULTS", "EXACTLY_ONCE_STAGES", "ISOLATION_LEVELS", "RunFailed",
           "Scenario"]

# the CLI's default; the cluster faults are asked for by name (they need --brokers)
DEFAULT_FAULTS = ("kill-broker", "kill-consumer", "kill-driver", "drop-acks")
EXACTLY_ONCE_STAGES = ("pipeline", "transform", "at-least-once-consumer")
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


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
    bootstrap: str | None = None            # None: the run starts its own broker(s)
    brokers: int = 1                        # >= 2: a cluster with its own ZooKeeper
    sink: str | None = None                 # None: a SQLite file per semantics in out_dir
    rate: float = 400.0                     # records per second, all producers together
    producers: int = 2
    partitions: int = 3
    exactly_once_stage: str = "pipeline"
    abort_probability: float = 0.2          # transactional: share of transactions aborted
    isolation: str = "read_committed"       # transactional: the reader's isolation.level
    drain_timeout_s: float = 120.0
    broker_settings: dict[str, str] = field(default_factory=lambda: {
        "group.initial.rebalance.delay.ms": "0"})

    @classmethod
    def build(cls, *, semantics: str, faults: str, duration_s: float, seed: int,
              brokers: int | None = None, **options: Any) -> "Scenario":
        """``brokers=None``: not given (one broker, or none with ``bootstrap``)."""
        text = semantics.strip().lower()
        try:
            names = SEMANTICS if text == "all" else tuple(dict.fromkeys(
                normalize_semantics(name) for name in text.split(",") if name.strip()))
            if not names:
                raise ValueError("--semantics is empty; choose at-most-once, at-least-once, "
                                 "exactly-once, transactional or all")
            kinds = () if faults.strip().lower() == "none" else tuple(
                dict.fromkeys(parse_faults(faults)))
        except ValueError as error:
            raise BadInput(str(error)) from None
        if brokers is not None and options.get("bootstrap") is not None:
            raise BadInput("--brokers starts brokers of the verifier's own and --bootstrap "
                           "uses an existing one; drop one of them")
        scenario = cls(semantics=names, faults=kinds, duration_s=float(duration_s),
                       seed=int(seed), brokers=1 if brokers is None else int(brokers),
                       **options)
        scenario._validate()
        return scenario

    def _validate(self) -> None:
        if self.exactly_once_stage not in EXACTLY_ONCE_STAGES:
            raise BadInput(f"unknown exactly-once stage {self.exactly_once_stage!r}; choose "
                           "pipeline, transform or at-least-once-consumer")
        if self.isolation not in ISOLATION_LEVELS:
            raise BadInput(f"unknown isolation level {self.isolation!r}; choose read_committed "
                           "or read_uncommitted")
        if self.isolation != "read_committed" and TRANSACTIONAL not in self.semantics:
            raise BadInput("--isolation only changes how the transactional run is read; add "
                           "--semantics transactional")
        if not 0 <= self.abort_probability < 1:
            raise BadInput(f"--abort-probability must be at least 0 and below 1, not "
                           f"{self.abort_probability:g}")
        for name, value in (("--rate", self.rate), ("--producers", self.producers),
                            ("--partitions", self.partitions), ("--brokers", self.brokers),
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
        cluster_faults = [name for name in self.faults if name in CLUSTER_FAULTS]
        if cluster_faults and self.brokers < 2:
            need = "needs" if len(cluster_faults) == 1 else "need"
            raise BadInput(f"{' and '.join(cluster_faults)} {need} a cluster the verifier "
                           "starts itself; add --brokers 3")
        if self.sink is not None:
            from ..spark.sinks.database import parse_url
            from ..spark.sinks.errors import SinkError
            try:
                parse_url(self.sink)
            except SinkError as error:
                raise BadInput(f"--sink: {str(error).rstrip('.')}") from None
        self.schedule()  # a run too short for its faults fails here

    @property
    def is_cluster(self) -> bool:
        return self.brokers >= 2

    @property
    def replication_factor(self) -> int:
        return min(3, self.brokers)

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
