"""A broker cut off from ZooKeeper gives up the cluster-wide roles it held (issue 31's
zombie rules), while clients still reach it:

- the transaction coordinator: past its lease it answers NOT_COORDINATOR (here to a
  DescribeTransactions, which changes nothing), another broker coordinates the id from
  ``__transaction_state`` and the producer goes on committing there - never fenced, no
  committed record lost or read twice, no aborted one read;
- the controller: past its lease it names no controller in Metadata and answers topic
  changes at once with NOT_CONTROLLER (Kafka's answer from a broker that is not the
  controller, which admin clients retry at the controller another broker names) rather
  than after the request's timeout; the other brokers elect a new controller, which
  creates a topic during the cut; after the heal one controller is named by all;
- the leader, in Metadata: past its lease it names no leader and closes the client's
  connection after answering, so a producer asks another broker and writes to the new
  leader while the cut lasts."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.cluster.isolation import missing_prerequisites
from oncelog.coordinator.record_codec import partition_for
from oncelog.protocol import messages
from oncelog.protocol.errors import ErrorCode
from tests.cluster.helpers import wait_until
from tests.integration.raw import RawConnection

from .conftest import SETTINGS
from .nemesis import create_topic, leader_of, read_all, wait_in_sync
from .workload import TransactionRun

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.skipif(
    bool(missing_prerequisites()), reason="network namespaces need root, ip and nft: "
    + ", ".join(missing_prerequisites()))]

LEASE_PASSED_S = 4  # the lease is 0.8 of the 3 s session


def _describe_transaction(bootstrap: str, transactional_id: str) -> int:
    request = messages.DescribeTransactionsRequest(transactional_ids=[transactional_id])
    with RawConnection(bootstrap, timeout=10) as raw:
        return raw.request(request, 0).transaction_states[0].error_code


def _controller_named_by(bootstrap: str) -> int:
    with RawConnection(bootstrap, timeout=10) as raw:
        return raw.request(messages.MetadataRequest(topics=[], allow_auto_topic_creation=False),
                           9).controller_id


def test_a_transaction_coordinator_cut_from_zookeeper_hands_its_ids_over_unfenced(
        isolated_cluster):
    cluster = isolated_cluster()
    topic, transactional_id = "ledger", "zombie-coordinator"
    create_topic(cluster, topic, 3, **{"min.insync.replicas": "2"})
    run = TransactionRun(cluster.bootstrap, topic, transactional_id, random.Random(31)).start()
    index = partition_for(transactional_id, int(SETTINGS["transaction.state.log.num.partitions"]))
    try:
        wait_until(lambda: len(run.committed) >= 5, 60, what="the first transactions")
        coordinator = leader_of(cluster, "__transaction_state", index)
        old = cluster.broker(coordinator).bootstrap
        assert _describe_transaction(old, transactional_id) == ErrorCode.NONE
        cluster.cut_from_zookeeper(coordinator)
        time.sleep(LEASE_PASSED_S)
        committed_then = len(run.committed)
        answer = _describe_transaction(old, transactional_id)
        assert answer == ErrorCode.NOT_COORDINATOR, \
            f"the cut-off coordinator answered {ErrorCode(answer).name}"
        others = [n for n in cluster.brokers if n != coordinator]
        wait_until(lambda: any(_describe_transaction(cluster.broker(n).bootstrap,
                                                     transactional_id) == ErrorCode.NONE
                               for n in others), 30, what="another broker coordinating the id")
        wait_until(lambda: len(run.committed) >= committed_then + 5, 60,
                   what="transactions committed at the new coordinator during the cut")
        assert _describe_transaction(old, transactional_id) == ErrorCode.NOT_COORDINATOR
    finally:
        cluster.heal()
        run.finish()
    context = f"errors {dict(run.errors)}"
    assert not run.fatal_errors, f"the producer was fenced: {run.fatal_errors}; {context}"
    wait_in_sync(cluster, topic, 3)
    expected = {v for values in run.committed.values() for v in values}
    reads = read_all(cluster, topic, 3, "read_committed",
                     until=lambda reads: {r.value for r in reads} >= expected)
    counts = Counter(r.value for r in reads)
    assert not expected - counts.keys(), f"committed records lost; {context}"
    assert not [v for v, n in counts.items() if n > 1], f"records read twice; {context}"
    aborted = {v for values in run.aborted.values() for v in values}
    assert not aborted & counts.keys(), f"aborted records read; {context}"


def test_a_controller_cut_from_zookeeper_stops_acting_as_controller(isolated_cluster):
    cluster = isolated_cluster()
    brokers = list(cluster.brokers)
    old = _controller_named_by(cluster.broker(brokers[0]).bootstrap)
    assert old in brokers
    others = [n for n in brokers if n != old]
    cut_off = cluster.broker(old).bootstrap
    cluster.cut_from_zookeeper(old)
    try:
        time.sleep(LEASE_PASSED_S)
        assert _controller_named_by(cut_off) == -1
        C = messages.CreateTopicsRequest.CreatableTopic
        started = time.monotonic()
        with RawConnection(cut_off, timeout=40) as raw:
            created = raw.request(messages.CreateTopicsRequest(
                topics=[C(name="asked-of-the-zombie", num_partitions=1, replication_factor=3,
                          assignments=[], configs=[])],
                timeout_ms=30000, validate_only=False), 7).topics[0]
        assert created.error_code == ErrorCode.NOT_CONTROLLER, created
        assert time.monotonic() - started < 5, "the answer waited for the request's timeout"
        wait_until(lambda: all(_controller_named_by(cluster.broker(n).bootstrap)
                               not in (-1, old) for n in others), 30,
                   what="the other brokers naming a new controller")
        admin = AdminClient({"bootstrap.servers": ",".join(cluster.broker(n).bootstrap
                                                           for n in others)})
        admin.create_topics([NewTopic("made-during-the-cut", 2, 2)])[
            "made-during-the-cut"].result(30)
    finally:
        cluster.heal()
    named = {}

    def one_controller() -> bool:
        named.update({n: _controller_named_by(cluster.broker(n).bootstrap) for n in brokers})
        return len(set(named.values())) == 1 and -1 not in named.values()
    wait_until(one_controller, 60, what="every broker naming the same controller")
    assert old not in named.values(), f"the old controller leads again: {named}"

    def partitions_known_to_the_old_controller() -> int:
        with RawConnection(cut_off, timeout=10) as raw:
            metadata = raw.request(messages.MetadataRequest(topics=[
                messages.MetadataRequest.MetadataRequestTopic(name="made-during-the-cut")],
                allow_auto_topic_creation=False), 9)
        return len(metadata.topics[0].partitions)
    wait_until(lambda: partitions_known_to_the_old_controller() == 2, 30,
               what="the old controller learning the topic made during the cut")


def test_a_producer_moves_off_a_split_off_leader_that_was_also_the_controller(
        isolated_cluster):
    """The benchmark's outlier (benchmarks/partitions.py, split: 72.8 s without an
    acknowledgement; reproduced 4 of 4 times with the leader, also the controller, split
    off with the ZooKeeper ensemble's leader): the cut-off broker kept answering Metadata
    from its last view - "I lead partition 0". When its lease ran out it dropped its
    clients' connections, but the other side was still electing a ZooKeeper leader and its
    brokers said the same, so the producer reconnected to the leader it believed in; from
    then on librdkafka, which asks the brokers it is connected to, asked only that one, and
    the new leader, elected 9 s after the split, got no write until the heal. Now a cut-off
    broker names no leader in Metadata and closes the connection after answering, so the
    producer's next question goes to another broker, and it writes to the new leader before
    the heal."""
    cluster = isolated_cluster(zookeepers=3, **{"zookeeper.session.timeout.ms": "6000"})
    controller = _controller_named_by(cluster.broker(1).bootstrap)
    for attempt in range(10):  # a topic whose one partition the controller leads
        topic = f"split-{attempt}"
        create_topic(cluster, topic, 1, **{"min.insync.replicas": "2"})
        if leader_of(cluster, topic) == controller:
            break
    else:
        pytest.fail(f"no topic of 10 had broker {controller}, the controller, as its leader")
    # benchmarks/partitions.py's producer: as fast as it goes, metadata refreshed often
    acks: list[tuple[float, float]] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "linger.ms": 0, "enable.idempotence": False,
                             "request.timeout.ms": 3000, "socket.timeout.ms": 3000,
                             "topic.metadata.refresh.interval.ms": 500,
                             "metadata.max.age.ms": 1000, "message.timeout.ms": 120000})
        while not stop.is_set():
            sent = time.monotonic()
            try:
                producer.produce(topic, b"x" * 1000, partition=0, on_delivery=lambda error, _m,
                                 sent=sent: error is None and acks.append((sent, time.monotonic())))
            except BufferError:
                pass
            producer.poll(0.002)
        producer.flush(60)
    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    try:
        wait_until(lambda: len(acks) > 100, 60, what="the producer under way")
        time.sleep(2)
        others = [n for n in cluster.brokers if n != controller]
        # with the ensemble's leader: the other side elects a new one, and until then its
        # brokers, too, still say the cut-off broker leads
        zookeepers = [f"zookeeper-{n}" for n in (1, 2, 3)]
        theirs = f"zookeeper-{cluster.ensemble.leader()}"
        cluster.split([controller, theirs], [*others, *(z for z in zookeepers if z != theirs)])
        cut_at = time.monotonic()
        wait_until(lambda: any(sent > cut_at + 1 for sent, _ in list(acks)), 25,
                   what="an acknowledgement of a record sent after the split, before the heal")
        recovered_s = min(acked for sent, acked in list(acks) if sent > cut_at + 1) - cut_at
        print(f"first acknowledgement of a record sent after the split: {recovered_s:.1f} s")
    finally:
        cluster.heal()
        stop.set()
        writer.join(90)
