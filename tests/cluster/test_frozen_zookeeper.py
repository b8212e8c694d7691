"""A frozen ZooKeeper delays only the requests that need it (issue 30).

What happened: CreateTopics and InitProducerId waited on ZooKeeper on the broker's event
loop (``store.create_topic``, a producer-id block), with ``time.sleep`` retries. With
ZooKeeper stopped for 4 s - shorter than the session, nothing else wrong - acks=all produce
to an existing RF 3 topic stalled for the whole 4 s on every broker that had a CreateTopics
pending.

What holds now: store calls run on threads of their own and the handlers await them, so
produce and replication go on; CreateTopics gets Kafka's REQUEST_TIMED_OUT once its own
timeout passes with ZooKeeper still frozen, and the topic is there once ZooKeeper is back;
InitProducerId is answered once it is.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from oncelog.cluster.local import LocalCluster
from oncelog.protocol.errors import ErrorCode
from oncelog.protocol.messages import CreateTopicsRequest, InitProducerIdRequest
from tests.integration.raw import RawConnection

from .helpers import FAST, create_topic, partitions_of, raw_produce, wait_until

pytestmark = pytest.mark.slow

FREEZE_S = 4.0
SESSION_MS = 12_000  # the freeze stays well under the session: nobody expires


def create_topics(bootstrap: str, name: str, timeout_ms: int) -> tuple[int, float]:
    """One CreateTopics; (error code, seconds until answered)."""
    C = CreateTopicsRequest.CreatableTopic
    started = time.monotonic()
    with RawConnection(bootstrap, timeout=30) as conn:
        response = conn.request(CreateTopicsRequest(topics=[C(
            name=name, num_partitions=1, replication_factor=3, assignments=[], configs=[])],
            timeout_ms=timeout_ms, validate_only=False), 7)
    return response.topics[0].error_code, time.monotonic() - started


def init_producer_id(bootstrap: str) -> int:
    with RawConnection(bootstrap, timeout=30) as conn:
        response = conn.request(InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
            producer_epoch=-1), 4)
    return response.error_code


def test_produce_keeps_its_latency_while_zookeeper_is_frozen(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", 3,
                           settings={**FAST, "zookeeper.session.timeout.ms": str(SESSION_MS)})
    cluster.start()
    zookeeper_pid = cluster.zookeeper.pid
    try:
        create_topic(cluster, "steady", partitions=3, replication=3)
        leaders = {p: partitions_of(cluster, "steady")[p].leader for p in range(3)}
        bootstraps = {n: cluster.broker(n).bootstrap for n in (1, 2, 3)}
        for partition, leader in leaders.items():  # warm: every leader answers at once
            assert raw_produce(bootstraps[leader], "steady", b"warm", acks=-1,
                               partition=partition) == ErrorCode.NONE
        created: dict[int, tuple[int, float]] = {}
        initialised: dict[int, int] = {}

        def pending(node_id: int) -> None:
            created[node_id] = create_topics(bootstraps[node_id], f"frozen-{node_id}", 2500)

        def pending_id(node_id: int) -> None:
            initialised[node_id] = init_producer_id(bootstraps[node_id])

        os.kill(zookeeper_pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            threads = [threading.Thread(target=target, args=(n,), daemon=True)
                       for n in (1, 2, 3) for target in (pending, pending_id)]
            for thread in threads:
                thread.start()
            time.sleep(0.2)  # the requests are in, waiting on ZooKeeper
            latencies, codes = [], []
            while time.monotonic() - frozen_at < FREEZE_S - 0.2:
                for partition, leader in leaders.items():
                    started = time.monotonic()
                    try:
                        codes.append(raw_produce(bootstraps[leader], "steady", b"x", acks=-1,
                                                 partition=partition))
                    except TimeoutError:  # no answer in 15 s: the broker stood still
                        codes.append(-1)
                    latencies.append(time.monotonic() - started)
        finally:
            os.kill(zookeeper_pid, signal.SIGCONT)
        for thread in threads:
            thread.join(30)
        assert max(latencies) <= 1.0, f"worst acks=all produce took {max(latencies):.2f} s"
        assert len(latencies) >= 30, latencies
        assert set(codes) == {ErrorCode.NONE}
        for node_id in (1, 2, 3):
            code, answered_s = created[node_id]
            # answered at its own timeout, with ZooKeeper still frozen: Kafka's error
            assert code == ErrorCode.REQUEST_TIMED_OUT, (node_id, code)
            assert answered_s < FREEZE_S, (node_id, answered_s)
            assert initialised[node_id] == ErrorCode.NONE
        for node_id in (1, 2, 3):  # written once ZooKeeper was back, and seen everywhere
            wait_until(lambda: all(partitions_of(cluster, f"frozen-{n}", node_ids=[node_id])
                                   for n in (1, 2, 3)),
                       what=f"broker {node_id} seeing the topics created while frozen")
    finally:
        os.kill(zookeeper_pid, signal.SIGCONT)
        cluster.stop()
