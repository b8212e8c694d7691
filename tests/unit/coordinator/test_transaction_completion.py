"""EndTxn as Kafka answers it, in-process on real files: the answer comes once PrepareCommit
(PrepareAbort) is written - the outcome is decided then - and the markers and the Complete
record follow in the background, holding the transactional id, so the id's next request
waits for them instead of failing with CONCURRENT_TRANSACTIONS."""

from __future__ import annotations

import asyncio
import dataclasses

from oncelog.coordinator.transaction.state import TransactionState
from oncelog.protocol.errors import ErrorCode, KafkaError
from tests.fake_clock import FakeClock
from tests.unit.coordinator.test_transaction_recovery import (begin, markers, open_broker,
                                                              prepare_only, settle)

S = TransactionState


async def end(broker, commit: bool) -> tuple[int, int]:
    """EndTxn for the transaction ``begin`` opened; (producer id, epoch) once it returns."""
    producer_id, epoch = await begin(broker)
    await broker.transaction_coordinator.end_transaction("app", producer_id, epoch, commit)
    return producer_id, epoch


def test_end_txn_is_answered_at_prepare_commit_and_the_markers_follow(tmp_path):
    async def scenario():
        broker = await open_broker(tmp_path, FakeClock())
        coordinator = broker.transaction_coordinator
        await end(broker, commit=True)
        assert coordinator.transactions["app"].state is S.PREPARE_COMMIT
        assert markers(broker, 0) == markers(broker, 1) == []
        await settle(broker)
        assert coordinator.transactions["app"].state is S.COMPLETE_COMMIT
        assert markers(broker, 0) == markers(broker, 1) == [True]
        for index in (0, 1):
            partition = broker.partitions.get_partition("orders", index)
            assert partition.last_stable_offset == partition.log_end_offset == 2
    asyncio.run(scenario())


def test_the_ids_next_transaction_waits_for_the_last_ones_markers(tmp_path):
    async def scenario():
        broker = await open_broker(tmp_path, FakeClock())
        coordinator = broker.transaction_coordinator
        producer_id, epoch = await end(broker, commit=False)
        # at once, as a client does after its commit returns: no CONCURRENT_TRANSACTIONS
        await coordinator.add_partitions("app", producer_id, epoch, {("orders", 0)})
        assert markers(broker, 0) == markers(broker, 1) == [False]
        now = coordinator.transactions["app"]
        assert (now.state, now.partitions) == (S.ONGOING, frozenset({("orders", 0)}))
    asyncio.run(scenario())


def test_a_complete_record_that_fails_to_write_is_written_again(tmp_path, monkeypatch):
    async def scenario():
        broker = await open_broker(tmp_path, FakeClock())
        coordinator = broker.transaction_coordinator
        state_topic = coordinator.state_topic
        append, failures = state_topic.append, []

        def short_isr_once(index, records, producer=None):
            current = coordinator.transactions.get("app")
            if not failures and current is not None and current.state is S.PREPARE_COMMIT:
                failures.append(index)
                raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, "injected: ISR too small")
            append(index, records, producer)

        monkeypatch.setattr(state_topic, "append", short_isr_once)
        await end(broker, commit=True)
        await settle(broker)
        assert failures, "the Complete record's first write did not fail"
        assert coordinator.transactions["app"].state is S.COMPLETE_COMMIT
        assert markers(broker, 0) == markers(broker, 1) == [True]
    asyncio.run(scenario())


def test_a_stopping_coordinator_leaves_an_unfinished_completion_to_its_prepare_record(
        tmp_path):
    async def scenario():
        broker = await open_broker(tmp_path, FakeClock())
        coordinator = broker.transaction_coordinator
        producer_id, epoch = await begin(broker)
        orders = broker.partitions.topics["orders"]  # orders-1's leader gone: its marker waits
        orders.states[1] = dataclasses.replace(orders.states[1], leader=-1, isr=())
        await coordinator.end_transaction("app", producer_id, epoch, commit=True)
        await asyncio.sleep(0.05)
        assert coordinator._completions and coordinator.transactions["app"].state \
            is S.PREPARE_COMMIT
        coordinator.close()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not coordinator._completions
        assert not coordinator._lock("app").locked()
        again = await open_broker(tmp_path, FakeClock())  # orders-1 leads again after a restart
        await settle(again)
        assert again.transaction_coordinator.transactions["app"].state is S.COMPLETE_COMMIT
        assert markers(again, 0) == [True, True] and markers(again, 1) == [True]
    asyncio.run(scenario())


async def prepared_then_stuck(tmp_path, monkeypatch):
    """PrepareCommit written, then a crash; on the restart the state topic refuses writes, so
    the resumed completion writes the markers but not the Complete record. Returns the
    restarted broker (state topic writable again) with the id left in PrepareCommit."""
    from oncelog.coordinator.internal_topic import InternalTopic

    clock = FakeClock()
    await prepare_only(tmp_path, clock, commit=True)
    append, refusing = InternalTopic.append, [True]

    def short_isr(self, index, records, producer=None):
        if refusing[0] and self.name == "__transaction_state":
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, "injected: ISR too small")
        append(self, index, records, producer)

    monkeypatch.setattr(InternalTopic, "append", short_isr)
    again = await open_broker(tmp_path, clock)
    await settle(again)
    assert again.transaction_coordinator.transactions["app"].state is S.PREPARE_COMMIT
    assert markers(again, 0) == markers(again, 1) == [True]
    refusing[0] = False
    return again


def test_a_complete_record_the_resumed_completion_failed_to_write_is_written_next_pass(
        tmp_path, monkeypatch):
    async def scenario():
        broker = await prepared_then_stuck(tmp_path, monkeypatch)
        broker.transaction_coordinator.finish_abandoned()  # the periodic pass
        await settle(broker)
        assert broker.transaction_coordinator.transactions["app"].state is S.COMPLETE_COMMIT
        for index in (0, 1):
            partition = broker.partitions.get_partition("orders", index)
            assert partition.last_stable_offset == partition.log_end_offset
    asyncio.run(scenario())


def test_the_ids_next_producer_finishes_a_transaction_nobody_is_completing(
        tmp_path, monkeypatch):
    """Without this the id answered CONCURRENT_TRANSACTIONS to every InitProducerId."""
    async def scenario():
        broker = await prepared_then_stuck(tmp_path, monkeypatch)
        coordinator = broker.transaction_coordinator
        before = coordinator.transactions["app"].producer_epoch
        producer_id, epoch = await coordinator.init_producer_id("app", 60_000)
        assert epoch == before + 1
        assert coordinator.transactions["app"].state is S.EMPTY
        await coordinator.add_partitions("app", producer_id, epoch, {("orders", 0)})
    asyncio.run(scenario())
