"""Cluster faults: brokers of a ``LocalCluster`` killed or paused while the workload runs.

| fault | inject | heal |
|---|---|---|
| ``kill-leader`` (``KillLeader``) | ``kill -9`` of the broker leading the most partitions of the run's topic | restart it (same port, data, node id) |
| ``pause-broker`` (``PauseBroker``) | ``SIGSTOP`` of a seeded broker among those leading partitions of the topic: alive, silent, its ZooKeeper session ticking | ``SIGCONT`` |
| ``kill-broker`` (``KillClusterBroker``) | ``kill -9`` of a seeded broker | restart it |

A killed broker's ZooKeeper session outlives it until the session timeout, so the
controller moves its leaderships only then; its restart waits for that same expiry before it
registers again (``broker.Broker._register_in_cluster``). A pause shorter than the session
costs the paused broker at most its place in the ISR (``replica.lag.time.max.ms``); a longer
one also costs its session and so its leaderships, and when it wakes it must not acknowledge
anything as the leader it no longer is (issue 11's split-brain rule, which the checker would
see as lost records).

**Ready.** Every cluster fault is ready (see ``faults.nemesis``) only when the cluster has
recovered from the last one: every broker runs and is not paused, and each of them reports
every partition of the run's topic with a leader and a full ISR, the same leaders on every
broker. Faulting a cluster still electing or catching up would test a two-fault scenario the
replication factor does not promise to survive (RF 3 with ``min.insync.replicas=2`` keeps
acknowledged writes through one broker lost, not two).

**Which broker.** Who leads what is only known when the fault happens, so the schedule
cannot name the broker; a seeded pick is drawn from ``random.Random`` seeded with the run's
seed, the fault's name and its scheduled time, so ``--seed`` picks the same broker again
whenever the cluster's state is the same. ``kill-leader`` takes the broker leading the most
partitions (the lowest node id among equals); ``pause-broker`` picks among the brokers that
lead at least one partition (a paused leader is the split-brain case), any broker if none
does.

Metadata is asked of each broker directly (``client.metadata.fetch_metadata`` to one
address), not through a client that may answer from any broker it likes.
"""  # noqa: E501 - a table's rows stay one line each

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from ..scenario import RunFailed
from ..schedule import ScheduledFault

__all__ = ["ClusterTarget", "KillClusterBroker", "KillLeader", "PartitionView", "PauseBroker"]

METADATA_TIMEOUT_S = 2.0
RESTART_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PartitionView:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def healthy(self) -> bool:
        return self.leader >= 0 and set(self.isr) == set(self.replicas)


class ClusterTarget:
    """The cluster and the run's topic as the cluster faults see them, shared by them so a
    paused broker is known to all (a paused broker would only time out when asked)."""

    def __init__(self, cluster, topic: str, partitions: int, *, seed: int,
                 session_timeout_ms: int) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partitions = partitions
        self.seed = seed
        self.session_timeout_ms = session_timeout_ms
        self.paused: set[int] = set()

    @property
    def node_ids(self) -> list[int]:
        return sorted(self.cluster.brokers)

    def live(self) -> list[int]:
        return [node for node in self.node_ids
                if self.cluster.is_running(node) and node not in self.paused]

    def view_of(self, node_id: int) -> dict[int, PartitionView] | None:
        """The topic's partitions as broker ``node_id`` reports them; None if it does not
        answer or does not know the topic."""
        from ...client.metadata import fetch_metadata
        try:
            metadata = fetch_metadata(self.cluster.broker(node_id).bootstrap, [self.topic],
                                      timeout_s=METADATA_TIMEOUT_S)
        except ConnectionError:
            return None
        found = next((topic for topic in metadata.topics if topic.name == self.topic), None)
        if found is None or found.error_code != 0:
            return None
        return {p.partition_index: PartitionView(p.leader_id, tuple(p.replica_nodes),
                                                 tuple(p.isr_nodes))
                for p in found.partitions}

    def recovered(self) -> bool:
        """Every broker up, and each reporting every partition led and fully in sync, with
        the same leaders."""
        live = self.live()
        if len(live) != len(self.node_ids):
            return False
        views = [self.view_of(node) for node in live]
        known = [view for view in views if view is not None]
        if len(known) != len(views) or any(
                len(view) != self.partitions or not all(p.healthy for p in view.values())
                for view in known):
            return False
        leaders = [{index: p.leader for index, p in view.items()} for view in known]
        return all(each == leaders[0] for each in leaders)

    def leaderships(self) -> dict[int, list[int]]:
        """Node id -> the partitions it leads, as the first live broker that answers says."""
        for node in self.live():
            view = self.view_of(node)
            if view:
                led: dict[int, list[int]] = {}
                for index, partition in sorted(view.items()):
                    if partition.leader >= 0:
                        led.setdefault(partition.leader, []).append(index)
                return led
        return {}

    def pick(self, scheduled: ScheduledFault, nodes: list[int]) -> int:
        """A seeded choice among ``nodes`` for this fault (see the module docstring)."""
        rng = random.Random(f"{self.seed} {scheduled.name} {scheduled.at_s}")
        return rng.choice(sorted(nodes))

    def kill(self, node_id: int) -> int | None:
        pid = self.cluster.broker(node_id).pid
        self.cluster.kill(node_id)
        return pid

    def restart(self, node_id: int, fault: str) -> int | None:
        try:
            self.cluster.restart(node_id, RESTART_TIMEOUT_S)
        except RuntimeError as error:
            raise RunFailed(f"broker {node_id} did not restart after {fault}: {error}") from None
        return self.cluster.broker(node_id).pid


class _KillAndRestart:
    """``kill -9`` of one broker (which one: ``choose``), restarted at heal."""

    name: str

    def __init__(self, target: ClusterTarget) -> None:
        self.target = target
        self._node: int | None = None
        self._killed_at = 0.0

    def ready(self) -> bool:
        return self.target.recovered()

    def choose(self, scheduled: ScheduledFault, led: dict[int, list[int]]) -> int:
        raise NotImplementedError

    def inject(self, scheduled: ScheduledFault) -> dict:
        led = self.target.leaderships()
        node = self._node = self.choose(scheduled, led)
        running = self.target.cluster.is_running(node)
        pid = self.target.kill(node)
        self._killed_at = time.monotonic()
        return {"broker": node, "led": led.get(node, []), "pid": pid, "signal": "SIGKILL",
                "running": running}

    def heal(self) -> dict:
        node, self._node = self._node, None
        assert node is not None, "heal after inject"
        pid = self.target.restart(node, self.name)
        return {"broker": node, "pid": pid,
                "down_s": round(time.monotonic() - self._killed_at, 3),
                "leaders": _by_partition(self.target.leaderships())}


class KillLeader(_KillAndRestart):
    name = "kill-leader"

    def choose(self, scheduled: ScheduledFault, led: dict[int, list[int]]) -> int:
        if not led:  # nobody answered: still kill someone, seeded
            return self.target.pick(scheduled, self.target.live() or self.target.node_ids)
        return max(sorted(led), key=lambda node: len(led[node]))


class KillClusterBroker(_KillAndRestart):
    """``kill-broker`` on a cluster: a seeded broker, leader or not."""

    name = "kill-broker"

    def choose(self, scheduled: ScheduledFault, led: dict[int, list[int]]) -> int:
        return self.target.pick(scheduled, self.target.live() or self.target.node_ids)


class PauseBroker:
    """``SIGSTOP`` of a seeded broker for ``duration_s``; heal is ``SIGCONT``, always (and
    ``LocalCluster.stop`` resumes a paused broker before stopping it)."""

    name = "pause-broker"

    def __init__(self, target: ClusterTarget) -> None:
        self.target = target
        self._node: int | None = None
        self._paused_at = 0.0

    def ready(self) -> bool:
        return self.target.recovered()

    def inject(self, scheduled: ScheduledFault) -> dict:
        target = self.target
        led = target.leaderships()
        node = self._node = target.pick(scheduled, list(led) or target.live()
                                        or target.node_ids)
        pid = target.cluster.broker(node).pid
        running = target.cluster.is_running(node) and node not in target.paused
        target.cluster.pause(node)
        target.paused.add(node)
        self._paused_at = time.monotonic()
        pause_ms = float(scheduled.params.get("duration_s", 0)) * 1000
        return {"broker": node, "led": led.get(node, []), "pid": pid, "signal": "SIGSTOP",
                "running": running,
                "session_timeout_ms": target.session_timeout_ms,
                "outlasts_session": pause_ms > target.session_timeout_ms}

    def heal(self) -> dict:
        node, self._node = self._node, None
        target = self.target
        if target.cluster.is_running(node):
            target.cluster.resume(node)
        target.paused.discard(node)
        return {"broker": node, "pid": target.cluster.broker(node).pid, "signal": "SIGCONT",
                "paused_s": round(time.monotonic() - self._paused_at, 3),
                "leaders": _by_partition(target.leaderships())}


def _by_partition(led: dict[int, list[int]]) -> dict[str, int]:
    """``{node: [partitions]}`` -> ``{"partition": node}`` (JSON keys are strings)."""
    return {str(index): node for node, indexes in sorted(led.items()) for index in indexes}
