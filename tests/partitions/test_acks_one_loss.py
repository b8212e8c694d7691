"""acks=1 with the leader partitioned away (issue 31): the leader of two topics is split from
the other brokers and ZooKeeper while clients still reach it. It goes on acknowledging
acks=1 writes that nobody replicates until its leadership lease ends; a new leader is
elected; after the heal the old leader truncates by leader epoch and those acknowledged
records are gone - the documented loss of acks=1, shown by record id. The acks=all writes
sent meanwhile to the same broker lose nothing: it could not replicate them, so it did not
acknowledge them. While deposed it serves no read past the high watermark it had, and once
its lease is over it answers NOT_LEADER_OR_FOLLOWER."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.cluster.isolation import missing_prerequisites
from oncelog.protocol.errors import ErrorCode
from oncelog.protocol.messages import FetchRequest
from tests.cluster.helpers import wait_until
from tests.integration.raw import RawConnection

from .conftest import SESSION_MS
from .nemesis import assert_replicas_identical, partitions_of, read_all, wait_in_sync
from .workload import ProducerRun

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.skipif(
    bool(missing_prerequisites()), reason="network namespaces need root, ip and nft: "
    + ", ".join(missing_prerequisites()))]

FT = FetchRequest.FetchTopic
FP = FT.FetchPartition
FETCH_VERSION = 11


def _fetch(bootstrap: str, topic: str, offset: int) -> tuple[int, int]:
    """(error code, high watermark) of one fetch of partition 0 at ``offset``."""
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1,
                           topics=[FT(topic=topic, partitions=[
                               FP(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
                                  current_leader_epoch=-1, log_start_offset=-1)])],
                           forgotten_topics_data=[], rack_id="")
    with RawConnection(bootstrap, timeout=5) as raw:
        answer = raw.request(request, FETCH_VERSION).responses[0].partitions[0]
    return answer.error_code, answer.high_watermark


def test_acks_one_writes_a_partitioned_leader_acknowledged_are_lost_after_the_heal(
        isolated_cluster):
    cluster = isolated_cluster()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topics = [NewTopic(name, 1, replica_assignment=[[1, 2, 3]],
                       config={"min.insync.replicas": "2"}) for name in ("ones", "alls")]
    for future in admin.create_topics(topics).values():
        future.result(30)
    for name in ("ones", "alls"):
        wait_in_sync(cluster, name, 1)
    old_leader = cluster.broker(1).bootstrap
    ones = ProducerRun(cluster.bootstrap, "ones", {"acks": 1, "enable.idempotence": False,
                                                   "retries": 1000000}, prefix="one").start()
    alls = ProducerRun(cluster.bootstrap, "alls", {"acks": "all", "enable.idempotence": True},
                       prefix="all").start()
    try:
        wait_until(lambda: len(ones.acked) > 300 and len(alls.acked) > 300,
                   what="records acknowledged before the split")
        cut_at = time.monotonic()
        cluster.split([1], [2, 3, "zookeeper-1"])
        split_at = time.monotonic()  # the drop rules are in place
        answers = []  # (seconds since the cut, error code, high watermark) from broker 1
        new_leader_at = None
        while time.monotonic() - cut_at < 20:
            answers.append((time.monotonic() - cut_at, *_fetch(old_leader, "ones", 0)))
            if new_leader_at is None and all(
                    p.leader in (2, 3) for p in partitions_of(cluster, "ones").values()):
                new_leader_at = time.monotonic() - cut_at
            if new_leader_at is not None and time.monotonic() - cut_at > new_leader_at + 3:
                break
            time.sleep(0.2)
        assert new_leader_at is not None, f"no new leader within 20 s; {answers}"
        cluster.heal()
        wait_in_sync(cluster, "ones", 1)
        wait_in_sync(cluster, "alls", 1)
    finally:
        cluster.heal()
        ones.finish()
        alls.finish()
    lease_s = 0.8 * SESSION_MS / 1000
    context = f"answers of the deposed leader {answers}; new leader after {new_leader_at:.2f} s"

    # deposed: no read past the HW it had (its followers' fetches in flight at the split may
    # still move it in the first moments), NOT_LEADER_OR_FOLLOWER once its lease is over
    served = [(at, hw) for at, error, hw in answers if error == ErrorCode.NONE]
    assert served, context
    high_watermark = max(hw for at, hw in served if at < 0.5)
    assert all(hw == high_watermark for at, hw in served if at >= 0.5), context
    late = [(at, error) for at, error, _ in answers if at > lease_s + 0.5]
    assert late and all(error == ErrorCode.NOT_LEADER_OR_FOLLOWER for _, error in late), context

    kept = {v for v, a in ones.acked.items() if a.acked_at - cut_at > new_leader_at}
    reads = read_all(cluster, "ones", 1, "read_uncommitted",
                     until=lambda reads: {r.value for r in reads} >= kept)
    counts = Counter(r.value for r in reads)
    lost = [v for v in ones.acked if v not in counts]
    assert lost, f"acks=1: nothing was lost ({len(ones.acked)} acknowledged); {context}"
    # what the deposed leader served as committed (below its HW) survives
    below = sorted(ones.acked[v].offset for v in lost if ones.acked[v].offset < high_watermark)
    assert not below, f"lost below the deposed leader's HW {high_watermark}: {below[:5]}"
    # lost are exactly writes the deposed leader acknowledged alone: before its lease ended
    lost_at = sorted(ones.acked[v].acked_at - cut_at for v in lost)
    assert lost_at[-1] < lease_s + 0.5, f"acknowledged after the lease: {lost_at[-5:]}"
    assert max(counts.values()) == 1
    assert kept <= counts.keys(), "records the new leader acknowledged are missing"
    print(f"acks=1: {len(ones.acked)} acknowledged, {len(lost)} lost, acknowledged by the "
          f"deposed leader from {lost_at[0]:.2f} s to {lost_at[-1]:.2f} s after the split; "
          f"new leader {new_leader_at:.2f} s after it")

    reads = read_all(cluster, "alls", 1, "read_uncommitted",
                     until=lambda reads: {r.value for r in reads} >= alls.acked.keys())
    counts = Counter(r.value for r in reads)
    lost_all = sorted(alls.acked.keys() - counts.keys())
    assert not lost_all, f"acks=all lost {lost_all[:5]}; {context}"
    assert max(counts.values()) == 1
    during = sorted(a.acked_at - cut_at for a in alls.acked.values()
                    if a.sent_at > split_at and a.acked_at - cut_at < new_leader_at)
    print(f"acks=all: {len(alls.acked)} acknowledged, none lost; sent after the split and "
          f"acknowledged before the test saw a new leader: {len(during)}")
    cluster.stop()
    assert_replicas_identical(cluster, "ones", 1, context)
    assert_replicas_identical(cluster, "alls", 1, context)
