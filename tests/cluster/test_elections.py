"""What min.insync.replicas refuses, what unclean election trades, and why a paused leader
cannot split the brain: a real cluster of ZooKeeper and broker processes."""

from __future__ import annotations

import time

import pytest

from oncelog.protocol.errors import ErrorCode

from .helpers import (SESSION_MS, consume_all, create_topic, isr_of, leader_of,
                      partitions_of, raw_produce, wait_for_leader, wait_until)

pytestmark = pytest.mark.slow


def test_min_insync_replicas_refuses_writes_while_a_replica_is_paused_then_accepts_them(
        cluster_factory):
    cluster = cluster_factory(2, **{"min.insync.replicas": "2"})
    create_topic(cluster, "ledger", assignment=[[1, 2]])
    leader = cluster.broker(1).bootstrap
    assert raw_produce(leader, "ledger", b"both in sync", acks=-1) == ErrorCode.NONE
    cluster.pause(2)
    try:
        wait_until(lambda: isr_of(cluster, "ledger", node_ids=[1]) == [1],
                   what="broker 2 leaving the ISR")
        assert raw_produce(leader, "ledger", b"refused", acks=-1) \
            == ErrorCode.NOT_ENOUGH_REPLICAS
        assert raw_produce(leader, "ledger", b"acks=1 still works", acks=1) == ErrorCode.NONE
    finally:
        cluster.resume(2)
    wait_until(lambda: isr_of(cluster, "ledger", node_ids=[1]) == [1, 2],
               what="broker 2 rejoining the ISR")
    assert raw_produce(leader, "ledger", b"accepted again", acks=-1) == ErrorCode.NONE
    values = consume_all(cluster, "ledger", 3, timeout_s=10)
    assert values == [b"both in sync", b"acks=1 still works", b"accepted again"]


def test_unclean_election_loses_records_where_clean_election_waits_unavailable(
        cluster_factory):
    """Two topics on brokers 1 (leader) and 2, alike but for
    unclean.leader.election.enable. Broker 2 falls out of the ISR (paused), 10 more records
    are acknowledged by broker 1 alone, then broker 1 dies. With unclean election on,
    broker 2 leads at once without those 10 records; with it off, the partition has no
    leader until broker 1 returns, and then nothing is lost."""
    cluster = cluster_factory(3)
    for name, unclean in (("unclean-on", "true"), ("unclean-off", "false")):
        create_topic(cluster, name, assignment=[[1, 2]],
                     config={"unclean.leader.election.enable": unclean,
                             "min.insync.replicas": "1"})
        for i in range(10):
            assert raw_produce(cluster.broker(1).bootstrap, name, b"early-%d" % i,
                               acks=-1) == ErrorCode.NONE
    cluster.pause(2)
    try:
        wait_until(lambda: isr_of(cluster, "unclean-on", node_ids=[1, 3]) == [1] and
                   isr_of(cluster, "unclean-off", node_ids=[1, 3]) == [1],
                   what="broker 2 out of both ISRs")
        for name in ("unclean-on", "unclean-off"):
            for i in range(10):
                assert raw_produce(cluster.broker(1).bootstrap, name, b"late-%d" % i,
                                   acks=-1) == ErrorCode.NONE  # the ISR is broker 1 alone
        cluster.kill(1)
    finally:
        cluster.resume(2)
    wait_until(lambda: leader_of(cluster, "unclean-on", node_ids=[2, 3]) == 2,
               what="broker 2 elected uncleanly")
    on = consume_all(cluster, "unclean-on", 20, timeout_s=8)
    assert on == [b"early-%d" % i for i in range(10)], "the 10 late records are lost"
    offline = partitions_of(cluster, "unclean-off", node_ids=[2, 3])[0]
    assert offline.leader == -1, "clean election only: no leader while broker 1 is down"
    time.sleep(SESSION_MS / 1000)
    assert leader_of(cluster, "unclean-off", node_ids=[2, 3]) == -1
    cluster.restart(1)
    wait_until(lambda: leader_of(cluster, "unclean-off") == 1, what="broker 1 leading again")
    off = consume_all(cluster, "unclean-off", 20, timeout_s=10)
    assert off == [b"early-%d" % i for i in range(10)] + [b"late-%d" % i for i in range(10)]


def test_a_paused_leader_whose_session_expired_acknowledges_nothing_when_resumed(
        cluster_factory):
    """SIGSTOP the leader longer than its ZooKeeper session; another broker is elected. A
    produce request waiting in the old leader's socket is answered, once it runs again,
    with NOT_LEADER_OR_FOLLOWER: its lease ran out while it was stopped, before it even
    learns it was replaced. No write is acknowledged by two leaders."""
    from tests.integration.raw import RawConnection
    from oncelog.protocol import messages
    from oncelog.protocol.records import make_batch

    cluster = cluster_factory(3)
    create_topic(cluster, "orders", replication=3)
    old = wait_for_leader(cluster, "orders")
    P = messages.ProduceRequest
    request = P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name="orders", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=make_batch([b"zombie"]))])])
    others = [n for n in (1, 2, 3) if n != old]
    with RawConnection(cluster.broker(old).bootstrap, timeout=30) as raw:
        raw.request(messages.MetadataRequest(topics=None), 1)  # connected before the pause
        cluster.pause(old)
        try:
            new = wait_until(lambda: leader_of(cluster, "orders", node_ids=others)
                             not in (-1, old) and leader_of(cluster, "orders", node_ids=others),
                             what="a new leader while the old one is stopped")
            raw.send_frame(raw.header(P.API_KEY, 9) + bytes(request.encode(version=9)))
        finally:
            cluster.resume(old)
        response = raw.read_response(P.API_KEY, 9)
    code = response.responses[0].partition_responses[0].error_code
    assert code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert raw_produce(cluster.broker(new).bootstrap, "orders", b"real", acks=-1) \
        == ErrorCode.NONE
    assert consume_all(cluster, "orders", 1, timeout_s=8) == [b"real"]
    wait_until(lambda: leader_of(cluster, "orders", node_ids=[old]) == new,
               what="the old leader learning of the new one")


def test_a_leader_paused_past_the_replica_lag_but_within_its_session_keeps_its_isr(
        cluster_factory):
    """SIGSTOP the leader for longer than ``replica.lag.time.max.ms`` but within its ZooKeeper
    session. Its followers could not fetch from a stopped leader, so that time does not count
    as their lag: when it resumes the ISR stays whole, and an acks=all produce that waited in
    its socket is acknowledged. (Dropping both followers on waking and taking them back a
    moment later answered that produce NOT_ENOUGH_REPLICAS(_AFTER_APPEND) for records every
    replica gets; librdkafka's idempotent producer, which may bump its epoch while such a
    retry is pending, once wrote a record twice that way.)"""
    from tests.integration.raw import RawConnection
    from oncelog.protocol import messages
    from oncelog.protocol.records import make_batch

    cluster = cluster_factory(3, **{"zookeeper.session.timeout.ms": "8000",
                                    "replica.lag.time.max.ms": "1500"})
    create_topic(cluster, "ledger", replication=3, config={"min.insync.replicas": "3"})
    leader = wait_for_leader(cluster, "ledger")
    assert raw_produce(cluster.broker(leader).bootstrap, "ledger", b"before", acks=-1) \
        == ErrorCode.NONE
    wait_until(lambda: isr_of(cluster, "ledger") == [1, 2, 3], what="a whole ISR")
    P = messages.ProduceRequest
    request = P(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
        P.TopicProduceData(name="ledger", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=make_batch(
                [b"sent to a stopped leader"], timestamp_ms=int(time.time() * 1000)))])])
    with RawConnection(cluster.broker(leader).bootstrap, timeout=30) as raw:
        raw.request(messages.MetadataRequest(topics=None), 1)  # connected before the pause
        cluster.pause(leader)
        try:
            raw.send_frame(raw.header(P.API_KEY, 9) + bytes(request.encode(version=9)))
            time.sleep(3.0)  # twice the replica lag, well within the 8 s session
        finally:
            cluster.resume(leader)
        response = raw.read_response(P.API_KEY, 9)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert leader_of(cluster, "ledger") == leader  # the session held: no election
    assert isr_of(cluster, "ledger", node_ids=[leader]) == [1, 2, 3]
    assert "behind for more than" not in cluster.broker(leader).log_path.read_text()
    assert consume_all(cluster, "ledger", 2, timeout_s=10) == [b"before",
                                                               b"sent to a stopped leader"]
