"""The partition's half of transactions (KIP-98), on real files and a fake clock:
transactional batches open a transaction and hold the last stable offset at its first
offset, markers end it (an ABORT is indexed in the segment's ``.txnindex``), read_committed
reads stop at the LSO and learn the aborted transactions, and all of it survives a clean
restart, a crash, truncation, retention and replication."""

from __future__ import annotations

import asyncio
import json
import shutil
import struct
from pathlib import Path

import pytest

from oncelog.partition import IsolationLevel, Partition, TopicSettings
from oncelog.protocol.batches import iter_headers
from oncelog.protocol.control_records import decode_marker
from oncelog.protocol.errors import ErrorCode, KafkaError
from oncelog.protocol.records import decode_records, make_batch
from oncelog.storage import Log, producer_snapshots
from tests.fake_clock import FakeClock

from .replication_harness import CONFIGS, ReplicaSet

COMMITTED, UNCOMMITTED = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED
TXN = 0x10


def open_partition(path: Path, clock: FakeClock, **configs: str) -> Partition:
    settings = TopicSettings.from_configs({**CONFIGS, "min.insync.replicas": "1", **configs})
    log = Log.open(path / "orders-0", settings.log_config, clock)
    return Partition("orders", 0, log, settings, clock)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def partition(tmp_path, clock) -> Partition:
    return open_partition(tmp_path, clock)


class Producer:
    """Batches of one producer with the right sequences (what a client builds)."""

    def __init__(self, partition: Partition, producer_id: int, epoch: int = 0) -> None:
        self.partition, self.producer_id, self.epoch, self.sequence = (partition, producer_id,
                                                                        epoch, 0)

    def send(self, *values: bytes, transactional: bool = True, acks: int = 1) -> int:
        batch = make_batch(list(values), producer_id=self.producer_id,
                           producer_epoch=self.epoch, base_sequence=self.sequence,
                           attributes=TXN if transactional else 0)
        info = self.partition.append_records(batch, required_acks=acks)
        self.sequence += len(values)
        return info.base_offset

    def commit(self, coordinator_epoch: int = 0) -> int:
        return self.partition.write_txn_marker(self.producer_id, self.epoch, True,
                                               coordinator_epoch).base_offset

    def abort(self, coordinator_epoch: int = 0) -> int:
        return self.partition.write_txn_marker(self.producer_id, self.epoch, False,
                                               coordinator_epoch).base_offset


def code_of(call, *args, **kwargs) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call(*args, **kwargs)
    return raised.value.code


def read(partition: Partition, isolation: IsolationLevel, offset: int = 0) -> list[bytes]:
    """Values of the data records a consumer's read returns (control records left out)."""
    data = bytes(partition.read(offset, 1 << 20, isolation, min_one_batch=True))
    out = []
    for position, header in iter_headers(data):
        if not header.is_control:
            out += [r.value for r in decode_records(data[position:position + header.size])]
    return out


def txn_index_bytes(partition: Partition) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(partition.log.directory.glob("*.txnindex"))}


def copy_like_kill_9(partition: Partition, destination: Path) -> Path:
    """What kill -9 leaves: the files as they are now, the active segment's indexes and
    no clean-shutdown snapshot."""
    shutil.copytree(partition.log.directory, destination / "orders-0")
    return destination


# -- the last stable offset --------------------------------------------------------------------

def test_a_transaction_holds_the_lso_at_its_first_offset_until_committed(partition):
    plain = Producer(partition, 1)
    plain.send(b"before", transactional=False)
    tx = Producer(partition, 2)
    first = tx.send(b"t1", b"t2")
    plain.send(b"during", transactional=False)
    tx.send(b"t3")
    assert (partition.high_watermark, partition.last_stable_offset) == (5, first)
    assert partition.fetch_bound(COMMITTED) == first == 1
    assert read(partition, COMMITTED) == [b"before"]
    assert read(partition, UNCOMMITTED) == [b"before", b"t1", b"t2", b"during", b"t3"]
    assert read(partition, COMMITTED, offset=3) == []  # at or past the LSO: nothing yet

    marker = tx.commit()
    assert partition.last_stable_offset == partition.high_watermark == marker + 1
    assert read(partition, COMMITTED) == [b"before", b"t1", b"t2", b"during", b"t3"]
    assert partition.aborted_transactions(0, marker + 1) == []
    assert txn_index_bytes(partition) == {}  # commits are not indexed


def test_a_marker_is_a_control_batch_with_the_producer_and_coordinator_epoch(partition):
    tx = Producer(partition, 7, epoch=3)
    tx.send(b"x")
    offset = tx.commit(coordinator_epoch=11)
    data = bytes(partition.log.read(offset, 1 << 20))
    (_, header), = list(iter_headers(data))
    assert header.is_control and header.is_transactional and header.base_offset == offset
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, -1)
    assert header.partition_leader_epoch == partition.leader_epoch
    assert decode_marker(data) == (True, 11)


def test_an_abort_is_indexed_in_kafkas_layout_and_releases_the_lso(partition):
    one, two = Producer(partition, 1), Producer(partition, 2)
    first_one = one.send(b"a")  # 0
    first_two = two.send(b"b")  # 1
    one.send(b"c")  # 2
    marker = one.abort()  # 3; producer 2 is still open, so the entry's LSO is its first offset
    assert partition.last_stable_offset == first_two
    assert txn_index_bytes(partition) == {
        f"{0:020d}.txnindex": struct.pack(">hqqqq", 0, 1, first_one, marker, first_two)}
    assert partition.aborted_transactions(0, partition.high_watermark) == [(1, first_one)]
    two.commit()
    assert partition.last_stable_offset == partition.high_watermark == 5


def test_aborted_transactions_come_by_first_offset_not_by_producer_id(partition):
    """A higher producer id that began first is listed first (simulation seed 51: the list
    was sorted by producer id, and a consumer walking it in order read an aborted record)."""
    first, second = Producer(partition, 1000), Producer(partition, 7)
    first_offset = first.send(b"a")  # 0
    partition.append_records(make_batch([b"plain"]))  # 1
    second_offset = second.send(b"b")  # 2
    first.abort()
    second.abort()
    assert partition.aborted_transactions(0, partition.high_watermark) == [
        (1000, first_offset), (7, second_offset)]


def test_aborted_transactions_overlap_the_fetch_and_come_sorted_by_first_offset(partition):
    early, late, other = Producer(partition, 10), Producer(partition, 20), Producer(partition, 30)
    early_first = early.send(b"e")  # 0
    late_first = late.send(b"l")  # 1
    late_marker = late.abort()  # 2: indexed before the earlier transaction's
    early_marker = early.abort()  # 3
    other_first = other.send(b"o")  # 4
    other.abort()  # 5
    end = partition.high_watermark
    assert partition.aborted_transactions(0, end) == [(10, early_first), (20, late_first),
                                                      (30, other_first)]
    # a fetch from after a transaction's marker does not need it
    assert partition.aborted_transactions(late_marker + 1, end) == [(10, early_first),
                                                                    (30, other_first)]
    assert partition.aborted_transactions(early_marker + 1, end) == [(30, other_first)]
    # data up to offset 1 (exclusive) overlaps only the transaction begun at 0
    assert partition.aborted_transactions(0, 1) == [(10, early_first)]


def test_a_marker_for_a_producer_without_an_open_transaction_is_still_written(partition):
    tx = Producer(partition, 5)
    tx.send(b"x")
    tx.abort()
    retried = tx.abort()  # the coordinator retried: Kafka writes it again
    assert partition.log_end_offset == retried + 1
    assert partition.aborted_transactions(retried, retried + 1) == [(5, retried)]
    assert partition.last_stable_offset == partition.high_watermark
    never_seen = partition.write_txn_marker(99, 0, True, 0)
    assert never_seen.base_offset == retried + 1


def test_stale_epochs_are_refused(partition):
    tx = Producer(partition, 5, epoch=2)
    tx.send(b"x")
    end = partition.log_end_offset
    assert code_of(partition.write_txn_marker, 5, 1, True, 0) == ErrorCode.INVALID_PRODUCER_EPOCH
    zombie = Producer(partition, 5, epoch=1)
    assert code_of(zombie.send, b"z") == ErrorCode.INVALID_PRODUCER_EPOCH
    tx.commit(coordinator_epoch=4)
    assert code_of(partition.write_txn_marker, 5, 2, False, 3) \
        == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert partition.log_end_offset == end + 1  # only the good marker was written


def test_client_batches_that_cannot_be_transactional_are_refused(partition):
    no_producer = make_batch([b"x"], attributes=TXN)
    assert code_of(partition.append_records, no_producer) == ErrorCode.INVALID_RECORD
    control = make_batch([b"x"], producer_id=1, producer_epoch=0, base_sequence=0,
                         attributes=0x30)
    assert code_of(partition.append_records, control) == ErrorCode.INVALID_RECORD
    tx = Producer(partition, 1)
    tx.send(b"t")
    assert code_of(tx.send, b"plain", transactional=False) == ErrorCode.INVALID_TXN_STATE
    assert partition.log_end_offset == 1


def test_read_committed_waiters_wake_when_a_marker_moves_the_lso(partition):
    tx = Producer(partition, 1)
    tx.send(b"x")

    async def scenario():
        waiter = asyncio.get_running_loop().create_future()
        partition.add_data_waiter(waiter)
        tx.commit()
        return await asyncio.wait_for(waiter, 1)
    asyncio.run(scenario())
    assert read(partition, COMMITTED) == [b"x"]


# -- restarts, crashes, truncation, retention --------------------------------------------------

def test_index_and_open_transactions_survive_a_clean_restart(tmp_path, clock):
    partition = open_partition(tmp_path, clock, **{"segment.bytes": "400"})
    aborted, open_ = Producer(partition, 1), Producer(partition, 2)
    first = aborted.send(b"a")
    open_first = open_.send(b"o")
    aborted.abort()
    while len(partition.log.segment_base_offsets) < 3:
        Producer(partition, 50 + partition.log_end_offset).send(b"f" * 60, transactional=False)
    open_.send(b"o2")
    before = (partition.last_stable_offset, partition.aborted_transactions(0, 100),
              txn_index_bytes(partition))
    assert before[:2] == (open_first, [(1, first)])
    partition.close()

    again = open_partition(tmp_path, clock, **{"segment.bytes": "400"})
    assert (again.last_stable_offset, again.aborted_transactions(0, 100),
            txn_index_bytes(again)) == before
    assert again.producer_state.ongoing_transactions == {2: open_first}
    assert read(again, COMMITTED) == read(again, UNCOMMITTED)[:open_first]
    resumed = Producer(again, 2)  # the producer carries on where it was
    resumed.sequence = 2
    resumed.send(b"o3")
    resumed.commit()
    assert again.last_stable_offset == again.high_watermark


def test_a_crash_rebuilds_the_active_segments_index_from_the_log(tmp_path, clock):
    partition = open_partition(tmp_path, clock, **{"segment.bytes": "400"})
    while len(partition.log.segment_base_offsets) < 2:
        Producer(partition, 50 + partition.log_end_offset).send(b"f" * 60, transactional=False)
    one, two = Producer(partition, 1), Producer(partition, 2)
    first_one, first_two = one.send(b"a"), two.send(b"b")
    marker = one.abort()
    expected_index = txn_index_bytes(partition)
    active = f"{partition.log.active_segment_base_offset:020d}.txnindex"
    assert list(expected_index) == [active]

    crashed = copy_like_kill_9(partition, tmp_path / "crash")
    (crashed / "orders-0" / active).unlink()  # the marker reached the log, its entry did not
    recovered = open_partition(crashed, clock, **{"segment.bytes": "400"})
    assert txn_index_bytes(recovered) == expected_index
    assert recovered.aborted_transactions(0, 100) == [(1, first_one)]
    assert recovered.last_stable_offset == first_two
    assert recovered.producer_state.ongoing_transactions == {2: first_two}

    # an entry whose marker never reached the log is dropped by the rebuild
    crashed = copy_like_kill_9(partition, tmp_path / "crash-2")
    index = crashed / "orders-0" / active
    index.write_bytes(index.read_bytes() + struct.pack(">hqqqq", 0, 2, first_two, marker + 5,
                                                       marker + 6))
    recovered = open_partition(crashed, clock, **{"segment.bytes": "400"})
    assert recovered.aborted_transactions(0, 100) == [(1, first_one)]


def test_a_crash_keeps_a_transaction_begun_in_a_sealed_segment_open(tmp_path, clock):
    """The transaction's first offset is in a segment recovery does not replay: it comes
    from the snapshot taken when the active segment was rolled."""
    partition = open_partition(tmp_path, clock, **{"segment.bytes": "400"})
    tx = Producer(partition, 2)
    first = tx.send(b"o")
    while len(partition.log.segment_base_offsets) < 3:
        Producer(partition, 50 + partition.log_end_offset).send(b"f" * 60, transactional=False)
    active = partition.log.active_segment_base_offset
    snapshot = json.loads(producer_snapshots.snapshot_path(partition.log.directory,
                                                           active).read_text())
    assert snapshot["version"] == 2
    assert [p["current_txn_first_offset"] for p in snapshot["producers"]
            if p["producer_id"] == 2] == [first]

    crashed = copy_like_kill_9(partition, tmp_path / "crash")
    recovered = open_partition(crashed, clock, **{"segment.bytes": "400"})
    assert recovered.last_stable_offset == first
    assert recovered.producer_state.ongoing_transactions == {2: first}
    abort_at = Producer(recovered, 2).abort()
    assert recovered.aborted_transactions(0, 100) == [(2, first)]
    assert recovered.aborted_transactions(abort_at, abort_at + 1) == [(2, first)]


def test_a_snapshot_written_before_transactions_existed_is_read(tmp_path, clock):
    partition = open_partition(tmp_path, clock)
    Producer(partition, 3).send(b"x", transactional=False)
    partition.close()
    directory = tmp_path / "orders-0"
    for offset in producer_snapshots.list_snapshots(directory):
        path = producer_snapshots.snapshot_path(directory, offset)
        document = json.loads(path.read_text())
        for producer in document["producers"]:
            del producer["current_txn_first_offset"], producer["coordinator_epoch"]
        path.write_text(json.dumps({**document, "version": 1}))
    again = open_partition(tmp_path, clock)
    assert again.producer_state.producers[3].last_sequence == 0
    resumed = Producer(again, 3)
    resumed.sequence = 1
    resumed.send(b"y", transactional=False)


def test_truncation_reopens_a_transaction_whose_marker_is_cut(tmp_path):
    replicas = ReplicaSet(tmp_path)
    leader = replicas.leader
    tx = Producer(leader, 4)
    first = tx.send(b"t", acks=1)
    for follower in (2, 3, 2, 3):
        replicas.fetch(follower)
    marker = tx.abort()
    replicas.fetch(2)  # broker 2 has the marker, broker 3 not
    follower = replicas.replicas[2]
    assert follower.aborted_transactions(0, 100) == [(4, first)]
    follower.truncate_to(marker)
    assert follower.aborted_transactions(0, 100) == []
    assert follower.producer_state.ongoing_transactions == {4: first}
    assert follower.last_stable_offset == first
    assert txn_index_bytes(follower) == {}


def test_retention_takes_index_files_with_their_segments_and_the_lso_stays_in_the_log(
        tmp_path, clock):
    partition = open_partition(tmp_path, clock, **{"segment.bytes": "400",
                                                   "retention.ms": str(3600_000)})
    open_ = Producer(partition, 1)
    open_.send(b"open")  # begun at 0 and never ended
    aborted = Producer(partition, 2)
    aborted.send(b"a")
    aborted.abort()
    while len(partition.log.segment_base_offsets) < 3:
        Producer(partition, 50 + partition.log_end_offset).send(b"f" * 60, transactional=False)
    assert f"{0:020d}.txnindex" in txn_index_bytes(partition)
    clock.now += 2 * 3600_000  # make_batch timestamps are 0: every sealed segment expired
    assert partition.apply_retention() >= 1
    assert partition.log_start_offset > 0
    assert f"{0:020d}.txnindex" not in txn_index_bytes(partition)
    assert partition.last_stable_offset == partition.log_start_offset  # held, within the log
    assert partition.aborted_transactions(partition.log_start_offset, 100) == []


# -- replication -------------------------------------------------------------------------------

def test_followers_end_with_the_leaders_index_and_lso(tmp_path):
    replicas = ReplicaSet(tmp_path)
    leader = replicas.leader
    one, two = Producer(leader, 1), Producer(leader, 2)
    first_one = one.send(b"a", acks=1)
    first_two = two.send(b"b", acks=1)
    marker = one.abort()
    for follower in (2, 3, 2, 3):
        replicas.fetch(follower)
    # the HW passed the marker: the aborted transaction is stable, producer 2's is not
    assert leader.high_watermark == marker + 1
    assert leader.last_stable_offset == first_two
    # broker 2 still has the HW from before: to it, the abort is not replicated yet
    assert replicas.replicas[2].last_stable_offset == first_one
    replicas.fetch(2)
    for replica in replicas.replicas.values():
        assert replica.last_stable_offset == first_two
        assert replica.aborted_transactions(0, 100) == [(1, first_one)]
        assert txn_index_bytes(replica) == txn_index_bytes(leader)
        assert replica.producer_state.ongoing_transactions == {2: first_two}


def test_a_completed_transaction_stays_unstable_until_the_hw_passes_its_marker(tmp_path):
    replicas = ReplicaSet(tmp_path)
    leader = replicas.leader
    tx = Producer(leader, 1)
    first = tx.send(b"a", acks=1)
    for follower in (2, 3, 2, 3):
        replicas.fetch(follower)
    assert leader.last_stable_offset == first

    async def scenario():
        marker = tx.commit()
        assert leader.last_stable_offset == first  # committed, not yet on every replica
        waiter = asyncio.get_running_loop().create_future()
        leader.add_data_waiter(waiter)
        replicas.fetch(2)
        replicas.fetch(3)
        assert not waiter.done() and leader.last_stable_offset == first
        replicas.fetch(2)
        replicas.fetch(3)  # the followers' next fetch offsets pass the marker
        await asyncio.wait_for(waiter, 1)
        return marker
    marker = asyncio.run(scenario())
    assert leader.high_watermark == leader.last_stable_offset == marker + 1
    assert read(leader, COMMITTED) == [b"a"]


def test_only_the_leader_writes_markers_and_a_new_leader_knows_the_open_transaction(tmp_path):
    replicas = ReplicaSet(tmp_path)
    tx = Producer(replicas.leader, 6)
    first = tx.send(b"a", acks=1)
    for follower in (2, 3, 2, 3):
        replicas.fetch(follower)
    follower = replicas.replicas[2]
    assert code_of(follower.write_txn_marker, 6, 0, True, 0) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    replicas.elect(2, isr=(2, 3))
    new_leader = replicas.leader
    assert new_leader.last_stable_offset == first
    marker = new_leader.write_txn_marker(6, 0, False, 1).base_offset
    for follower_id in (3, 3):
        replicas.fetch(follower_id)
    assert new_leader.aborted_transactions(0, 100) == [(6, first)]
    assert new_leader.last_stable_offset == new_leader.high_watermark == marker + 1


def test_a_marker_is_refused_below_min_insync_replicas(tmp_path):
    replicas = ReplicaSet(tmp_path, replicas=(1, 2), min_insync_replicas=2)
    replicas.elect(1, isr=(1,))
    assert code_of(replicas.leader.write_txn_marker, 1, 0, True, 0) \
        == ErrorCode.NOT_ENOUGH_REPLICAS


# -- KIP-890: a producer's first transactional batch waits for its coordinator's word ------

def _txn_batch(producer_id: int, sequence: int, value: bytes, epoch: int = 0) -> bytearray:
    return bytearray(make_batch([value], producer_id=producer_id, producer_epoch=epoch,
                                base_sequence=sequence, attributes=TXN))


def test_batches_waiting_for_their_coordinator_are_appended_in_the_order_they_came(partition):
    async def scenario():
        assert partition.needs_verification(7, 0)  # no transaction of producer 7 open here
        first, starts = partition.append_when_verified(_txn_batch(7, 0, b"a"), 1, 7)
        second, again = partition.append_when_verified(_txn_batch(7, 1, b"b"), 1, 7)
        assert (starts, again) == (True, False)  # one question for both
        assert partition.needs_verification(7, 0)  # a third would queue behind them
        assert partition.log_end_offset == 0  # nothing appended before the answer
        partition.verified(7, ErrorCode.NONE)
        return (await first).base_offset, (await second).base_offset
    assert asyncio.run(scenario()) == (0, 1)
    assert not partition.needs_verification(7, 0)  # its transaction is open here now
    assert partition.needs_verification(7, 1)  # but not another epoch's


def test_a_refused_verification_appends_none_of_the_waiting_batches(partition):
    async def scenario():
        first, _ = partition.append_when_verified(_txn_batch(7, 0, b"a"), 1, 7)
        second, _ = partition.append_when_verified(_txn_batch(7, 1, b"b"), 1, 7)
        partition.verified(7, ErrorCode.INVALID_TXN_STATE, "not in the transaction")
        return [await asyncio.gather(first, second, return_exceptions=True)]
    [outcomes] = asyncio.run(scenario())
    assert [o.code for o in outcomes] == [ErrorCode.INVALID_TXN_STATE] * 2
    assert partition.log_end_offset == 0


def test_a_marker_written_while_the_coordinator_answers_voids_its_yes(partition):
    """Kafka's verification guard: the coordinator said "in the transaction", but its marker
    ended that transaction here before the answer came back - the late batch must not open
    a new one."""
    producer = Producer(partition, 7)
    producer.send(b"in the transaction")
    producer.abort()  # ends it; the producer's next batch needs a new question

    async def scenario():
        waiting, _ = partition.append_when_verified(_txn_batch(7, 1, b"late"), 1, 7)
        partition.write_txn_marker(7, 0, False, 0)  # a retried marker, as the answer travels
        partition.verified(7, ErrorCode.NONE)
        return await asyncio.gather(waiting, return_exceptions=True)
    [outcome] = asyncio.run(scenario())
    assert isinstance(outcome, KafkaError) and outcome.code is ErrorCode.INVALID_TXN_STATE
    assert partition.producer_state.ongoing_transactions == {}
    assert partition.last_stable_offset == partition.high_watermark
