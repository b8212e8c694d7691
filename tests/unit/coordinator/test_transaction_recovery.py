"""The transaction coordinator after a crash, in-process on real files: a broker object is
built on a data directory, driven to a phase of a transaction, dropped without closing its
coordinator (what kill -9 leaves on disk: every record appended so far), and a new broker
object is opened on the same directory. Its coordinator must finish what the records say:
a transaction that reached PrepareCommit commits, one in PrepareAbort aborts, and an
ongoing one is aborted once its timeout passes - with the partition's last stable offset
moving past it in each case."""

from __future__ import annotations

import asyncio

from oncelog.broker.broker import Broker
from oncelog.config import BrokerConfig
from oncelog.coordinator.transaction import metadata as txn
from oncelog.coordinator.transaction.state import TransactionState
from oncelog.protocol.batches import iter_headers
from oncelog.protocol.control_records import decode_marker
from oncelog.protocol.records import make_batch
from tests.fake_clock import FakeClock

S = TransactionState
TRANSACTIONAL = 0x10


async def open_broker(data_dir, clock) -> Broker:
    config = BrokerConfig({"log.dirs": str(data_dir),
                           "transaction.state.log.num.partitions": "2",
                           "offsets.topic.num.partitions": "2"})
    broker = Broker(config, clock)
    broker.partitions.load()
    broker._register()
    await broker.offsets_topic.create_if_missing(config)
    broker.group_coordinator.load()
    await broker.transaction_state_topic.create_if_missing(config)
    broker.transaction_coordinator.load()
    return broker


async def begin(broker: Broker, timeout_ms: int = 60_000) -> tuple[int, int]:
    """An id with a transaction open on orders-0 and orders-1, one record in each."""
    if "orders" not in broker.partitions.topics:
        await broker.partitions.create_topic("orders", 2, 1, {})
    coordinator = broker.transaction_coordinator
    producer_id, epoch = await coordinator.init_producer_id("app", timeout_ms)
    await coordinator.add_partitions("app", producer_id, epoch, {("orders", 0), ("orders", 1)})
    for index in (0, 1):
        broker.partitions.get_partition("orders", index).append_records(make_batch(
            [b"v%d" % index], producer_id=producer_id, producer_epoch=epoch, base_sequence=0,
            attributes=TRANSACTIONAL, timestamp_ms=broker.clock()))
    return producer_id, epoch


def markers(broker: Broker, index: int) -> list[bool]:
    """COMMIT (True) / ABORT (False) of every marker in orders-``index``, in log order."""
    partition = broker.partitions.get_partition("orders", index)
    found, offset = [], 0
    while offset < partition.log_end_offset:
        data = bytes(partition.log.read(offset, 1 << 20, max_offset=partition.log_end_offset))
        for at, header in iter_headers(data):
            if header.is_control:
                found.append(decode_marker(data[at:at + header.size], header).commit)
            offset = header.next_offset
    return found


async def settle(broker: Broker) -> None:
    for _ in range(50):
        await asyncio.sleep(0.01)
        if not broker.transaction_coordinator._completions:
            return


async def prepare_only(tmp_path, clock, commit: bool) -> tuple[Broker, int]:
    """A broker whose open transaction reached PrepareCommit (PrepareAbort) and nothing more
    (no marker); (it, the producer id)."""
    broker = await open_broker(tmp_path, clock)
    producer_id, epoch = await begin(broker)
    coordinator = broker.transaction_coordinator
    await coordinator._write(txn.end_transaction(coordinator.transactions["app"], producer_id,
                                                 epoch, commit, clock()))
    return broker, producer_id


async def crash_after_prepare(tmp_path, commit: bool) -> tuple[Broker, int]:
    """Write PrepareCommit (or PrepareAbort) for an open transaction, then crash (write
    nothing more) and open a new broker on the files; (it, the producer id)."""
    clock = FakeClock()
    broker, producer_id = await prepare_only(tmp_path, clock, commit)
    assert broker.partitions.get_partition("orders", 0).last_stable_offset == 0
    again = await open_broker(tmp_path, clock)
    await settle(again)
    return again, producer_id


def test_a_transaction_that_reached_prepare_commit_commits_after_a_crash(tmp_path):
    async def scenario():
        again, _ = await crash_after_prepare(tmp_path, commit=True)
        assert again.transaction_coordinator.transactions["app"].state is S.COMPLETE_COMMIT
        for index in (0, 1):
            assert markers(again, index) == [True]
            partition = again.partitions.get_partition("orders", index)
            assert partition.last_stable_offset == partition.log_end_offset == 2
    asyncio.run(scenario())


def test_a_transaction_that_reached_prepare_abort_aborts_after_a_crash(tmp_path):
    async def scenario():
        again, producer_id = await crash_after_prepare(tmp_path, commit=False)
        assert again.transaction_coordinator.transactions["app"].state is S.COMPLETE_ABORT
        partition = again.partitions.get_partition("orders", 0)
        assert markers(again, 0) == [False]
        assert partition.aborted_transactions(0, partition.log_end_offset) == [(producer_id, 0)]
    asyncio.run(scenario())


def test_an_ongoing_transaction_is_aborted_with_a_bumped_epoch_once_its_timeout_passed(
        tmp_path):
    async def scenario():
        clock = FakeClock()
        broker = await open_broker(tmp_path, clock)
        producer_id, epoch = await begin(broker, timeout_ms=5_000)
        again = await open_broker(tmp_path, clock)  # crashed while the transaction was open
        coordinator = again.transaction_coordinator
        assert coordinator.transactions["app"].state is S.ONGOING
        clock.now += 4_999
        coordinator.abort_timed_out()
        await settle(again)
        assert coordinator.transactions["app"].state is S.ONGOING
        clock.now += 1
        coordinator.abort_timed_out()
        await settle(again)
        after = coordinator.transactions["app"]
        assert (after.state, after.producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
        assert markers(again, 0) == markers(again, 1) == [False]
        partition = again.partitions.get_partition("orders", 1)
        assert partition.last_stable_offset == partition.log_end_offset
        # the producer that began it is fenced
        assert txn.as_client_knows(
            _code(lambda: txn.check_producer(after, producer_id, epoch)), 3, 2) \
            .name == "PRODUCER_FENCED"
    asyncio.run(scenario())


def test_an_abort_whose_marker_cannot_be_written_yet_holds_up_no_other_abort(tmp_path):
    """Both ids time out; "app"'s transaction includes orders-1, which has no leader, so its
    abort waits for that marker. "other"'s abort goes ahead all the same."""
    import dataclasses

    async def scenario():
        clock = FakeClock()
        broker = await open_broker(tmp_path, clock)
        await begin(broker, timeout_ms=5_000)  # "app", on orders-0 and orders-1
        coordinator = broker.transaction_coordinator
        producer_id, epoch = await coordinator.init_producer_id("other", 5_000)
        await coordinator.add_partitions("other", producer_id, epoch, {("orders", 0)})
        broker.partitions.get_partition("orders", 0).append_records(make_batch(
            [b"other"], producer_id=producer_id, producer_epoch=epoch, base_sequence=0,
            attributes=TRANSACTIONAL, timestamp_ms=clock()))
        orders = broker.partitions.topics["orders"]
        orders.states[1] = dataclasses.replace(orders.states[1], leader=-1, isr=())
        clock.now += 5_000
        coordinator.abort_timed_out()
        await settle(broker)
        assert coordinator.transactions["app"].state is S.PREPARE_ABORT  # still waiting
        assert coordinator.transactions["other"].state is S.COMPLETE_ABORT
        coordinator.close()
    asyncio.run(scenario())


def _code(call):
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the KafkaError's code is what is checked
        return error.code
    raise AssertionError("no error")
