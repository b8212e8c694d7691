"""A verify scenario is data: which semantics, which faults, how long, which seed, how fast.

``Scenario.build`` validates what a user typed (one ``BadInput`` sentence for anything
wrong), ``schedule()`` derives the seeded fault schedule, and ``to_dict()`` goes into
``result.json`` so a run can be read back and replayed: same seed and faults, same schedule.

``exactly_once_stage`` says what delivers the exactly-once run: ``pipeline`` (the default),
the Spark copy job into a ``TransactionalSink``; ``transform``, Kafka's own exactly-once end
to end: the records go through a consume-transform-produce worker (one Kafka transaction
per batch, offsets included) into an output topic, read with ``read_committed`` into the
sink; and, to prove the verifier can fail, ``at-least-once-consumer`` delivers the
exactly-once run with the at-least-once consumer while it keeps its exactly-once label - a
deliberately broken configuration that the checker must catch (duplicates after
``kill-consumer``).

``transactional`` (asked for by name; ``all`` is the three guarantees) runs transactional
producers that abort a share ``abort_probability`` of their transactions, read by the
exactly-once reader with ``isolation`` ``read_committed``. ``read_uncommitted`` is the
negative control: the same workload read without the isolation, where the checker must
report aborted reads and the broken contract.

**Negative controls** (``control``, ``--control``): a deliberately broken configuration run
through the real workload, broker and faults, so a user can see the checker catch each
anomaly it claims to find. Each one breaks one semantics' run (the others in
``--semantics`` run as usual; without ``--semantics``, only that one runs), which must break
its contract with its anomaly (``CONTROLS``):

| control | semantics | what is broken | faults |
|---|---|---|---|
| ``lost`` | at-least-once | delivered by the at-most-once consumer (commit, then process): a kill between the two loses the committed batch | kill-consumer |
| ``duplicated`` | exactly-once | delivered by the at-least-once consumer (process, then commit): a kill between the two delivers the batch again (``--exactly-once-stage at-least-once-consumer``) | kill-consumer |
| ``reordered`` | exactly-once | produced by the at-least-once producer preset (no idempotence, 5 requests in flight, ``socket.timeout.ms`` 2 s), read by the exactly-once reader: a Produce request the proxy swallows is never written, later ones are, and its retry lands behind them | drop-acks, dropping whole requests (``proxy``'s ``drop_mode="request"``: a retriable error on one request of several in flight) |
| ``aborted-reads`` | transactional | read with ``read_uncommitted`` (``--isolation read_uncommitted``) | kill-consumer |

The two older flags are aliases: ``--exactly-once-stage at-least-once-consumer`` is
``--control duplicated`` and ``--isolation read_uncommitted`` is ``--control aborted-reads``.

``spark_master`` is where the exactly-once run's Spark copy job runs: None is ``local[2]``
(the driver runs every task); ``standalone`` starts a Spark standalone cluster of two
workers for the run (``spark.standalone.StandaloneCluster``, in ``--out/spark-cluster``)
and stops it at the end; ``spark://HOST:PORT`` is the user's own cluster, whose workers must
have oncelog installed. ``kill-executor`` needs one of the last two, and only the
exactly-once pipeline has executors to kill, so it runs only with ``--semantics
exactly-once``.

``brokers`` is how many brokers the run starts: 1 (the default) is today's single broker
with no ZooKeeper; 2 or more is a ``LocalCluster`` with its own ZooKeeper, which the
cluster faults (``kill-leader``, ``pause-broker``) need. ``--brokers`` and ``--bootstrap``
exclude each other: one says which broker to use, the other asks to start some.

``bootstrap`` is a broker the run did not start (an Apache Kafka, a Redpanda, an ``oncelog
broker`` of the user's): the faults that apply there are ``BOOTSTRAP_FAULTS`` - kills of the
processes the run started and ``drop-acks`` through the run's own proxy - and
``kill-executor`` with a Spark cluster; the faults that act on brokers (``BROKER_FAULTS``:
``kill-broker``, the cluster faults and network partitions) are refused in one sentence, and
without ``--faults`` the default leaves ``kill-broker`` out.
"""  # noqa: E501 - a table's rows stay one line each

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .checker import SEMANTICS, TRANSACTIONAL, normalize_semantics
from .schedule import (CLUSTER_FAULTS, NETWORK_FAULTS, SPARK_CLUSTER_FAULTS, FaultSchedule,
                       parse_faults)

__all__ = ["BOOTSTRAP_FAULTS", "BROKER_FAULTS", "BadInput", "CONTROLS", "Control",
           "DEFAULT_FAULTS", "EXACTLY_ONCE_STAGES",
           "ISOLATION_LEVELS", "RunFailed", "Scenario"]

# the CLI's default; the cluster faults are asked for by name (they need --brokers)
DEFAULT_FAULTS = ("kill-broker", "kill-consumer", "kill-driver", "drop-acks")
# Faults that act on the brokers themselves: only on brokers the run started (its own broker
# or --brokers N), never on a --bootstrap broker, which it has no process or namespace of.
BROKER_FAULTS = ("kill-broker", *CLUSTER_FAULTS)
# What applies to a broker the run did not start (--bootstrap): the processes the run started
# (consumer, copy job, transform worker, Spark executors) and the wire through its own proxy.
BOOTSTRAP_FAULTS = tuple(name for name in DEFAULT_FAULTS if name not in BROKER_FAULTS)
EXACTLY_ONCE_STAGES = ("pipeline", "transform", "at-least-once-consumer")
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
STANDALONE = "standalone"   # --spark-master standalone: the run starts a cluster of its own
_LOCAL_MASTER = re.compile(r"^local(\[(\d+|\*)(,\d+)?\])?$")
_HOST_PORT = re.compile(r"^[^\s:/,]+:\d{1,5}$")


@dataclass(frozen=True)
class Control:
    anomaly: str            # the checker's name for what it must find
    semantics: str          # the one semantics it runs
    faults: tuple[str, ...]  # its faults unless --faults says otherwise
    broken: str             # what is deliberately broken, for the run's warnings


CONTROLS = {
    "lost": Control("lost", "at_least_once", ("kill-consumer",),
                    "the at-least-once run was delivered by the at-most-once consumer (commit "
                    "offsets, then process)"),
    "duplicated": Control("duplicated", "exactly_once", ("kill-consumer",),
                          "exactly-once was delivered by the at-least-once consumer (process, "
                          "then commit offsets)"),
    "reordered": Control("reordered", "exactly_once", ("drop-acks",),
                         "exactly-once was produced with the at-least-once producer preset (no "
                         "idempotence, 5 requests in flight, a 2 s request timeout) and "
                         "drop-acks drops whole Produce requests: a dropped one times out and "
                         "is sent again after later ones were written"),
    "aborted-reads": Control("aborted_reads", "transactional", ("kill-consumer",),
                             "the transactional run was read with read_uncommitted"),
}


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
    control: str | None = None              # a negative control: a key of CONTROLS
    drain_timeout_s: float = 120.0
    spark_master: str | None = None         # None: local[2]; standalone; spark://HOST:PORT
    # --command-config: the clients' security protocol (librdkafka's name; the file's
    # settings reach the clients through ONCELOG_COMMAND_CONFIG, never the scenario)
    security_protocol: str = "PLAINTEXT"
    broker_settings: dict[str, str] = field(default_factory=lambda: {
        "group.initial.rebalance.delay.ms": "0"})

    @classmethod
    def build(cls, *, semantics: str | None, faults: str | None, duration_s: float, seed: int,
              brokers: int | None = None, control: str | None = None,
              **options: Any) -> Scenario:
        """``brokers=None``: not given (one broker, or none with ``bootstrap``);
        ``semantics``/``faults`` None: not given (all and ``DEFAULT_FAULTS`` - without the
        broker faults with ``bootstrap``: ``BOOTSTRAP_FAULTS`` - or the control's own)."""
        control = cls._control(control, options)
        master = options.get("spark_master")
        if isinstance(master, str):
            master = master.strip()
            options["spark_master"] = STANDALONE if master.lower() == STANDALONE else master
        if semantics is None:
            semantics = CONTROLS[control].semantics if control else "all"
        if faults is None:
            defaults = BOOTSTRAP_FAULTS if options.get("bootstrap") else DEFAULT_FAULTS
            if options.get("security_protocol", "PLAINTEXT") != "PLAINTEXT":
                defaults = tuple(name for name in defaults if name != "drop-acks")
            faults = ",".join(CONTROLS[control].faults if control else defaults)
        if control == "duplicated" and options.get("exactly_once_stage", "pipeline") == "pipeline":
            options["exactly_once_stage"] = "at-least-once-consumer"
        elif control == "aborted-reads":
            options["isolation"] = "read_uncommitted"
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
                       control=control, **options)
        scenario._validate()
        return scenario

    @staticmethod
    def _control(control: str | None, options: dict[str, Any]) -> str | None:
        """``--control``, or the control an older flag names (they are its aliases)."""
        stage = options.get("exactly_once_stage", "pipeline")
        isolation = options.get("isolation", "read_committed")
        aliases = [name for name, given in (("duplicated", stage == "at-least-once-consumer"),
                                            ("aborted-reads", isolation == "read_uncommitted"))
                   if given]
        if control is not None and control not in CONTROLS:
            raise BadInput(f"unknown control {control!r}; choose lost, duplicated, reordered "
                           "or aborted-reads")
        if control is None:
            control = aliases[0] if aliases else None
            aliases = aliases[1:]
        others = [name for name in aliases if name != control]
        if others:
            raise BadInput(f"--control {control} and --control {others[0]} (or the flag "
                           "that means it) are two negative controls; run one at a time")
        return control

    def control_of(self, semantics: str) -> Control | None:
        """The negative control that semantics' run is (None: a real run)."""
        control = CONTROLS.get(self.control) if self.control else None
        return control if control is not None and control.semantics == semantics else None

    def producer_socket_timeout_ms(self, semantics: str) -> int | None:
        """The reordered control's producers give up on a request after 2 s (librdkafka's
        default is 60 s) and send it again, behind the requests answered meanwhile."""
        control = self.control_of(semantics)
        return 2000 if control is not None and control.anomaly == "reordered" else None

    def producer_preset(self, semantics: str) -> str:
        """The producer preset the semantics' producers use (the reordered control's
        exactly-once run uses the at-least-once one)."""
        if self.control == "reordered" and semantics == "exactly_once":
            return "at_least_once"
        return semantics

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
        if self.control and CONTROLS[self.control].semantics not in self.semantics:
            wanted = CONTROLS[self.control].semantics.replace("_", "-")
            raise BadInput(f"--control {self.control} is a broken {wanted} run; drop "
                           f"--semantics or include {wanted} in it")
        if self.control in ("duplicated", "reordered") and self.exactly_once_stage == "transform":
            raise BadInput(f"--control {self.control} chooses what delivers the exactly-once "
                           "run itself; drop --exactly-once-stage")
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
            on_brokers = [name for name in self.faults if name in BROKER_FAULTS]
            if on_brokers:
                acts, they = ("acts", "it") if len(on_brokers) == 1 else ("act", "they")
                raise BadInput(f"{' and '.join(on_brokers)} {acts} on brokers the verifier "
                               f"started itself, so {they} cannot be used with --bootstrap (a "
                               "broker it did not start); the faults that apply there are "
                               f"{', '.join(BOOTSTRAP_FAULTS)} (and kill-executor with "
                               "--spark-master)")
        if self.security_protocol != "PLAINTEXT":
            if self.bootstrap is None:
                raise BadInput("--command-config is for a broker the run did not start "
                               "(--bootstrap); the brokers it starts listen in PLAINTEXT")
            if "drop-acks" in self.faults:
                raise BadInput(f"drop-acks is not available with security.protocol "
                               f"{self.security_protocol}: its proxy reads and rewrites "
                               "Kafka's frames, which TLS hides (and SASL is untested "
                               "through it); drop it from --faults")
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
        self._validate_spark_master()
        self.schedule()  # a run too short for its faults fails here

    def _validate_spark_master(self) -> None:
        master = self.spark_master
        spark_faults = [name for name in self.faults if name in SPARK_CLUSTER_FAULTS]
        if master is not None:
            if master != STANDALONE and not _LOCAL_MASTER.match(master) and not (
                    master.startswith("spark://") and all(
                        _HOST_PORT.match(part) for part in master[8:].split(","))):
                raise BadInput(f"--spark-master takes standalone (a cluster the run starts), "
                               f"spark://HOST:PORT or local[N], not {master!r}")
            if not self.runs_pipeline:
                raise BadInput("--spark-master says where the exactly-once run's Spark "
                               "pipeline runs; include exactly-once in --semantics, without "
                               "--exactly-once-stage transform or a control that replaces it")
        if spark_faults and not self.on_spark_cluster:
            raise BadInput(f"{spark_faults[0]} kills an executor of a Spark cluster, and in "
                           "local mode (the default local[2]) the driver runs every task "
                           "itself: there is no executor to kill; add --spark-master "
                           "standalone or spark://HOST:PORT")
        others = [name for name in self.semantics if name != "exactly_once"]
        if spark_faults and others:
            raise BadInput(f"{spark_faults[0]} faults the Spark pipeline's executors, which "
                           f"only the exactly-once run has, not {_prose_list(others)}; add "
                           "--semantics exactly-once")

    @property
    def runs_pipeline(self) -> bool:
        """Whether the exactly-once run is delivered by the Spark copy job."""
        return ("exactly_once" in self.semantics and self.exactly_once_stage == "pipeline"
                and self.control_of("exactly_once") is None)

    @property
    def on_spark_cluster(self) -> bool:
        """The copy job runs on a Spark cluster (its tasks on executors), not in local mode."""
        return self.spark_master is not None and not _LOCAL_MASTER.match(self.spark_master)

    @property
    def is_cluster(self) -> bool:
        return self.brokers >= 2

    @property
    def network_faults(self) -> list[str]:
        """The network partitions asked for: the cluster then starts isolated."""
        return [name for name in self.faults if name in NETWORK_FAULTS]

    @property
    def replication_factor(self) -> int:
        return min(3, self.brokers)

    @property
    def uses_pipeline(self) -> bool:
        return ("exactly_once" in self.semantics and self.exactly_once_stage == "pipeline"
                and self.control is None)

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


def _prose_list(semantics: list[str]) -> str:
    return " or ".join(name.replace("_", "-") for name in semantics)
