"""Replication rules of one partition, in process on a fake clock (``replication_harness``):
the high watermark over the ISR, acks=all waiting for it, min.insync.replicas, ISR shrink
and expansion by ``replica.lag.time.max.ms``, followers keeping the leader's offsets and
producer state, leadership changes, and truncation of a divergent tail by leader epoch."""

from __future__ import annotations

import asyncio

import pytest

from oncelog.controller.store import NO_LEADER
from oncelog.partition import IsolationLevel
from oncelog.partition.replicas import CommittedIsr, PendingExpand, PendingShrink
from oncelog.protocol.errors import ErrorCode, KafkaError

from .replication_harness import ReplicaSet, values

LAG_MS = 10_000


@pytest.fixture
def replicas(tmp_path) -> ReplicaSet:
    return ReplicaSet(tmp_path)


def code_of(call, *args, **kwargs) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call(*args, **kwargs)
    return raised.value.code


def run(coroutine):
    return asyncio.run(coroutine)


def test_high_watermark_is_the_smallest_log_end_over_the_isr(replicas):
    replicas.produce(b"a", b"b", acks=1)
    assert (replicas.leader.log_end_offset, replicas.leader.high_watermark) == (2, 0)
    replicas.fetch(2)
    assert replicas.leader.high_watermark == 0  # broker 3 has nothing yet
    replicas.fetch(3)
    replicas.fetch(2)  # the follower's next fetch offset tells the leader what it has
    assert replicas.leader.high_watermark == 0
    replicas.fetch(3)
    assert replicas.leader.high_watermark == 2
    assert replicas.replicas[2].high_watermark == 0  # learns the HW on its next fetch
    replicas.fetch(2)
    assert replicas.replicas[2].high_watermark == 2


def test_consumers_never_read_past_the_high_watermark(replicas):
    replicas.produce(b"a", acks=1)
    leader = replicas.leader
    assert leader.read(0, 1 << 20, IsolationLevel.READ_UNCOMMITTED, True) == b""
    for follower in (2, 3, 2, 3):
        replicas.fetch(follower)
    assert leader.read(0, 1 << 20, IsolationLevel.READ_UNCOMMITTED, True) != b""


def test_acks_all_waits_until_every_in_sync_replica_has_the_batch(replicas):
    async def scenario():
        info = replicas.produce(b"x")
        waiter = replicas.leader.wait_for_acks(info.last_offset + 1)
        replicas.fetch(2)
        replicas.fetch(3)
        await asyncio.sleep(0)
        assert not waiter.done()  # the leader learns what followers have from the next fetch
        replicas.fetch(2)
        assert not waiter.done()
        replicas.fetch(3)
        return await asyncio.wait_for(waiter, 1)
    assert run(scenario()) == ErrorCode.NONE


def test_followers_keep_the_leaders_offsets_and_epochs(replicas):
    replicas.produce(b"a", b"b", acks=1)
    replicas.produce(b"c", acks=1)
    replicas.fetch(2)
    follower = replicas.replicas[2]
    assert follower.log_end_offset == 3
    assert values(follower) == [b"a", b"b", b"c"]
    assert follower.epoch_cache.entries == [(0, 0)]


def test_min_insync_replicas_refuses_acks_all_before_appending(tmp_path):
    replicas = ReplicaSet(tmp_path, replicas=(1, 2), min_insync_replicas=2)
    replicas.elect(1, isr=(1,))
    end = replicas.leader.log_end_offset
    assert code_of(replicas.produce, b"x", acks=-1) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert replicas.leader.log_end_offset == end  # nothing was written
    replicas.produce(b"x", acks=1)  # acks=1 does not ask for replicas
    assert replicas.leader.log_end_offset == end + 1


def test_a_lagging_follower_leaves_the_isr_and_the_write_is_answered_after_append(tmp_path):
    replicas = ReplicaSet(tmp_path, replicas=(1, 2), min_insync_replicas=2)

    async def scenario():
        info = replicas.produce(b"x")
        waiter = replicas.leader.wait_for_acks(info.last_offset + 1)
        replicas.clock.now += LAG_MS // 2
        assert replicas.leader.maybe_shrink_isr(LAG_MS) is None  # not lagging long enough
        replicas.clock.now += LAG_MS
        proposed = replicas.leader.maybe_shrink_isr(LAG_MS)
        assert proposed.isr == (1,)
        assert isinstance(replicas.leader.isr_state, PendingShrink)
        assert replicas.leader.isr == (1, 2)  # committed until the store says otherwise
        replicas.isr_change(proposed)
        assert replicas.leader.isr_state == CommittedIsr((1,))
        return await asyncio.wait_for(waiter, 1)
    # the HW passed the batch once the ISR was the leader alone, but that is below the minimum
    assert run(scenario()) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert code_of(replicas.produce, b"y") == ErrorCode.NOT_ENOUGH_REPLICAS


def test_time_the_leader_was_stopped_is_not_its_followers_lag(tmp_path):
    """A leader that did not run for longer than the lag (SIGSTOP) served no fetches: that
    stretch is excused, and a follower that really stays away leaves a lag later."""
    replicas = ReplicaSet(tmp_path, replicas=(1, 2), min_insync_replicas=2)
    replicas.clock.now += LAG_MS // 4
    stalled = 2 * LAG_MS
    replicas.clock.now += stalled
    assert replicas.leader.maybe_shrink_isr(LAG_MS, stalled_ms=stalled) is None
    assert replicas.leader.isr_state == CommittedIsr((1, 2))
    replicas.clock.now += LAG_MS
    assert replicas.leader.maybe_shrink_isr(LAG_MS).isr == (1,)


def test_a_follower_that_catches_up_rejoins_the_isr(tmp_path):
    replicas = ReplicaSet(tmp_path, replicas=(1, 2), min_insync_replicas=2)
    replicas.elect(1, isr=(1,))
    replicas.produce(b"a", b"b", acks=1)
    assert replicas.leader.high_watermark == 2  # the ISR is the leader alone
    replicas.fetch(2)  # asks for offset 0: behind the HW, stays out
    assert replicas.leader.isr_state == CommittedIsr((1,))
    # the next fetch, at offset 2, shows it has everything below the HW: expansion starts
    replicas.leader.read_for_follower(2, replicas.replicas[2].log_end_offset, 1 << 20)
    assert replicas.leader.isr_state == PendingExpand((1,), 2)
    assert replicas.state.isr == (1,)
    replicas.isr_change(replicas.leader._propose_isr((1, 2), "test"))
    assert replicas.leader.isr == (1, 2)
    replicas.produce(b"c", acks=-1)  # enough replicas again


def test_a_lost_compare_and_set_leaves_the_isr_as_committed(tmp_path):
    replicas = ReplicaSet(tmp_path, replicas=(1, 2), min_insync_replicas=1)
    replicas.clock.now += 2 * LAG_MS
    proposed = replicas.leader.maybe_shrink_isr(LAG_MS)
    replicas.isr_change(proposed, wins=False)
    assert replicas.leader.isr_state == CommittedIsr((1, 2))


def test_losing_leadership_answers_waiting_acks_all_with_not_leader(replicas):
    async def scenario():
        info = replicas.produce(b"x")
        waiter = replicas.leader.wait_for_acks(info.last_offset + 1)
        replicas.elect(2, isr=(2, 3))
        return await asyncio.wait_for(waiter, 1)
    assert run(scenario()) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    old = replicas.replicas[1]
    assert code_of(old.append_records, b"") == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert code_of(old.read, 0, 100, IsolationLevel.READ_UNCOMMITTED, True) \
        == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_stale_leader_epoch_is_fenced_and_a_newer_one_unknown(replicas):
    replicas.elect(2)
    leader = replicas.leader
    assert code_of(leader.check_leader_epoch, 0) == ErrorCode.FENCED_LEADER_EPOCH
    assert code_of(leader.check_leader_epoch, 5) == ErrorCode.UNKNOWN_LEADER_EPOCH
    leader.check_leader_epoch(1)


def test_a_deposed_leader_truncates_its_divergent_tail_by_leader_epoch(replicas):
    """Leader 1 wrote a, b, c in epoch 0; only a reached the followers (acks=1). Broker 2 is
    elected (epoch 1) and writes d, e. When 1 returns as a follower, OffsetForLeaderEpoch
    says epoch 0 ended at offset 1 in the new leader's log: 1 cuts b, c and then copies d, e,
    so every replica ends with the same log."""
    replicas.produce(b"a", acks=1)
    replicas.fetch(2)
    replicas.fetch(3)
    replicas.produce(b"b", b"c", acks=1)
    replicas.elect(2, isr=(2, 3))
    replicas.produce(b"d", b"e", acks=1)
    assert replicas.leader.epoch_cache.entries == [(0, 0), (1, 1)]
    assert replicas.leader.end_offset_for_epoch(0) == (0, 1)
    replicas.catch_up(1)
    assert replicas.replicas[1].log_end_offset == 1
    for follower in (1, 3, 1, 3):
        replicas.fetch(follower)
    logs = {r: values(p) for r, p in replicas.replicas.items()}
    assert logs == {1: [b"a", b"d", b"e"], 2: [b"a", b"d", b"e"], 3: [b"a", b"d", b"e"]}
    assert replicas.replicas[1].epoch_cache.entries == [(0, 0), (1, 1)]


def test_a_leader_deposed_before_writing_in_its_epoch_drops_that_epoch_when_it_follows(
        replicas):
    """Found by ``oncelog verify --brokers 3`` (seed 31): broker 2 was elected for
    ``__consumer_offsets-0`` (epoch 1, starting at its log end), was paused before writing
    anything, and broker 1 took over in epoch 2. Resumed, broker 2 asked where its epoch 1
    ended; the leader, which never had epoch 1, answered with epoch 0's end - broker 2's own
    log end - so ``truncate_to`` had nothing to cut and returned without touching the epoch
    cache. Epoch 1 stayed there, the same question came back, and the fetcher logged "did not
    settle where to truncate" for two minutes, never fetching: the partition never regained a
    third in-sync replica. Now the cache drops an epoch starting at the log end even when the
    log is not cut, and one round settles."""
    replicas.produce(b"a")
    for follower in (2, 3, 2, 3):
        replicas.fetch(follower)
    replicas.elect(2, isr=(2, 3))
    assert replicas.replicas[2].epoch_cache.entries == [(0, 0), (1, 1)]
    replicas.elect(1, isr=(1, 3))
    assert replicas.leader.end_offset_for_epoch(1) == (0, 1)
    deposed = replicas.replicas[2]
    replicas.catch_up(2)
    assert deposed.epoch_cache.entries == [(0, 0)]
    assert deposed.end_offset_for_epoch(deposed.epoch_cache.latest_epoch) == \
        replicas.leader.end_offset_for_epoch(0)
    replicas.produce(b"b", acks=1)
    replicas.fetch(2)
    assert values(deposed) == [b"a", b"b"]


def test_idempotent_producer_state_follows_the_batches_to_the_new_leader(replicas):
    """A retried batch sent to the new leader after a failover is recognised there: the
    follower rebuilt producer state from the replicated batch headers."""
    batch = dict(producer_id=7, producer_epoch=0, base_sequence=0)
    first = replicas.produce(b"x", acks=1, **batch)
    for follower in (2, 3, 2, 3):
        replicas.fetch(follower)
    replicas.elect(2, isr=(2, 3))
    retried = replicas.produce(b"x", acks=1, **batch)
    assert retried.base_offset == first.base_offset
    assert replicas.leader.log_end_offset == 1


def test_an_offline_partition_has_no_leader_and_serves_nothing(replicas):
    replicas.elect(NO_LEADER, isr=(1,))
    for partition in replicas.replicas.values():
        assert not partition.is_leader
        assert code_of(partition.append_records, b"x") == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_replicated_partition_restarts_from_its_checkpointed_high_watermark(replicas):
    replicas.produce(b"a", acks=1)
    for follower in (2, 3, 2, 3):
        replicas.fetch(follower)
    replicas.produce(b"b", acks=1)  # not replicated: above the HW
    restarted = replicas.restart(1)
    assert (restarted.high_watermark, restarted.log_end_offset) == (1, 2)
    assert restarted.epoch_cache.entries == [(0, 0)]


def test_a_follower_behind_the_leaders_log_start_starts_over_there(replicas):
    follower = replicas.replicas[3]
    follower.reset_to(5)
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) \
        == (5, 5, 5)
    assert follower.epoch_cache.entries == []


def test_a_new_leaders_high_watermark_is_not_reported_until_it_reaches_its_epoch_start(
        replicas):
    """KIP-207: broker 2 becomes leader with offsets 0-1 in its log but a high watermark of 0
    (it had not yet learnt the old leader's); ListOffsets must not report 0 as the latest
    offset, which a consumer may already have read past. Once its followers fetched, the
    HW reaches the epoch start and is reported again."""
    replicas.produce(b"a", b"b", acks=1)
    replicas.fetch(2)
    replicas.fetch(3)
    replicas.elect(2, isr=(2, 3))
    leader = replicas.leader
    assert (leader.high_watermark, leader.epoch_cache.entries[-1]) == (0, (1, 2))
    assert not leader.high_watermark_current
    replicas.fetch(3)
    assert leader.high_watermark == 2 and leader.high_watermark_current
