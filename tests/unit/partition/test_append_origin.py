"""One append path, the origin choosing the validations (issue 30; Kafka's ``UnifiedLog.append``
with ``AppendOrigin``), on real files and a fake clock.

CLIENT checks producer epochs and sequences and answers a retry with its original offsets;
COORDINATOR appends without sequence checks or deduplication, its markers fenced by producer
and coordinator epochs; REPLICATION keeps the leader's offsets and epochs and updates
producer state without verification - markers included - so that a follower's transactions,
LSO, ``.txnindex`` and producer state are exactly the leader's. The paths used to be three
methods repeating the same tail; these tests fail if one of them drifts from the others."""

from __future__ import annotations

import pytest

from oncelog.partition import AppendOrigin, Partition
from oncelog.protocol.batches import (iter_headers, parse_header, set_base_offset,
                                      set_partition_leader_epoch)
from oncelog.protocol.control_records import encode_marker
from oncelog.protocol.errors import ErrorCode
from oncelog.protocol.records import make_batch

from .replication_harness import ReplicaSet
from .test_transactions import TXN, Producer, clock, code_of, open_partition, txn_index_bytes

__all__ = ["clock"]  # the fixture, shared with test_transactions


@pytest.fixture
def partition(tmp_path, clock) -> Partition:
    return open_partition(tmp_path, clock)


def log_bytes(partition: Partition) -> bytes:
    return bytes(partition.log.read(partition.log_start_offset, 1 << 30,
                                    max_offset=partition.log_end_offset))


def transactional_history(leader: Partition) -> dict[str, int]:
    """Three transactional producers and an idempotent one: a COMMIT, an ABORT, one
    transaction left open. Returns the first offset of each transaction."""
    one, two, three, idempotent = (Producer(leader, pid) for pid in (1, 2, 3, 4))
    firsts = {"one": one.send(b"a1"), "two": two.send(b"b1")}
    idempotent.send(b"i1", transactional=False)
    one.send(b"a2", b"a3")
    one.commit(coordinator_epoch=1)
    two.send(b"b2")
    firsts["three"] = three.send(b"c1")
    two.abort(coordinator_epoch=1)
    idempotent.send(b"i2", transactional=False)
    three.send(b"c2")
    return firsts


def assert_same_state(follower: Partition, leader: Partition) -> None:
    end = leader.log_end_offset
    assert log_bytes(follower) == log_bytes(leader)  # offsets and leader epochs kept
    assert follower.epoch_cache.entries == leader.epoch_cache.entries
    assert follower.high_watermark == leader.high_watermark == end
    assert follower.last_stable_offset == leader.last_stable_offset
    assert follower.aborted_transactions(0, end) == leader.aborted_transactions(0, end)
    assert txn_index_bytes(follower) == txn_index_bytes(leader)
    assert follower.producer_state.to_json() == leader.producer_state.to_json()
    assert (follower.producer_state.ongoing_transactions
            == leader.producer_state.ongoing_transactions)
    assert (follower.producer_state.first_unstable_offset()
            == leader.producer_state.first_unstable_offset())


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_a_replicated_append_leaves_a_follower_in_the_leaders_state(tmp_path, timestamp_type):
    """Transactional batches, a COMMIT, an ABORT, then a new leader's epoch: the followers'
    producer state (timestamps included: under LogAppendTime the leader once kept the
    client's), open transactions, LSO, aborted transactions and .txnindex files are the
    leader's, and so are their logs byte for byte."""
    replicas = ReplicaSet(tmp_path, configs={"message.timestamp.type": timestamp_type})
    leader = replicas.leader
    firsts = transactional_history(leader)
    for follower in (2, 3) * 3:  # data, then the HW they made, then that HW back to them
        replicas.fetch(follower)
    assert leader.producer_state.ongoing_transactions == {3: firsts["three"]}
    assert leader.aborted_transactions(0, leader.log_end_offset) == [(2, firsts["two"])]
    assert leader.last_stable_offset == firsts["three"]
    for follower in (2, 3):
        assert_same_state(replicas.replicas[follower], leader)

    # a new leader in epoch 1 ends the open transaction; the old leader follows it now
    replicas.elect(2)
    new_leader = replicas.leader
    epoch_start = new_leader.log_end_offset
    new_leader.write_txn_marker(3, 0, False, 2)
    Producer(new_leader, 4).send(b"i3", transactional=False)
    replicas.catch_up(1)
    for follower in (1, 3) * 3:
        replicas.fetch(follower)
    assert new_leader.epoch_cache.entries == [(0, 0), (1, epoch_start)]
    assert new_leader.last_stable_offset == new_leader.log_end_offset
    assert new_leader.aborted_transactions(0, epoch_start + 2) == [(2, firsts["two"]),
                                                                   (3, firsts["three"])]
    for follower in (1, 3):
        assert_same_state(replicas.replicas[follower], new_leader)


def test_a_client_append_refuses_a_sequence_gap_that_a_replicated_append_accepts(tmp_path):
    """CLIENT verifies sequences; REPLICATION takes the leader's word for them, and its
    offsets and epochs too (a gap in offsets is what the leader's compaction leaves)."""
    replicas = ReplicaSet(tmp_path)
    leader, follower = replicas.leader, replicas.replicas[2]
    leader.append_records(make_batch([b"a"], producer_id=9, producer_epoch=0, base_sequence=0))
    replicas.fetch(2)
    gap = make_batch([b"b"], producer_id=9, producer_epoch=0, base_sequence=5)
    assert code_of(leader.append_records, gap) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert leader.log_end_offset == 1

    replicated = bytearray(gap)  # as a leader of epoch 3 wrote it at offset 7
    set_base_offset(replicated, 0, 7)
    set_partition_leader_epoch(replicated, 0, 3)
    info = follower.append_as_follower(memoryview(replicated))
    assert info is not None and (info.base_offset, info.last_offset) == (7, 7)
    assert follower.log_end_offset == 8
    assert follower.epoch_cache.entries == [(0, 0), (3, 7)]
    (_, header), = [(p, h) for p, h in iter_headers(log_bytes(follower)) if h.base_offset == 7]
    assert header.partition_leader_epoch == 3
    entry = follower.producer_state.producers[9]
    assert (entry.last_sequence, entry.last_offset) == (5, 7)


def test_a_coordinator_append_is_not_deduplicated_as_a_client_retry(partition):
    """A coordinator's batches carry no sequence to deduplicate by: each one is appended
    (a client's batch without a sequence is refused), while a client's retry is answered
    with its original offsets and not appended again."""
    # what InternalTopic writes for TxnOffsetCommit: transactional, no sequence
    offsets = make_batch([b"offsets"], producer_id=5, producer_epoch=0, base_sequence=-1,
                         attributes=TXN)
    first = partition.append_records(offsets, AppendOrigin.COORDINATOR)
    again = partition.append_records(offsets, AppendOrigin.COORDINATOR)
    assert again.base_offset == first.base_offset + 1
    assert partition.producer_state.ongoing_transactions == {5: first.base_offset}
    assert code_of(partition.append_records, offsets) == ErrorCode.INVALID_RECORD

    with_sequence = make_batch([b"x"], producer_id=6, producer_epoch=0, base_sequence=0)
    coordinator_first = partition.append_records(with_sequence, AppendOrigin.COORDINATOR)
    coordinator_again = partition.append_records(with_sequence, AppendOrigin.COORDINATOR)
    assert coordinator_again.base_offset == coordinator_first.base_offset + 1

    client = make_batch([b"y"], producer_id=7, producer_epoch=0, base_sequence=0)
    client_first = partition.append_records(client)
    end = partition.log_end_offset
    retry = partition.append_records(client)
    assert (retry.base_offset, retry.last_offset) == (client_first.base_offset,
                                                      client_first.last_offset)
    assert partition.log_end_offset == end


def test_a_marker_is_checked_and_applied_alike_through_either_coordinator_entry(tmp_path,
                                                                                clock):
    """``write_txn_marker`` builds its control batch and appends it as COORDINATOR, like a
    coordinator's own control batch through ``append_records``: same bytes on disk, same
    producer state and .txnindex, same fencing. A client may not write one."""
    by_marker, by_append = (open_partition(tmp_path / name, clock) for name in ("a", "b"))
    for partition in (by_marker, by_append):
        Producer(partition, 1).send(b"x")
    abort = encode_marker(1, 0, False, 3, clock())
    assert code_of(by_append.append_records, abort) == ErrorCode.INVALID_RECORD

    by_marker.write_txn_marker(1, 0, False, 3)
    by_append.append_records(abort, AppendOrigin.COORDINATOR, required_acks=-1)
    assert log_bytes(by_marker) == log_bytes(by_append)
    assert txn_index_bytes(by_marker) == txn_index_bytes(by_append) != {}
    assert by_marker.producer_state.to_json() == by_append.producer_state.to_json()
    assert by_append.aborted_transactions(0, 10) == [(1, 0)]

    assert (code_of(by_marker.write_txn_marker, 1, 0, True, 2)
            == code_of(by_append.append_records, encode_marker(1, 0, True, 2, clock()),
                       AppendOrigin.COORDINATOR)
            == ErrorCode.TRANSACTION_COORDINATOR_FENCED)
    for partition in (by_marker, by_append):
        Producer(partition, 1, epoch=1).send(b"y")
    assert (code_of(by_marker.write_txn_marker, 1, 0, True, 3)
            == code_of(by_append.append_records, encode_marker(1, 0, True, 3, clock()),
                       AppendOrigin.COORDINATOR)
            == ErrorCode.INVALID_PRODUCER_EPOCH)
    assert log_bytes(by_marker) == log_bytes(by_append)


def test_a_produce_requests_bytearray_is_patched_in_place(partition):
    """Zero copy: the leader gives the request's own buffer its offset."""
    Producer(partition, 1).send(b"a", transactional=False)
    buffer = bytearray(make_batch([b"b"]))
    info = partition.append_records(buffer)
    assert parse_header(buffer).base_offset == info.base_offset == 1


def test_replicated_batches_take_the_followers_entry_only(tmp_path):
    replicas = ReplicaSet(tmp_path)
    with pytest.raises(ValueError):
        replicas.leader.append_records(make_batch([b"a"]), AppendOrigin.REPLICATION)
    assert (code_of(replicas.leader.append_as_follower, make_batch([b"a"]))
            == ErrorCode.NOT_LEADER_OR_FOLLOWER)
