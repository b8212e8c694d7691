"""A consumer group across partitions of its coordinator's broker (issue 31): three
at-least-once consumers (``oncelog.client.consumer.at_least_once``: process, then commit)
read six partitions while records keep coming, and the broker coordinating the group is
isolated, then cut from ZooKeeper only, then split from the other brokers and ZooKeeper.
In the last two clients still reach it: past its lease it answers NOT_COORDINATOR (the
zombie-coordinator rule of issue 11), where it answered a stranger's heartbeat
UNKNOWN_MEMBER_ID while it coordinated. Every acknowledged record is processed; a record is
processed again only where the contract allows it - never after a commit covering it was
acknowledged to some member (a commit the coordinator acknowledged and then lost, or a stale
committed offset served, would show as such a repeat)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest

from oncelog.client.consumer import AT_LEAST_ONCE, GuaranteedConsumer
from oncelog.cluster.isolation import missing_prerequisites
from oncelog.coordinator.record_codec import partition_for
from oncelog.protocol import messages
from oncelog.protocol.errors import ErrorCode
from tests.cluster.helpers import wait_until
from tests.integration.raw import RawConnection

from .conftest import SETTINGS
from .nemesis import assert_replicas_identical, create_topic, leader_of, wait_in_sync
from .workload import ProducerRun

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.skipif(
    bool(missing_prerequisites()), reason="network namespaces need root, ip and nft: "
    + ", ".join(missing_prerequisites()))]

TOPIC = "orders"
PARTITIONS = 6
GROUP = "billing"
CONSUMER = {"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
            "socket.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 1000,
            "metadata.max.age.ms": 5000, "reconnect.backoff.max.ms": 1000}


class Ledger:
    """What the members did, in the order they did it: each record processed (when, by whom)
    and each commit the coordinator acknowledged (when it returned, the offsets)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.processed: list[tuple[float, str, int, int, bytes]] = []
        self.commits: list[tuple[float, str, dict[int, int]]] = []
        self.errors: list[str] = []
        self.failed_commits = 0


class RecordedConsumer(GuaranteedConsumer):
    def __init__(self, name: str, ledger: Ledger, bootstrap: str) -> None:
        self.name = name
        self.ledger = ledger
        super().__init__(AT_LEAST_ONCE, bootstrap, GROUP, [TOPIC], self._process,
                         config=CONSUMER, batch_size=50)

    def _process(self, record) -> None:
        with self.ledger.lock:
            self.ledger.processed.append((time.monotonic(), self.name, record.partition,
                                          record.offset, record.value))

    def _commit(self, consumer, records) -> bool:
        committed = super()._commit(consumer, records)
        if committed:
            offsets = {r.partition: r.offset + 1 for r in records}
            with self.ledger.lock:
                self.ledger.commits.append((time.monotonic(), self.name, offsets))
        else:
            with self.ledger.lock:
                self.ledger.failed_commits += 1
        return committed


def _member(name: str, ledger: Ledger, bootstrap: str, stop: threading.Event) -> None:
    """One member, restarted if it stops on an error (as a supervisor would)."""
    while not stop.is_set():
        consumer = RecordedConsumer(name, ledger, bootstrap)
        watcher = threading.Thread(target=lambda: (stop.wait(), consumer.stop()), daemon=True)
        watcher.start()
        try:
            consumer.run()
        except Exception as error:  # recorded; the member starts again
            with ledger.lock:
                ledger.errors.append(f"{name}: {error}")


def _heartbeat(bootstrap: str) -> int:
    """The error code of a Heartbeat for GROUP from a member the group does not have."""
    request = messages.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="stranger")
    with RawConnection(bootstrap, timeout=10) as raw:
        return raw.request(request, 3).error_code


def _repeats_beyond_contract(ledger: Ledger) -> list[str]:
    """Records processed again after a commit covering them had been acknowledged."""
    committed_at: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for at, _, offsets in ledger.commits:
        for partition, offset in offsets.items():
            committed_at[partition].append((at, offset))
    first: dict[tuple[int, int], float] = {}
    wrong = []
    for at, name, partition, offset, _ in ledger.processed:
        if (partition, offset) not in first:
            first[(partition, offset)] = at
            continue
        covering = [(c_at, c_off) for c_at, c_off in committed_at[partition]
                    if c_at < at and c_off > offset]
        if covering:
            wrong.append(f"{TOPIC}-{partition}@{offset} again by {name} "
                         f"after commit {covering[0][1]} acknowledged")
    return wrong


def test_group_across_partitions_of_its_coordinator_loses_nothing_repeats_only_uncommitted(
        isolated_cluster):
    cluster = isolated_cluster()
    create_topic(cluster, TOPIC, PARTITIONS, **{"min.insync.replicas": "2"})
    producer = ProducerRun(cluster.bootstrap, TOPIC, {"acks": "all", "enable.idempotence": True},
                           prefix="order", rate=100).start()
    ledger = Ledger()
    stop = threading.Event()
    members = [threading.Thread(target=_member, args=(f"member-{n}", ledger, cluster.bootstrap,
                                                      stop), daemon=True) for n in (1, 2, 3)]
    for member in members:
        member.start()
    offsets_partition = partition_for(GROUP, int(SETTINGS["offsets.topic.num.partitions"]))
    faults = []
    try:
        wait_until(lambda: len(ledger.commits) > 10, 60, what="the group committing")
        coordinator = leader_of(cluster, "__consumer_offsets", offsets_partition)
        # acting as coordinator, it answers a stranger's heartbeat UNKNOWN_MEMBER_ID
        assert _heartbeat(cluster.broker(coordinator).bootstrap) == ErrorCode.UNKNOWN_MEMBER_ID
        for fault in ("isolate", "cut_from_zookeeper", "split"):
            coordinator = wait_until(
                lambda: max(leader_of(cluster, "__consumer_offsets", offsets_partition), 0),
                what="the group's coordinator")
            if fault == "isolate":
                cluster.isolate(coordinator)
            elif fault == "cut_from_zookeeper":
                cluster.cut_from_zookeeper(coordinator)
            else:
                others = [b for b in cluster.brokers if b != coordinator]
                cluster.split([coordinator], [*others, "zookeeper-1"])
            faults.append(f"{fault} broker-{coordinator}")
            time.sleep(4)  # past its lease (0.8 of the 3 s session)
            if fault != "isolate":  # clients still reach it: it must not act as coordinator
                answer = _heartbeat(cluster.broker(coordinator).bootstrap)
                assert answer == ErrorCode.NOT_COORDINATOR, (
                    f"the partitioned coordinator answered {ErrorCode(answer).name}; {faults}")
            time.sleep(6)
            cluster.heal()
            time.sleep(8)
    finally:
        cluster.heal()
        producer.finish()
    context = f"faults {faults}; member errors {ledger.errors[:5]}"
    try:
        wait_until(lambda: {p[4] for p in list(ledger.processed)} >= producer.acked.keys(), 90,
                   what="every acknowledged record processed")
    except TimeoutError:
        missing = producer.acked.keys() - {p[4] for p in ledger.processed}
        raise AssertionError(f"{len(missing)} acknowledged records never processed, e.g. "
                             f"{sorted(missing)[:5]}; {context}") from None
    finally:
        stop.set()
        for member in members:
            member.join(30)
    wrong = _repeats_beyond_contract(ledger)
    assert not wrong, f"{len(wrong)} records repeated past an acknowledged commit: " \
        f"{wrong[:5]}; {context}"
    repeats = len(ledger.processed) - len({(p[2], p[3]) for p in ledger.processed})
    print(f"{len(producer.acked)} acknowledged, {len(ledger.processed)} processed "
          f"({repeats} repeats of uncommitted records), {len(ledger.commits)} commits, "
          f"{ledger.failed_commits} failed; "
          f"{context}")
    wait_in_sync(cluster, "__consumer_offsets", int(SETTINGS["offsets.topic.num.partitions"]))
    cluster.stop()
    assert_replicas_identical(cluster, TOPIC, PARTITIONS, context)
