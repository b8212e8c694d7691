"""The single-broker metadata store keeps the contract of ``controller.store``: topics with
their assignment and partition states, compare-and-set by version, producer-id blocks that
never repeat, and documents written by earlier versions still read."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from oncelog.controller import (BrokerRegistration, LocalMetadataStore, NodeIdInUse,
                                PartitionState, TopicExists, TopicRecord)


def topic(name="orders", partitions=2) -> tuple[TopicRecord, list[PartitionState]]:
    record = TopicRecord(name, "id-1", partitions, {"retention.ms": "1000"},
                         [[1] for _ in range(partitions)])
    return record, [PartitionState(1, 0, (1,)) for _ in range(partitions)]


def test_topics_and_states_survive_a_reopen(tmp_path):
    store = LocalMetadataStore(tmp_path, node_id=1)
    store.create_topic(*topic())
    reopened = LocalMetadataStore(tmp_path, node_id=1)
    assert reopened.load_topics()["orders"].configs == {"retention.ms": "1000"}
    assert reopened.partition_state("orders", 1) == PartitionState(1, 0, (1,), version=0,
                                                                   created_version=1)
    with pytest.raises(TopicExists):
        reopened.create_topic(*topic())


def test_compare_and_set_needs_the_version_last_read(tmp_path):
    store = LocalMetadataStore(tmp_path)
    store.create_topic(*topic())
    current = store.partition_state("orders", 0)
    bumped = store.compare_and_set_partition_state("orders", 0, current.elect(1, (1,)))
    assert (bumped.leader_epoch, bumped.version) == (1, 1)
    assert store.compare_and_set_partition_state("orders", 0, current.elect(1, (1,))) is None
    assert LocalMetadataStore(tmp_path).partition_state("orders", 0).leader_epoch == 1


def test_producer_id_blocks_never_repeat_across_reopens(tmp_path):
    first = LocalMetadataStore(tmp_path).allocate_producer_id_block(1000)
    second = LocalMetadataStore(tmp_path).allocate_producer_id_block(1000)
    assert second >= first + 1000


def test_a_version_1_document_is_read_with_this_broker_as_every_replica(tmp_path):
    (tmp_path / "metadata.json").write_text(json.dumps({"version": 1, "topics": [
        {"name": "old", "topic_id": "id-0", "partitions": 2, "configs": {}}]}))
    store = LocalMetadataStore(tmp_path, node_id=4)
    assert store.load_topics()["old"].assignment == [[4], [4]]
    assert store.partition_state("old", 1) == PartitionState(4, 0, (4,), version=0,
                                                             created_version=0)


def test_the_one_broker_registers_once_and_is_the_controller(tmp_path):
    store = LocalMetadataStore(tmp_path, node_id=3)
    store.register_broker(BrokerRegistration(3, "127.0.0.1", 9092))
    with pytest.raises(NodeIdInUse):
        store.register_broker(BrokerRegistration(3, "127.0.0.1", 9093))
    assert list(store.live_brokers()) == [3]
    assert store.try_become_controller(3) and store.controller_id() == 3


def test_versions_only_grow_and_a_topic_created_again_is_a_newer_incarnation(tmp_path):
    store = LocalMetadataStore(tmp_path)
    first, states = store.create_topic(*topic())
    assert first.created_version > 0
    assert {s.created_version for s in states} == {first.created_version}
    assert store.list_topics().version >= first.created_version
    store.delete_topic("orders")
    after_delete = store.list_topics()
    assert "orders" not in after_delete.names and after_delete.version > first.created_version
    again, _ = LocalMetadataStore(tmp_path).create_topic(*topic())  # survives a reopen too
    assert again.created_version > after_delete.version


def test_partitions_are_added_only_to_the_incarnation_named(tmp_path):
    store = LocalMetadataStore(tmp_path)
    old, _ = store.create_topic(*topic(partitions=1))
    store.delete_topic("orders")
    store.create_topic(*topic(partitions=1))
    grown = replace(old, partitions=2, assignment=[[1], [1]])
    with pytest.raises(KeyError):
        store.add_partitions(grown, [PartitionState(1, 0, (1,))])
    current = store.read_topic("orders")
    added = store.add_partitions(replace(current, partitions=2, assignment=[[1], [1]]),
                                 [PartitionState(1, 0, (1,))])
    assert added[0].created_version > current.created_version
    assert store.partition_state("orders", 1) == added[0]
