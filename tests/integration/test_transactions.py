"""Transactions through a real broker process with unmodified clients (issue 12): atomic
writes across partitions, read_committed against read_uncommitted, fencing of a second
instance, offsets committed inside a transaction, and Kafka's error codes for bad requests."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.client.reader import read_topic
from oncelog.protocol.batches import iter_headers
from oncelog.protocol.errors import ErrorCode
from oncelog.protocol.messages import (AddPartitionsToTxnRequest, EndTxnRequest,
                                       FindCoordinatorRequest, InitProducerIdRequest)
from tests.integration.raw import RawConnection


def quiet() -> logging.Logger:
    logger = logging.getLogger("test.librdkafka")
    logger.setLevel(logging.CRITICAL)
    return logger


def create(bootstrap: str, *topics: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
        future.result(15)


def transactional(bootstrap: str, transactional_id: str, **extra) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 60000, "logger": quiet(), **extra})
    producer.init_transactions(30)
    return producer


def read(bootstrap: str, topic: str, isolation: str, partitions: int = 2) -> list[bytes]:
    """Every value of ``topic`` a consumer with ``isolation`` sees up to the end (the LSO
    under read_committed), partition by partition."""
    records = read_topic(bootstrap, topic, isolation_level=isolation)
    return [r.value for r in sorted(records, key=lambda r: (r.partition, r.offset))]


def test_a_committed_transaction_is_seen_whole_and_an_aborted_one_only_uncommitted(broker):
    create(broker.bootstrap, "tx-orders", "tx-audit")
    producer = transactional(broker.bootstrap, "app-commit")
    producer.begin_transaction()
    for number in range(20):
        producer.produce("tx-orders", b"committed-%d" % number, partition=number % 2)
        producer.produce("tx-audit", b"committed-%d" % number, partition=number % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for number in range(10):
        producer.produce("tx-orders", b"aborted-%d" % number, partition=number % 2)
    producer.flush(10)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("tx-orders", b"after", partition=0)
    producer.commit_transaction(30)

    committed = read(broker.bootstrap, "tx-orders", "read_committed")
    everything = read(broker.bootstrap, "tx-orders", "read_uncommitted")
    assert sorted(committed) == sorted([b"committed-%d" % n for n in range(20)] + [b"after"])
    assert sorted(everything) == sorted(committed + [b"aborted-%d" % n for n in range(10)])
    assert sorted(read(broker.bootstrap, "tx-audit", "read_committed")) == sorted(
        b"committed-%d" % n for n in range(20))


def test_an_open_transaction_holds_read_committed_readers_back(broker):
    create(broker.bootstrap, "tx-open", partitions=1)
    producer = transactional(broker.bootstrap, "app-open")
    producer.begin_transaction()
    producer.produce("tx-open", b"pending", partition=0)
    producer.flush(10)
    assert read(broker.bootstrap, "tx-open", "read_committed", 1) == []
    assert read(broker.bootstrap, "tx-open", "read_uncommitted", 1) == [b"pending"]
    producer.commit_transaction(30)
    assert read(broker.bootstrap, "tx-open", "read_committed", 1) == [b"pending"]


def test_a_second_instance_fences_the_first(broker):
    create(broker.bootstrap, "tx-fence", partitions=1)
    first = transactional(broker.bootstrap, "app-fenced")
    first.begin_transaction()
    first.produce("tx-fence", b"zombie", partition=0)
    first.flush(10)
    second = transactional(broker.bootstrap, "app-fenced")  # aborts the first one's
    second.begin_transaction()
    second.produce("tx-fence", b"live", partition=0)
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as error:
        first.produce("tx-fence", b"zombie-2", partition=0)
        first.commit_transaction(10)
    assert error.value.args[0].fatal() or "fenced" in str(error.value).lower()
    assert read(broker.bootstrap, "tx-fence", "read_committed", 1) == [b"live"]


def test_offsets_sent_in_a_transaction_are_committed_with_it_and_dropped_on_abort(broker):
    create(broker.bootstrap, "tx-in", "tx-out", partitions=1)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "logger": quiet()})
    for number in range(10):
        plain.produce("tx-in", b"%d" % number, partition=0)
    plain.flush(10)
    group = "ctp-app"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "logger": quiet()})
    consumer.subscribe(["tx-in"])
    messages = []
    while len(messages) < 5:
        messages += [m for m in consumer.consume(5 - len(messages), timeout=1)
                     if m.error() is None]
    producer = transactional(broker.bootstrap, "app-ctp")
    producer.begin_transaction()
    for message in messages:
        producer.produce("tx-out", message.value().upper(), partition=0)
    producer.send_offsets_to_transaction([TopicPartition("tx-in", 0, 5)],
                                         consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    assert consumer.committed([TopicPartition("tx-in", 0)], timeout=10)[0].offset == 5

    producer.begin_transaction()
    producer.produce("tx-out", b"never", partition=0)
    producer.send_offsets_to_transaction([TopicPartition("tx-in", 0, 9)],
                                         consumer.consumer_group_metadata(), 30)
    producer.abort_transaction(30)
    assert consumer.committed([TopicPartition("tx-in", 0)], timeout=10)[0].offset == 5
    consumer.close()
    assert read(broker.bootstrap, "tx-out", "read_committed", 1) == [b"%d" % n for n in range(5)]


def test_kafka_python_and_aiokafka_transactions_are_read_by_librdkafka(broker):
    from kafka import KafkaProducer
    create(broker.bootstrap, "tx-clients", partitions=1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap,
                             transactional_id="app-kafka-python")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("tx-clients", b"kafka-python", partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("tx-clients", b"kafka-python-aborted", partition=0)
    producer.abort_transaction()
    producer.close()

    async def with_aiokafka() -> None:
        from aiokafka import AIOKafkaProducer
        aio = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                               transactional_id="app-aiokafka")
        await aio.start()
        try:
            async with aio.transaction():
                await aio.send_and_wait("tx-clients", b"aiokafka", partition=0)
            await aio.begin_transaction()
            await aio.send_and_wait("tx-clients", b"aiokafka-aborted", partition=0)
            await aio.abort_transaction()
        finally:
            await aio.stop()
    asyncio.run(with_aiokafka())

    assert read(broker.bootstrap, "tx-clients", "read_committed", 1) == [b"kafka-python",
                                                                          b"aiokafka"]


def test_a_transaction_open_when_the_broker_was_killed_is_aborted_after_its_timeout(
        broker_factory):
    broker = broker_factory(settings={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    create(broker.bootstrap, "tx-killed", partitions=1)
    producer = transactional(broker.bootstrap, "app-killed",
                             **{"transaction.timeout.ms": 3000})
    producer.begin_transaction()
    producer.produce("tx-killed", b"never-committed", partition=0)
    producer.flush(10)
    broker.restart(hard=True)  # kill -9 mid-transaction
    other = transactional(broker.bootstrap, "app-after")
    other.begin_transaction()
    other.produce("tx-killed", b"committed-after", partition=0)
    other.commit_transaction(30)
    deadline = time.monotonic() + 15  # the timeout (3 s) plus the cleanup interval
    while read(broker.bootstrap, "tx-killed", "read_committed", 1) != [b"committed-after"]:
        assert time.monotonic() < deadline, "the open transaction still holds the LSO back"
        time.sleep(0.2)
    assert read(broker.bootstrap, "tx-killed", "read_uncommitted", 1) == [
        b"never-committed", b"committed-after"]
    with pytest.raises(KafkaException):  # the producer that began it was fenced
        producer.commit_transaction(10)


# -- bad input: Kafka's error codes, and the broker keeps serving --------------------------

def _init(conn: RawConnection, transactional_id: str, timeout_ms: int = 60000):
    conn.request(FindCoordinatorRequest(key=transactional_id, key_type=1), 3)
    return conn.request(InitProducerIdRequest(transactional_id=transactional_id,
                                              transaction_timeout_ms=timeout_ms,
                                              producer_id=-1, producer_epoch=-1), 4)


def test_bad_transactional_requests_get_kafkas_error_codes(broker):
    create(broker.bootstrap, "tx-bad", partitions=1)
    with RawConnection(broker.bootstrap) as conn:
        too_long = _init(conn, "bad-timeout", timeout_ms=900_001)
        assert too_long.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        init = _init(conn, "bad-app")
        assert init.error_code == ErrorCode.NONE
        pid, epoch = init.producer_id, init.producer_epoch

        def end(producer_epoch, version=3):
            return conn.request(EndTxnRequest(transactional_id="bad-app", producer_id=pid,
                                              producer_epoch=producer_epoch, committed=True),
                                version).error_code
        assert end(epoch) == ErrorCode.INVALID_TXN_STATE  # no transaction open

        A = AddPartitionsToTxnRequest
        response = conn.request(A(v3_and_below_transactional_id="bad-app",
                                  v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                                  v3_and_below_topics=[
                                      A.AddPartitionsToTxnTopic(name="no-such-topic",
                                                                partitions=[0]),
                                      A.AddPartitionsToTxnTopic(name="tx-bad", partitions=[0])]),
                                3)
        codes = {t.name: t.results_by_partition[0].partition_error_code
                 for t in response.results_by_topic_v3_and_below}
        assert codes == {"no-such-topic": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         "tx-bad": ErrorCode.OPERATION_NOT_ATTEMPTED}

        newer = _init(conn, "bad-app")  # a second instance: epoch + 1
        assert newer.producer_epoch == epoch + 1
        assert end(epoch, version=3) == ErrorCode.PRODUCER_FENCED
        assert end(epoch, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH  # before KIP-588
        assert conn.request(FindCoordinatorRequest(key="", key_type=1), 3).error_code == \
            ErrorCode.INVALID_REQUEST
    producer = transactional(broker.bootstrap, "after-bad-input")
    producer.begin_transaction()
    producer.produce("tx-bad", b"still serving", partition=0)
    producer.commit_transaction(30)


def test_transactions_cli_lists_describes_and_aborts_a_hanging_transaction(broker):
    import subprocess
    import sys

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "oncelog", "transactions", *args,
                               "-b", broker.bootstrap], capture_output=True, text=True,
                              timeout=60)

    create(broker.bootstrap, "tx-cli", partitions=1)
    producer = transactional(broker.bootstrap, "app-cli")
    producer.begin_transaction()
    producer.produce("tx-cli", b"hanging", partition=0)
    producer.flush(10)

    listed = cli("list")
    assert listed.returncode == 0 and "app-cli\t" in listed.stdout and "Ongoing" in listed.stdout
    described = cli("describe", "app-cli")
    assert described.returncode == 0
    assert "state:            Ongoing" in described.stdout
    assert "partitions:       tx-cli-0" in described.stdout
    missing = cli("describe", "no-such-id")
    assert missing.returncode == 1
    assert missing.stderr.strip() == "oncelog: describing 'no-such-id': TRANSACTIONAL_ID_NOT_FOUND"

    assert read(broker.bootstrap, "tx-cli", "read_committed", 1) == []
    producers = subprocess.run([sys.executable, "-m", "oncelog", "producers", "describe",
                                "tx-cli", "-b", broker.bootstrap], capture_output=True,
                               text=True, timeout=60)
    assert producers.returncode == 0 and producers.stdout.splitlines()[1].endswith("\t0")
    wrong = cli("abort", "--topic", "tx-cli", "--partition", "0", "--start-offset", "5")
    assert wrong.returncode == 1 and "no transaction open" in wrong.stderr
    aborted = cli("abort", "--topic", "tx-cli", "--partition", "0", "--start-offset", "0")
    assert aborted.returncode == 0, aborted.stderr
    plain = Producer({"bootstrap.servers": broker.bootstrap, "logger": quiet()})
    plain.produce("tx-cli", b"after", partition=0)
    plain.flush(10)
    assert read(broker.bootstrap, "tx-cli", "read_committed", 1) == [b"after"]


def test_compaction_removes_aborted_records_and_keeps_the_latest_committed_value(
        broker_factory):
    """A compacted topic written by a transactional producer: rounds of a committed and an
    aborted transaction over the same keys, then padding so every round's segment is
    sealed. The cleaner (at each log.retention.check.interval.ms) removes the aborted
    batches physically - read_uncommitted no longer sees them - compacts the committed
    records to the latest value per key, and, with delete.retention.ms=0, removes the
    markers whose transaction left nothing: only the producer's last marker stays."""
    broker = broker_factory(settings={"log.retention.check.interval.ms": "100"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("tx-compacted", 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "2048",
        "delete.retention.ms": "0"})])["tx-compacted"].result(15)
    keys = [b"k%d" % n for n in range(4)]
    producer = transactional(broker.bootstrap, "app-compacted", **{"linger.ms": 0})
    for round_ in range(6):
        for outcome in ("committed", "aborted"):
            producer.begin_transaction()
            for key in keys:
                producer.produce("tx-compacted", key=key, partition=0,
                                 value=b"%s-%d-" % (outcome.encode(), round_) + b"x" * 150)
                producer.flush(10)
            if outcome == "committed":
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
    producer.begin_transaction()
    for key in keys:
        producer.produce("tx-compacted", key=key, value=b"final", partition=0)
    producer.commit_transaction(30)
    padding = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for _ in range(30):  # seals the final round's segment
        padding.produce("tx-compacted", key=b"pad", value=b"p" * 150, partition=0)
        padding.flush(10)

    def view(isolation: str) -> list[tuple[int, bytes, bytes]]:
        return [(r.offset, r.key, r.value) for r in read_topic(
            broker.bootstrap, "tx-compacted", isolation_level=isolation)]

    deadline = time.monotonic() + 10
    while any(value.startswith(b"aborted") for _, _, value in view("read_uncommitted")):
        assert time.monotonic() < deadline, "the aborted records are still there"
        time.sleep(0.2)
    uncommitted, committed = view("read_uncommitted"), view("read_committed")
    assert committed == uncommitted  # nothing left for read_committed to hide
    assert [(key, value) for _, key, value in committed if key != b"pad"] == [
        (key, b"final") for key in keys]
    offsets = [offset for offset, _, _ in committed]
    assert offsets == sorted(offsets) and offsets[-1] == 6 * 2 * 5 + 5 + 30 - 1

    def control_batches() -> list[int]:
        found = []
        for path in sorted((broker.data_dir / "tx-compacted-0").glob("*.log")):
            data = path.read_bytes()
            found += [h.base_offset for _, h in iter_headers(data) if h.is_control]
        return found

    deadline = time.monotonic() + 10
    while len(control_batches()) > 1:  # markers go in the pass after their batches
        assert time.monotonic() < deadline, control_batches()
        time.sleep(0.2)
    assert control_batches() == [6 * 2 * 5 + 4]  # the final commit: the producer's last
    assert not list((broker.data_dir / "tx-compacted-0").glob("*.txnindex"))


@pytest.mark.parametrize("delay_s", [0.02, 0.05, 0.1])
def test_a_client_gone_while_its_findcoordinator_creates_the_topic_leaves_no_hang(
        broker_factory, delay_s):
    """CI's flake of 2026-11-28: librdkafka's transactional producers of an `oncelog verify`
    run hung in init_transactions until the broker was killed. The first FindCoordinator
    for a transactional id creates ``__transaction_state`` (fifty partitions: a store write,
    then their directories prepared on a thread) and only then loads the coordinator. A
    client that closed its connection meanwhile (a request timeout; the run's drop-acks
    fault closes connections) had its request task cancelled half-way: the topic was in
    the store, not yet on the broker. The next FindCoordinator found it (TOPIC_ALREADY_EXISTS,
    read from the store), never loaded the coordinator, and every client got
    COORDINATOR_NOT_AVAILABLE until a restart. Now a topic's creation runs to its end
    whoever gave up waiting, and a single broker loads whatever coordinator partition it
    has not loaded yet. The closes come at a few delays, so one of them lands inside the
    creation on a fast or a slow machine."""
    broker = broker_factory()
    with RawConnection(broker.bootstrap) as conn:
        conn.send_frame(conn.header(FindCoordinatorRequest.API_KEY, 3)
                        + bytes(FindCoordinatorRequest(key="gone", key_type=1).encode(version=3)))
        time.sleep(delay_s)
    started = time.monotonic()
    producer = transactional(broker.bootstrap, "after-the-gone-client")  # 30 s at most
    assert time.monotonic() - started < 20
    producer.begin_transaction()
    create(broker.bootstrap, "tx-after-gone", partitions=1)
    producer.produce("tx-after-gone", b"committed")
    producer.commit_transaction(15)
    assert read(broker.bootstrap, "tx-after-gone", "read_committed", partitions=1) == [b"committed"]
