"""Network partitions of a verify cluster (issue 31): a run with any of these faults starts its
cluster isolated - every broker and each of three ZooKeeper nodes in a network namespace of
its own on a bridge (``cluster.isolation``, ``LocalCluster(isolated=True)``) - and cuts it.

| fault | inject | heal |
|---|---|---|
| ``partition-leader`` | the broker leading the most partitions of the run's topic cut off from everything: clients, brokers, ZooKeeper | the network healed |
| ``isolate-zookeeper`` | one ZooKeeper node of three (seeded) cut off from everything: a minority, which must change nothing | healed |
| ``split`` | two halves: the broker leading the most partitions with one seeded ZooKeeper node, against the other brokers and ZooKeeper nodes (a leader on the minority side); clients reach both | healed |
| ``cut-link`` | one directed link: the leader's packets to one seeded follower dropped, the follower's to it delivered (so the follower cannot fetch) | healed |
| ``slow-net`` | every two brokers 10 ms +- 5 ms apart (TCP connections opened from then on, through the delay relay) with 1 % of packets lost | healed |

The broker faults pick "the leader" as ``kill-leader`` does (``faults.cluster``: the broker
leading the most partitions, the lowest id among equals); a seeded pick is derived from the
run's seed and the fault's time. Each is ready only once the cluster has recovered from the
last fault (``ClusterTarget.recovered``): a fault against a cluster still electing tests a
two-fault case RF 3 does not promise to survive.

What the caption says (``landing``): what was cut (the isolation layer's caption), for how
long, and who led the topic's partitions while it was cut (asked, just before the heal, of
the brokers that still answer) - so a report shows the leader was really cut off and
replaced, or that a minority partition changed nothing.
"""  # noqa: E501 - a table's rows stay one line each

from __future__ import annotations

import time
from typing import Any

from ...cluster.isolation import Fault
from ..schedule import ScheduledFault
from .cluster import ClusterTarget, _by_partition

__all__ = ["CutLink", "IsolateZooKeeper", "PartitionLeader", "SlowNet", "Split"]

SLOW_DELAY_MS, SLOW_JITTER_MS, SLOW_LOSS_PERCENT = 10.0, 5.0, 1.0


class _NetworkFault:
    """Cut something at inject, heal exactly that at heal."""

    name: str

    def __init__(self, target: ClusterTarget) -> None:
        self.target = target
        self._fault: Fault | None = None
        self._cut_at = 0.0
        self._detail: dict[str, Any] = {}

    def ready(self) -> bool:
        return self.target.recovered()

    def _leader(self, scheduled: ScheduledFault, led: dict[int, list[int]]) -> int:
        if not led:
            return self.target.pick(scheduled, self.target.live() or self.target.node_ids)
        return max(sorted(led), key=lambda node: len(led[node]))

    def apply(self, scheduled: ScheduledFault, led: dict[int, list[int]]
              ) -> tuple[Fault, dict[str, Any]]:
        raise NotImplementedError

    def inject(self, scheduled: ScheduledFault) -> dict:
        led = self.target.leaderships()
        self._fault, detail = self.apply(scheduled, led)
        self._cut_at = time.monotonic()
        self._detail = detail
        return {**detail, "caption": self._fault.caption, "running": True,
                "leaders": _by_partition(led), "signal": "network"}

    def heal(self) -> dict:
        fault, self._fault = self._fault, None
        assert fault is not None, "heal after inject"
        # who led while it was cut, as the brokers that still answer say
        meanwhile = _by_partition(self.target.leaderships())
        self.target.cluster.heal(fault)
        return {**self._detail, "caption": fault.caption, "leaders_meanwhile": meanwhile,
                "cut_s": round(time.monotonic() - self._cut_at, 3)}


class PartitionLeader(_NetworkFault):
    name = "partition-leader"

    def apply(self, scheduled: ScheduledFault, led: dict[int, list[int]]
              ) -> tuple[Fault, dict[str, Any]]:
        broker = self._leader(scheduled, led)
        return self.target.cluster.isolate(broker), {"broker": broker,
                                                      "led": led.get(broker, [])}


class IsolateZooKeeper(_NetworkFault):
    name = "isolate-zookeeper"

    def apply(self, scheduled: ScheduledFault, led: dict[int, list[int]]
              ) -> tuple[Fault, dict[str, Any]]:
        nodes = self._zookeeper_nodes()
        node = self.target.pick(scheduled, nodes)
        return self.target.cluster.isolate(f"zookeeper-{node}"), {
            "zookeeper": node, "zookeepers": len(nodes)}

    def _zookeeper_nodes(self) -> list[int]:
        ensemble = self.target.cluster.ensemble
        return sorted(ensemble.nodes) if ensemble is not None else [1]


class Split(_NetworkFault):
    name = "split"

    def apply(self, scheduled: ScheduledFault, led: dict[int, list[int]]
              ) -> tuple[Fault, dict[str, Any]]:
        cluster = self.target.cluster
        broker = self._leader(scheduled, led)
        ensemble = cluster.ensemble
        zookeepers = sorted(ensemble.nodes) if ensemble is not None else [1]
        with_leader = self.target.pick(scheduled, zookeepers)
        minority = [f"broker-{broker}", f"zookeeper-{with_leader}"]
        majority = [f"broker-{n}" for n in self.target.node_ids if n != broker] + \
            [f"zookeeper-{n}" for n in zookeepers if n != with_leader]
        return cluster.split(minority, majority), {
            "broker": broker, "led": led.get(broker, []), "minority": minority,
            "majority": majority}


class CutLink(_NetworkFault):
    name = "cut-link"

    def apply(self, scheduled: ScheduledFault, led: dict[int, list[int]]
              ) -> tuple[Fault, dict[str, Any]]:
        leader = self._leader(scheduled, led)
        followers = [n for n in self.target.node_ids if n != leader]
        follower = self.target.pick(scheduled, followers)
        return self.target.cluster.cut(leader, follower), {
            "broker": leader, "led": led.get(leader, []), "follower": follower}


class SlowNet(_NetworkFault):
    name = "slow-net"

    def __init__(self, target: ClusterTarget) -> None:
        super().__init__(target)
        self._faults: list[Fault] = []

    def inject(self, scheduled: ScheduledFault) -> dict:
        cluster = self.target.cluster
        nodes = self.target.node_ids
        led = self.target.leaderships()
        self._faults = [cluster.slow(a, b, SLOW_DELAY_MS, SLOW_JITTER_MS, SLOW_LOSS_PERCENT)
                        for i, a in enumerate(nodes) for b in nodes[i + 1:]]
        self._cut_at = time.monotonic()
        self._detail = {"delay_ms": SLOW_DELAY_MS, "jitter_ms": SLOW_JITTER_MS,
                        "loss_percent": SLOW_LOSS_PERCENT, "links": len(self._faults)}
        return {**self._detail, "caption": _slow_caption(nodes), "running": True,
                "leaders": _by_partition(led), "signal": "network"}

    def apply(self, scheduled: ScheduledFault, led: dict[int, list[int]]
              ) -> tuple[Fault, dict[str, Any]]:
        raise AssertionError("slow-net applies one fault per link in inject")

    def heal(self) -> dict:
        faults, self._faults = self._faults, []
        meanwhile = _by_partition(self.target.leaderships())
        for fault in faults:
            self.target.cluster.heal(fault)
        return {**self._detail, "caption": _slow_caption(self.target.node_ids),
                "leaders_meanwhile": meanwhile,
                "cut_s": round(time.monotonic() - self._cut_at, 3)}


def _slow_caption(nodes: list[int]) -> str:
    return (f"brokers {', '.join(map(str, nodes))} {SLOW_DELAY_MS:g}±{SLOW_JITTER_MS:g} ms "
            f"apart, {SLOW_LOSS_PERCENT:g}% loss")
