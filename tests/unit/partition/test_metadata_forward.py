"""Metadata only moves forward on a broker (issue 30): whatever order the store's answers
arrive in, a broker never forgets a topic it has just created, never brings back one that
was deleted, and never takes an older partition state for a newer one.

The bug these replace: the membership sync read a whole snapshot of the store in a thread
while the event loop served CreateTopics; applying the older snapshot afterwards dropped the
new topic and deleted its replicas' files (22-56 "deleted topic" lines per run on a busy
cluster, and UNKNOWN_TOPIC_OR_PARTITION right after a successful CreateTopics)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from oncelog.config import BrokerConfig
from oncelog.controller import LocalMetadataStore, PartitionState, TopicRecord
from oncelog.partition import AppendOrigin, PartitionManager
from oncelog.protocol.records import make_batch
from tests.fake_clock import FakeClock


def manager(tmp_path) -> PartitionManager:
    config = BrokerConfig({"log.dirs": str(tmp_path / "data")})
    store = LocalMetadataStore(tmp_path / "store")
    return PartitionManager(config, store, FakeClock(), node_id=1)


def create(partitions: PartitionManager, name: str, count: int = 1) -> TopicRecord:
    asyncio.run(partitions.create_topic(name, count, 1))
    return partitions.topics[name].record


def test_a_listing_read_before_a_topic_was_created_does_not_forget_it(tmp_path):
    partitions = manager(tmp_path)
    before = partitions.store.list_topics()  # read in a thread, as the create is served
    record = create(partitions, "fresh")
    directory = partitions.get_partition("fresh", 0).log.directory
    assert "fresh" not in before.names and before.version < record.created_version
    assert partitions.apply_listing(before) == []
    assert "fresh" in partitions.topics and directory.exists()


def test_a_listing_newer_than_a_topics_creation_without_it_deletes_it(tmp_path):
    partitions = manager(tmp_path)
    create(partitions, "doomed")
    directory = partitions.get_partition("doomed", 0).log.directory
    partitions.store.delete_topic("doomed")  # another broker deleted it
    partitions.apply_listing(partitions.store.list_topics())
    assert "doomed" not in partitions.topics and not directory.exists()


def test_a_topic_read_before_its_deletion_does_not_bring_it_back(tmp_path):
    partitions = manager(tmp_path)
    create(partitions, "gone")
    stale = partitions.store.read_topic("gone"), partitions.store.partition_states("gone", 1)
    asyncio.run(partitions.delete_topic("gone"))
    assert partitions.apply_topic(*stale) == []
    assert "gone" not in partitions.topics


def test_a_topic_created_again_replaces_the_old_incarnation_and_not_the_other_way(tmp_path):
    partitions = manager(tmp_path)
    old = create(partitions, "again")
    old_states = partitions.store.partition_states("again", 1)
    partitions.store.delete_topic("again")
    new, new_states = partitions.store.create_topic(
        replace(old, topic_id="id-2", created_version=-1), [PartitionState(1, 0, (1,))])
    assert partitions.apply_topic(new, new_states)  # its replica is (re)opened
    assert partitions.topics["again"].record.topic_id == "id-2"
    assert partitions.apply_topic(old, old_states) == []  # the old read, late
    assert partitions.topics["again"].record.topic_id == "id-2"


def test_an_older_partition_state_never_replaces_a_newer_one(tmp_path):
    partitions = manager(tmp_path)
    create(partitions, "states")
    store = partitions.store
    first = store.partition_state("states", 0)
    second = store.compare_and_set_partition_state("states", 0, first.elect(1, (1,)))
    assert partitions.apply_partition_state("states", 0, second)
    assert not partitions.apply_partition_state("states", 0, first)
    assert partitions.topics["states"].states[0] == second
    assert partitions.get_partition("states", 0).leader_epoch == second.leader_epoch


def test_a_state_of_an_older_incarnation_is_ignored(tmp_path):
    partitions = manager(tmp_path)
    record = create(partitions, "incarnations")
    state = partitions.store.partition_state("incarnations", 0)
    late = replace(state, version=state.version + 7, leader_epoch=9,
                   created_version=record.created_version - 1)
    assert not partitions.apply_partition_state("incarnations", 0, late)
    assert partitions.topics["incarnations"].states[0].leader_epoch == 0


def test_a_grown_topic_opens_its_new_partitions_once(tmp_path):
    partitions = manager(tmp_path)
    create(partitions, "grows")
    asyncio.run(partitions.create_partitions("grows", 3))
    assert [p.index for p in partitions.topics["grows"].partitions] == [0, 1, 2]
    record = partitions.store.read_topic("grows")
    again = partitions.apply_topic(record, partitions.store.partition_states("grows", 3))
    assert again == []  # nothing new
    smaller = replace(record, partitions=1, assignment=record.assignment[:1])
    partitions.apply_topic(smaller, partitions.store.partition_states("grows", 1))
    assert partitions.topics["grows"].partition_count == 3  # a read from before the growth


def test_a_replica_directory_of_an_older_incarnation_is_deleted_not_reused(tmp_path):
    """Found by the simulation (seed 80): a broker down while its topic was deleted and
    created again reopened the old incarnation's files as the new topic's replica, then
    joined the ISR holding records the leader never had. Each directory now names its
    topic id (Kafka's partition.metadata); another id's files are deleted at open."""
    from oncelog.partition.manager import PARTITION_METADATA, kafka_topic_id
    partitions = manager(tmp_path)
    old = create(partitions, "reborn")
    partitions.get_partition("reborn", 0).append_records(
        make_batch([b"old"], timestamp_ms=1), AppendOrigin.CLIENT)
    directory = partitions.get_partition("reborn", 0).log.directory
    assert (directory / PARTITION_METADATA).read_text() == (
        f"version: 0\ntopic_id: {kafka_topic_id(old.topic_id)}\n")
    partitions.close()  # the broker goes down; meanwhile the topic is deleted, created again
    again = manager(tmp_path)
    again.store.delete_topic("reborn")
    new, states = again.store.create_topic(
        replace(old, topic_id="7f0e0a5c-7c55-4f0e-9d5b-3f1c3c2f4a11", created_version=-1),
        [PartitionState(1, 0, (1,))])
    again.apply_topic(new, states)
    reopened = again.get_partition("reborn", 0)
    assert reopened.log_end_offset == 0
    assert kafka_topic_id(new.topic_id) in (directory / PARTITION_METADATA).read_text()


async def _grow_concurrently(partitions: PartitionManager, name: str, counts: list[int]
                             ) -> list[BaseException | None]:
    return await asyncio.gather(*(partitions.create_partitions(name, count) for count in counts),
                                return_exceptions=True)


def test_two_requests_growing_one_topic_at_once_leave_it_consistent(tmp_path):
    """Found by the simulation (seed 4710): two CreatePartitions for one topic, served at
    once, each planned its new partitions after the count it had read. The store took both:
    the file store ended with 1 + 2 + 3 partition states for a topic of 4; ZooKeeper's
    asserted and the request never got an answer. The second write is refused now
    (``TopicGrew``) and the request planned again from the grown topic."""
    from oncelog.protocol.errors import ErrorCode, KafkaError
    partitions = manager(tmp_path)
    create(partitions, "racing")
    outcomes = asyncio.run(_grow_concurrently(partitions, "racing", [4, 3]))
    assert outcomes[0] is None
    assert isinstance(outcomes[1], KafkaError)
    assert outcomes[1].code is ErrorCode.INVALID_PARTITIONS  # 4 already, as if it came second
    record = partitions.store.read_topic("racing")
    assert record.partitions == 4 and len(record.assignment) == 4
    assert len(partitions.store.partition_states("racing", 4)) == 4
    assert partitions.store._states["racing"][4:] == []  # no state beyond the 4 partitions
    assert [p.index for p in partitions.topics["racing"].partitions] == [0, 1, 2, 3]


def test_a_request_growing_a_topic_further_than_a_concurrent_one_is_planned_again(tmp_path):
    partitions = manager(tmp_path)
    create(partitions, "further")
    outcomes = asyncio.run(_grow_concurrently(partitions, "further", [3, 5]))
    assert outcomes == [None, None]
    record = partitions.store.read_topic("further")
    assert record.partitions == 5 and len(record.assignment) == 5
    assert len(partitions.store._states["further"]) == 5
    assert partitions.topics["further"].partition_count == 5
    assert [p.index for p in partitions.topics["further"].partitions] == [0, 1, 2, 3, 4]


def test_creating_a_topic_fsyncs_nothing_on_the_event_loop(tmp_path, monkeypatch):
    """Two fsyncs per new partition (its partition.metadata and its directory) and one for
    its first leader epoch ran on the event loop: a topic of fifty partitions held every
    client of the broker up for 1.3 s on this machine while another process wrote to the
    disk (librdkafka's init_transactions, creating __transaction_state, timed out at 30 s
    in CI). The directories are now made in a thread, and a new epoch checkpoint's first
    version is not fsynced (losing it loses nothing: epochs are rebuilt from the batches)."""
    import os
    import threading
    loop_threads: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if threading.current_thread() is threading.main_thread():
            loop_threads.append("fsync on the loop")
        real_fsync(fd)

    partitions = manager(tmp_path)
    monkeypatch.setattr(os, "fsync", fsync)
    asyncio.run(partitions.create_topic("wide", 50, 1))
    assert len(partitions.topics["wide"].partitions) == 50
    asyncio.run(partitions.create_partitions("wide", 60))
    assert len(partitions.topics["wide"].partitions) == 60
    assert loop_threads == []
    for partition in partitions.topics["wide"].partitions:
        metadata = (partition.log.directory / "partition.metadata").read_text()
        assert "topic_id: " in metadata
