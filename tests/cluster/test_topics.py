"""Topic administration acts on the whole cluster: created, grown and deleted through one
broker, seen the same way through every other; replication factor bounded by live brokers."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from oncelog.protocol.errors import ErrorCode

from .helpers import (create_topic, partitions_of, raw_produce, wait_for_leader,
                      wait_until)

pytestmark = pytest.mark.slow


def through(cluster, node_id: int) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.broker(node_id).bootstrap})


def test_create_grow_and_delete_through_one_broker_is_seen_by_all(cluster_factory):
    cluster = cluster_factory(3)
    create_topic(cluster, "inventory", partitions=2, replication=2)
    admin = through(cluster, 1)
    admin.create_partitions([NewPartitions("inventory", 5)])["inventory"].result(15)
    for node in (1, 2, 3):
        grown = wait_until(lambda: len(partitions_of(cluster, "inventory", node_ids=[node])) == 5
                           and partitions_of(cluster, "inventory", node_ids=[node]),
                           what=f"broker {node} seeing 5 partitions")
        assert all(len(p.replicas) == 2 and p.leader >= 0 for p in grown.values())
    wait_until(lambda: all(len(p.isrs) == 2 for p in partitions_of(cluster, "inventory").values()),
               what="the new partitions in sync")
    leader = wait_for_leader(cluster, "inventory", 4)
    assert raw_produce(cluster.broker(leader).bootstrap, "inventory", b"x", acks=-1,
                       partition=4) == ErrorCode.NONE
    other = through(cluster, 2)  # held: a collected client fails its futures
    other.delete_topics(["inventory"])["inventory"].result(15)
    for node in (1, 2, 3):
        wait_until(lambda: not partitions_of(cluster, "inventory", node_ids=[node]),
                   what=f"broker {node} forgetting the topic")
    directories = [cluster.broker(n).data_dir for n in (1, 2, 3)]
    wait_until(lambda: not any(any(d.glob("inventory-*")) for d in directories),
               what="every replica's files removed")


def test_a_replication_factor_above_the_live_brokers_is_refused(cluster_factory):
    cluster = cluster_factory(2)
    admin = through(cluster, 1)
    futures = admin.create_topics([NewTopic("too-wide", 1, 3)])
    error = futures["too-wide"].exception(15)
    assert error is not None
    assert error.args[0].code() == ErrorCode.INVALID_REPLICATION_FACTOR
