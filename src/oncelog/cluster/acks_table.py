"""The acks table, measured: what each producer and broker setting keeps when leaders die.

``oncelog cluster acks-table`` starts a 3-broker cluster (RF 3) and runs one row after
another, each on a one-partition topic of its own, while the leader is repeatedly failed in
one of two ways (a *cycle*):

- ``dies-before-followers-fetch``: the followers are paused (SIGSTOP) for a moment shorter
  than ``replica.lag.time.max.ms`` — they stay in the ISR — then the leader is killed with
  kill -9 and the followers resumed. Records the leader had acknowledged alone are on no
  other replica; a clean election picks a follower without them. The old leader is
  restarted a few seconds later and truncates them away.
- ``isr-shrinks-then-leader-dies``: the followers are paused longer than
  ``replica.lag.time.max.ms`` (but shorter than the ZooKeeper session), so the leader drops
  them from the ISR and goes on alone; then it is killed and the followers resumed. Only
  an *unclean* election can elect a follower now (losing what the leader wrote alone);
  otherwise the partition stays offline until the old leader is restarted (10 s later,
  past the 6 s session in which an unclean election happens).

With root on Linux (``ip`` and ``nft``: ``cluster.isolation``) the cluster runs isolated - each
broker and ZooKeeper in a network namespace of its own - and three rows fail the leader by
**network partitions** instead (Jepsen's 2013 case), the producer in the root namespace
still reaching every broker:

- ``leader-partitioned``: the leader is cut off from ZooKeeper and from its followers
  (``split``) for ``PARTITION_S``, longer than the ZooKeeper session; the controller elects a
  follower from the ISR. Until its leadership lease runs out the old leader still takes
  acks=1 writes that no follower will ever fetch: lost when the partition heals and it
  truncates to the new leader's log. acks=all with ``min.insync.replicas=2`` cannot be
  acknowledged without a follower, so nothing is lost - unavailable instead.
- ``isr-shrinks-then-leader-partitioned``: first the followers are cut from the leader
  alone (it still reaches ZooKeeper), long enough for it to shrink the ISR to itself and go
  on alone; then it is cut from ZooKeeper too. Only an unclean election replaces it, losing
  what it wrote alone.

Without root those rows are left out, with one line saying why.

One producer per row sends unique ids at a steady rate throughout (confluent-kafka,
retries on, not idempotent, as the classic at-least-once producer). Per row:
acknowledged (delivery reports without error; with acks=0 every record sent counts), lost
(acknowledged but not in the log afterwards), duplicated (extra copies in the log), and
seconds unavailable (the sum of the gaps longer than ``GAP_S`` between acknowledgements,
while records were waiting).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import cast

from .local import LocalCluster

GAP_S = 0.5
CLUSTER_SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "offsets.topic.num.partitions": "3",
    "default.replication.factor": "3",
}
SHORT_PAUSE_S = 0.8    # < replica.lag.time.max.ms: the followers stay in the ISR
LONG_PAUSE_S = 3.5     # > replica.lag.time.max.ms, < the ZooKeeper session
RESTART_AFTER_S = 3.0  # the killed leader comes back this long after a new one was elected ...
LATE_RESTART_AFTER_S = 10.0  # ... or, when the ISR had shrunk to it, this long: long
                             # past the session, so an unclean election has happened by then
PARTITION_S = 9.0      # a leader cut off: past the 6 s session, so the others elect
PARTITION_CYCLES = ("leader-partitioned", "isr-shrinks-then-leader-partitioned")


@dataclass(frozen=True)
class Row:
    label: str
    acks: str
    min_insync_replicas: int
    unclean: bool
    cycle: str  # dies-before-followers-fetch | isr-shrinks-then-leader-dies


ROWS = (
    Row("acks=0", "0", 1, False, "dies-before-followers-fetch"),
    Row("acks=1", "1", 1, False, "dies-before-followers-fetch"),
    Row("acks=all, min.insync=1", "all", 1, False, "dies-before-followers-fetch"),
    Row("acks=all, min.insync=2", "all", 2, False, "dies-before-followers-fetch"),
    Row("unclean election on", "all", 1, True, "isr-shrinks-then-leader-dies"),
    Row("unclean election off", "all", 1, False, "isr-shrinks-then-leader-dies"),
    Row("unclean on, min.insync=2", "all", 2, True, "isr-shrinks-then-leader-dies"),
    # network partitions (an isolated cluster: root on Linux)
    Row("acks=1, leader cut off", "1", 1, False, "leader-partitioned"),
    Row("acks=all, min.insync=2, leader cut off", "all", 2, False, "leader-partitioned"),
    Row("unclean on, leader cut off", "all", 1, True, "isr-shrinks-then-leader-partitioned"),
)


@dataclass
class RowResult:
    row: Row
    sent: int = 0
    acknowledged: int = 0
    failed: int = 0
    lost: int = 0
    duplicated: int = 0
    unavailable_s: float = 0.0
    kills: int = 0
    events: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["row"] = asdict(self.row)
        return data


class AcksTable:
    def __init__(self, data_dir: Path, *, cycles: int = 3, rate: int = 200,
                 rows: tuple[Row, ...] = ROWS,
                 progress: Callable[[str], None] = lambda line: None,
                 zookeeper_connect: str | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.cycles = cycles
        self.rate = rate
        self.rows = rows
        self.progress = progress
        self.zookeeper_connect = zookeeper_connect
        self.cluster: LocalCluster | None = None

    def run(self) -> list[RowResult]:
        from .isolation import missing_prerequisites
        rows = self.rows
        partitioned = [row for row in rows if row.cycle in PARTITION_CYCLES]
        missing = missing_prerequisites() if partitioned else []
        if missing or self.zookeeper_connect:
            rows = tuple(row for row in rows if row not in partitioned)
            if partitioned:
                why = ", ".join(missing) if missing else "a ZooKeeper of your own"
                self.progress(f"the network-partition rows are left out: they need {why}")
        isolated = bool(partitioned) and len(rows) == len(self.rows)
        self.cluster = LocalCluster(self.data_dir, 3, settings=CLUSTER_SETTINGS,
                                    zookeeper_connect=self.zookeeper_connect,
                                    isolated=isolated)
        with self.cluster:
            network = self.cluster.network
            self.progress(f"cluster up: {self.cluster.bootstrap}"
                          + (f" (each broker in a network namespace of its own, named "
                             f"{network.prefix}-*)" if network is not None else ""))
            return [self._run_row(index, row) for index, row in enumerate(rows)]

    # -- one row -------------------------------------------------------------------------

    def _run_row(self, index: int, row: Row) -> RowResult:
        from confluent_kafka.admin import NewTopic
        cluster = self.cluster
        assert cluster is not None  # started by run()
        topic = f"acks-table-{index}"
        admin = self._admin()
        admin.create_topics([NewTopic(topic, 1, 3, config={
            "min.insync.replicas": str(row.min_insync_replicas),
            "unclean.leader.election.enable": str(row.unclean).lower()})])[topic].result(15)
        self._wait_healthy(topic)
        self.progress(f"{row.label}: {self.cycles} x {row.cycle}")
        result = RowResult(row)
        producer = _SteadyProducer(cluster.bootstrap, topic, row.acks, self.rate)
        producer.start()
        try:
            time.sleep(1.0)
            for _ in range(self.cycles):
                self._cycle(topic, row, result)
                time.sleep(1.0)
        except BaseException:
            # Ctrl-C (or a failure): stop at once - waiting for the producer's last
            # acknowledgements (up to 90 s while a leader is down) kept the cluster, and its
            # network namespaces, alive past the caller's patience
            producer.stop(flush_timeout_s=0)
            raise
        producer.stop()
        result.sent, result.failed = producer.sent, len(producer.failed)
        acknowledged = producer.acknowledged
        result.acknowledged = len(acknowledged)
        result.unavailable_s = round(producer.unavailable_s(), 1)
        self._wait_healthy(topic, timeout_s=60)
        values = _read_all(cluster.bootstrap, topic)
        counts: dict[bytes, int] = {}
        for value in values:
            counts[value] = counts.get(value, 0) + 1
        result.lost = sum(1 for value in acknowledged if value not in counts)
        result.duplicated = sum(count - 1 for count in counts.values())
        self.progress(f"{row.label}: acknowledged {result.acknowledged}, lost {result.lost}, "
                      f"duplicated {result.duplicated}, unavailable {result.unavailable_s} s")
        return result

    def _cycle(self, topic: str, row: Row, result: RowResult) -> None:
        if row.cycle in PARTITION_CYCLES:
            self._partition_cycle(topic, row, result)
            return
        cluster = self.cluster
        assert cluster is not None  # started by run()
        leader = self._wait_healthy(topic)
        followers = [n for n in cluster.brokers if n != leader]
        long_pause = row.cycle == "isr-shrinks-then-leader-dies"
        pause_s = LONG_PAUSE_S if long_pause else SHORT_PAUSE_S
        for follower in followers:
            cluster.pause(follower)
        try:
            time.sleep(pause_s)
            cluster.kill(leader)
        finally:
            for follower in followers:
                cluster.resume(follower)
        result.kills += 1
        result.events.append(f"paused {followers} for {pause_s} s, killed leader {leader}")
        if not long_pause:
            # A clean election must happen before the old leader is back: on a loaded
            # machine the controller may notice the death late, and a leader restarted
            # first would simply lead again with everything it had acknowledged.
            self._wait_for_new_leader(topic, leader)
        time.sleep(LATE_RESTART_AFTER_S if long_pause else RESTART_AFTER_S)
        cluster.restart(leader)

    def _partition_cycle(self, topic: str, row: Row, result: RowResult) -> None:
        cluster = self.cluster
        assert cluster is not None and cluster.network is not None  # isolated by run()
        leader = self._wait_healthy(topic)
        followers = [n for n in cluster.brokers if n != leader]
        zookeepers = [n for n in cluster.network.nodes if n.startswith("zookeeper-")]
        if row.cycle == "isr-shrinks-then-leader-partitioned":
            alone = cluster.split([leader], followers)  # it still reaches ZooKeeper
            time.sleep(LONG_PAUSE_S)  # > replica.lag.time.max.ms: the ISR shrinks to it
            cluster.heal(alone)
        cut = cluster.split([leader], [*followers, *zookeepers])
        result.kills += 1
        result.events.append(f"cut leader {leader} off from {followers} and ZooKeeper for "
                             f"{PARTITION_S:g} s")
        try:
            time.sleep(PARTITION_S)
            if not row.unclean and row.cycle == "leader-partitioned":
                self._wait_for_new_leader(topic, leader, ask=followers)
        finally:
            cluster.heal(cut)

    def _wait_for_new_leader(self, topic: str, old: int, timeout_s: float = 60.0,
                             ask: list[int] | None = None) -> None:
        deadline = time.monotonic() + timeout_s
        admin = self._admin()
        while time.monotonic() < deadline:
            try:
                leader = (self._leader_as_seen_by(topic, ask) if ask
                          else admin.list_topics(topic, timeout=3).topics[topic]
                          .partitions[0].leader)
                if leader >= 0 and leader != old:
                    return
            except Exception:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"{topic}: no new leader within {timeout_s} s of killing {old}")

    # -- cluster helpers -----------------------------------------------------------------

    def _admin(self):
        from confluent_kafka.admin import AdminClient
        return AdminClient({"bootstrap.servers": self.cluster.bootstrap,
                            "logger": _quiet_logger()})

    def _leader_as_seen_by(self, topic: str, brokers: list[int]) -> int:
        """The partition's leader as the first of ``brokers`` that answers says (asked of
        each directly: a leader cut off from ZooKeeper may not know it was replaced)."""
        from ..client.metadata import fetch_metadata
        cluster = self.cluster
        assert cluster is not None  # started by run()
        answer = fetch_metadata(",".join(cluster.broker(n).bootstrap for n in brokers),
                                [topic], timeout_s=3)
        found = next(t for t in answer.topics if t.name == topic)
        return found.partitions[0].leader_id if found.partitions else -1

    def _wait_healthy(self, topic: str, timeout_s: float = 60.0) -> int:
        """Until the partition has a leader and all three replicas in sync; its leader."""
        deadline = time.monotonic() + timeout_s
        admin = self._admin()
        while time.monotonic() < deadline:
            try:
                partition = admin.list_topics(topic, timeout=3).topics[topic].partitions[0]
                if partition.leader >= 0 and len(partition.isrs) == 3:
                    return partition.leader
            except Exception:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"{topic} did not get a leader and a full ISR within {timeout_s} s")


class _SteadyProducer:
    """Sends b"id-N" at ``rate`` per second from a thread; records delivery reports."""

    def __init__(self, bootstrap: str, topic: str, acks: str, rate: int) -> None:
        from confluent_kafka import Producer
        self.topic = topic
        self.rate = rate
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": False,
            "retries": 2147483647, "message.timeout.ms": 60000, "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 1000, "logger": _quiet_logger()})
        self.sent = 0
        self.acknowledged: list[bytes] = []
        self.ack_times: list[float] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _on_delivery(self, error, message) -> None:
        if error is not None:
            self.failed.append(str(error))
        else:
            self.acknowledged.append(message.value())
            self.ack_times.append(time.monotonic())

    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.producer.produce(self.topic, b"id-%08d" % self.sent,
                                  on_delivery=self._on_delivery)
            self.sent += 1
            next_at += interval
            self.producer.poll(max(0.0, next_at - time.monotonic()))

    def stop(self, flush_timeout_s: float = 90) -> None:
        self._stop.set()
        self._thread.join()
        self.producer.flush(flush_timeout_s)

    def unavailable_s(self) -> float:
        times = sorted(self.ack_times)
        return sum(b - a for a, b in zip(times, times[1:]) if b - a > GAP_S)


def _read_all(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "acks-table",
                         "enable.auto.commit": False, "logger": _quiet_logger()})
    _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    position = 0
    try:
        while position < end and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(cast(bytes, message.value()))  # a record of ours: a value
                position = cast(int, message.offset()) + 1
    finally:
        consumer.close()
    return values


def _quiet_logger():
    import logging
    quiet = logging.getLogger("oncelog.acks_table.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    return quiet


def write_results(results: list[RowResult], path: Path) -> None:
    path.write_text(json.dumps([r.to_dict() for r in results], indent=1))
