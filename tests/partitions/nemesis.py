"""What the partition tests share: a seeded random schedule of network faults (Jepsen's
nemesis: isolate, split, cut-link, leader-from-ZooKeeper) applied to an isolated
``LocalCluster``; client settings for a network where a request to a cut-off broker is
never answered; reading a topic back; and each replica's log read from its files once the
cluster is stopped.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.cluster.local import LocalCluster
from oncelog.storage import Log, LogConfig
from tests.cluster.helpers import wait_until

# A request to a cut-off broker is never answered (no RST, no FIN): the client must give up
# on it by itself, and learn the new leader from the others' metadata.
CLIENT = {
    "request.timeout.ms": 5000,
    "socket.timeout.ms": 5000,
    "topic.metadata.refresh.interval.ms": 1000,
    "metadata.max.age.ms": 5000,
    "reconnect.backoff.max.ms": 1000,
}

FAULT_KINDS = ("isolate", "split", "cut", "leader-from-zookeeper")


@dataclass
class Event:
    at_s: float  # since the schedule started
    caption: str
    target_leader: bool = False  # the fault took the watched partition's leader away


@dataclass
class Schedule:
    """A seeded random run of faults: each held 3-9 s, then healed, then 3-6 s of quiet.

    ``targets`` returns the brokers worth aiming at now (the watched partition's leader, a
    coordinator's broker); about half the faults aim at one of them."""
    cluster: LocalCluster
    rng: random.Random
    targets: Callable[[], list[int]] = lambda: []
    hold_s: tuple[float, float] = (3.0, 9.0)
    quiet_s: tuple[float, float] = (3.0, 6.0)
    events: list[Event] = field(default_factory=list)
    started: float = 0.0

    def run(self, duration_s: float, stop: threading.Event | None = None) -> None:
        self.started = time.monotonic()
        deadline = self.started + duration_s
        while time.monotonic() < deadline and not (stop and stop.is_set()):
            caption, aimed = self._inject()
            self._note(caption, aimed)
            time.sleep(min(self.rng.uniform(*self.hold_s), max(deadline - time.monotonic(), 0)))
            self.cluster.heal()
            self._note("heal")
            time.sleep(self.rng.uniform(*self.quiet_s))
        self.cluster.heal()

    def _note(self, caption: str, aimed: bool = False) -> None:
        self.events.append(Event(round(time.monotonic() - self.started, 2), caption, aimed))

    def _inject(self) -> tuple[str, bool]:
        brokers = sorted(self.cluster.brokers)
        assert self.cluster.network is not None, "an isolated cluster"
        zookeepers = [n for n in self.cluster.network.nodes if n.startswith("zookeeper-")]
        kind = self.rng.choice(FAULT_KINDS)
        aimed_at = [b for b in self.targets() if b in brokers]
        aim = bool(aimed_at) and self.rng.random() < 0.6
        victim = self.rng.choice(aimed_at) if aim else self.rng.choice(brokers)
        if kind == "isolate":
            fault = self.cluster.isolate(victim)
        elif kind == "split":
            # the victim, perhaps with one more broker, against everyone else (ZooKeeper
            # on a side chosen at random: the side without it loses its sessions)
            side = [victim] + ([self.rng.choice([b for b in brokers if b != victim])]
                               if self.rng.random() < 0.3 else [])
            others: list[str | int] = [b for b in brokers if b not in side]
            if self.rng.random() < 0.25:
                side_nodes: list[str | int] = [*side, *zookeepers]
            else:
                side_nodes, others = list(side), [*others, *zookeepers]
            fault = self.cluster.split(side_nodes, others)
        elif kind == "cut":
            peers: list[str | int] = [b for b in brokers if b != victim] + zookeepers
            peer = self.rng.choice(peers)
            a, b = (victim, peer) if self.rng.random() < 0.5 else (peer, victim)
            fault = self.cluster.cut(a, b)
        else:
            fault = self.cluster.cut_from_zookeeper(victim)
        return fault.caption, aim

    def describe(self) -> str:
        return "; ".join(f"{e.at_s:.1f}s {e.caption}" for e in self.events)


def create_topic(cluster: LocalCluster, name: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config=config)])[name].result(30)
    wait_in_sync(cluster, name, partitions)


def partitions_of(cluster: LocalCluster, topic: str) -> dict:
    """The topic's partitions as some broker reachable from here reports them ({} if none
    answers)."""
    try:
        metadata = AdminClient({"bootstrap.servers": cluster.bootstrap, **_ADMIN}).list_topics(
            timeout=3)
    except Exception:
        return {}
    found = metadata.topics.get(topic)
    return dict(found.partitions) if found is not None and found.error is None else {}


_ADMIN = {"socket.timeout.ms": 3000, "socket.connection.setup.timeout.ms": 3000}


def leader_of(cluster: LocalCluster, topic: str, partition: int = 0) -> int:
    found = partitions_of(cluster, topic).get(partition)
    return found.leader if found is not None else -1


def wait_in_sync(cluster: LocalCluster, topic: str, partitions: int,
                 timeout_s: float = 90.0) -> None:
    """Until every partition has a leader and all three replicas in its ISR."""
    def in_sync() -> bool:
        found = partitions_of(cluster, topic)
        return len(found) == partitions and all(
            p.leader > 0 and sorted(p.isrs) == [1, 2, 3] for p in found.values())
    wait_until(in_sync, timeout_s, what=f"every replica of {topic} in sync")


@dataclass(frozen=True)
class Read:
    partition: int
    offset: int
    value: bytes


def read_all(cluster: LocalCluster, topic: str, partitions: int, isolation: str,
             until: Callable[[list[Read]], bool], timeout_s: float = 60.0) -> list[Read]:
    """Every record of ``topic`` from offset 0 (assign, no group) until ``until(reads)``
    holds or the timeout, then 2 s more to let duplicates or extras show."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "partition-reader",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         **CLIENT})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    reads: list[Read] = []
    deadline = time.monotonic() + timeout_s
    settle_until = None
    try:
        while time.monotonic() < (settle_until or deadline):
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    reads.append(Read(message.partition(), message.offset(), message.value()))
            if settle_until is None and until(reads):
                settle_until = time.monotonic() + 2.0
    finally:
        consumer.close()
    return reads


def replica_bytes(cluster: LocalCluster, node_id: int, topic: str, partition: int) -> bytes:
    """One broker's copy of a partition, every batch as stored (control batches included),
    read from its files: stop the cluster first."""
    directory = cluster.broker(node_id).data_dir / f"{topic}-{partition}"
    config = LogConfig(segment_bytes=1 << 30, segment_ms=1 << 40, retention_ms=-1,
                       retention_bytes=-1, index_interval_bytes=4096)
    log = Log.open(Path(directory), config, lambda: int(time.time() * 1000))
    try:
        return bytes(log.read(log.log_start_offset, 1 << 30))
    finally:
        log.close()


def assert_replicas_identical(cluster: LocalCluster, topic: str, partitions: int,
                              context: str) -> None:
    for partition in range(partitions):
        copies = {n: replica_bytes(cluster, n, topic, partition) for n in cluster.brokers}
        sizes = {n: len(c) for n, c in copies.items()}
        assert len(set(copies.values())) == 1, (
            f"{topic}-{partition}: replicas differ (bytes per broker {sizes}); {context}")
