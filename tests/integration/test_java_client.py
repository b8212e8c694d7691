"""The Apache Kafka Java client (kafka-clients 3.9.1) against a real broker process.

Each test launches ``tests/java/KafkaClientProbe.java`` (compiled once per session by the
``java`` fixture; see ``java_client.py``) with a list of steps run in one JVM, and reads
back the JSON lines it prints: records sent and polled, offsets committed, and the class
name of each exception. Checks cross clients where it matters: what Java writes is read by
confluent-kafka (librdkafka), and the other way round.
"""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from oncelog.client.reader import read_topic
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import DescribeProducersRequest
from oncelog.verify import FaultRules, ProxyThread
from tests.integration.java_client import JavaProbe
from tests.integration.raw import RawConnection

# Groups form at once (Kafka waits 3 s for more members to join a new group).
SETTINGS = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="session")
def java(tmp_path_factory) -> JavaProbe:
    return JavaProbe.compile(tmp_path_factory.mktemp("java-probe"))


@pytest.fixture
def broker(broker_factory):
    return broker_factory(settings=SETTINGS)


def quiet() -> logging.Logger:
    logger = logging.getLogger("test.librdkafka")
    logger.setLevel(logging.CRITICAL)
    return logger


def read(bootstrap: str, topic: str, isolation: str) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of every record confluent-kafka reads up to the end."""
    return sorted((r.partition, r.offset, r.value.decode())
                  for r in read_topic(bootstrap, topic, isolation_level=isolation))


def positions(records: list[dict]) -> list[tuple[int, int, str]]:
    return sorted((r["partition"], r["offset"], r["value"]) for r in records)


def test_records_keys_and_headers_round_trip_with_every_acks_and_codec(broker, java):
    run = java.run(
        broker.bootstrap,
        "create topics=j-round-trip partitions=2",
        "producer name=one acks=1 enable.idempotence=false compression.type=lz4",
        "send producer=one topic=j-round-trip count=40 key=k value=one headers=true",
        "producer name=none acks=0 enable.idempotence=false compression.type=snappy",
        "send producer=none topic=j-round-trip count=40 value=none partition=1",
        "producer name=all acks=all compression.type=zstd linger.ms=5",
        "send producer=all topic=j-round-trip count=40 key=k value=all headers=true",
        "consumer name=reader topics=j-round-trip",
        "poll consumer=reader count=120")

    records = run.records("reader")
    assert sorted(r["value"] for r in records) == sorted(
        f"{name}-{i}" for name in ("one", "none", "all") for i in range(40))
    for partition in (0, 1):
        offsets = [r["offset"] for r in records if r["partition"] == partition]
        assert offsets == list(range(len(offsets))), "offsets are dense and in order"
    by_value = {r["value"]: r for r in records}
    assert by_value["one-7"]["key"] == "k-7" and by_value["none-7"]["key"] is None
    assert by_value["all-7"]["headers"] == [["n", "7"], ["empty", None]]
    assert by_value["none-7"]["headers"] == [] and by_value["none-7"]["partition"] == 1
    sent = {(s["producer"], s["partition"], s["offset"]) for s in run.of("sent")}
    # acks=0 is never answered: the Java client makes up offsets (-1 plus the record's
    # place in its batch), so only the acknowledged producers' offsets are compared
    for name in ("one", "all"):
        assert {(name, r["partition"], r["offset"]) for r in records
                if r["value"].startswith(name + "-")} == {s for s in sent if s[0] == name}

    librdkafka = {r.value.decode(): r for r in read_topic(broker.bootstrap, "j-round-trip")}
    assert sorted(librdkafka) == sorted(by_value)
    assert librdkafka["one-3"].key == b"k-3"
    assert librdkafka["one-3"].headers == [("n", b"3"), ("empty", None)]


def test_the_idempotent_java_producer_writes_each_record_once_through_dropped_acks(broker, java):
    """The Java producer is idempotent by default (3.x): a proxy drops 10% of the Produce
    responses and cuts the connection; the retried batches are recognised by their
    sequence numbers, so every record is in the log once, in send order. The same faults
    make a producer without idempotence write duplicates."""
    settings = ("linger.ms=2 batch.size=512 retry.backoff.ms=10 request.timeout.ms=5000 "
                "delivery.timeout.ms=120000")
    rules = FaultRules(drop_response_rate=0.1, seed=11)
    with ProxyThread(broker.bootstrap, rules) as proxy:
        java.run(proxy.bootstrap,
                 "create topics=j-idempotent,j-plain partitions=3",
                 f"producer name=idempotent {settings}",
                 "send producer=idempotent topic=j-idempotent count=10000 value=r",
                 f"producer name=plain enable.idempotence=false {settings}",
                 "send producer=plain topic=j-plain count=10000 value=r")
        dropped = proxy.stats.dropped_responses
    assert dropped >= 5, f"the proxy dropped only {dropped} acknowledgements"

    records = list(read_topic(broker.bootstrap, "j-idempotent"))
    numbers = [int(r.value.decode().removeprefix("r-")) for r in records]
    assert sorted(numbers) == list(range(10000)), "every record exactly once"
    for partition in range(3):
        in_partition = [n for r, n in zip(records, numbers) if r.partition == partition]
        assert in_partition == sorted(in_partition), f"partition {partition} is in send order"
    plain = [int(r.value.decode().removeprefix("r-"))
             for r in read_topic(broker.bootstrap, "j-plain")]
    assert set(plain) == set(range(10000)) and len(plain) > 10000, "plain retries duplicate"

    with RawConnection(broker.bootstrap) as connection:
        described = connection.request(DescribeProducersRequest(topics=[
            DescribeProducersRequest.TopicRequest(name="j-idempotent",
                                                  partition_indexes=[0, 1, 2])]), 0)
    producers = {p.partition_index: p.active_producers for p in described.topics[0].partitions}
    producer_ids = {producer.producer_id for state in producers.values() for producer in state}
    assert len(producer_ids) == 1 and producer_ids != {-1}, producers
    for partition, (producer,) in producers.items():
        count = sum(1 for r in records if r.partition == partition)
        assert (producer.producer_epoch, producer.last_sequence) == (0, count - 1)


def test_java_consumer_group_members_commit_resume_and_share_partitions(broker, java):
    # members learn of a rebalance from a heartbeat's answer: every 200 ms, not 3 s
    group = "subscribe=true group.id=j-app heartbeat.interval.ms=200"
    run = java.run(
        broker.bootstrap,
        "create topics=j-group partitions=2",
        "producer name=app",
        "send producer=app topic=j-group count=30 key=k value=v",
        f"consumer name=first topics=j-group {group} max.poll.records=4",
        "poll consumer=first count=8",
        "commit-offsets consumer=first",
        "close name=first",  # LeaveGroup: the second member gets both partitions at once
        f"consumer name=second topics=j-group {group}",
        "poll consumer=second",
        "commit-offsets consumer=second",
        f"consumer name=third topics=j-group {group}",
        "poll consumer=second,third",  # a rebalance: one partition each
        "send producer=app topic=j-group count=20 key=k value=w",
        "poll consumer=second,third count=20",
        "commit-offsets consumer=second",
        "commit-offsets consumer=third")

    first, second = run.records("first"), run.records("second")
    assert 8 <= len(first) < 30
    assert sorted(run.values()) == sorted([f"v-{i}" for i in range(30)]
                                          + [f"w-{i}" for i in range(20)]), "each read once"
    committed_first = run.of("offsets")[0]["offsets"]
    for partition in (0, 1):
        read_first = [r["offset"] for r in first if r["partition"] == partition]
        read_second = [r["offset"] for r in second
                       if r["partition"] == partition and r["value"].startswith("v-")]
        assert committed_first[f"j-group-{partition}"] == len(read_first)
        assert read_second == list(range(len(read_first), len(read_first) + len(read_second)))

    *_, second_assigned, third_assigned = run.of("assignment")
    assert sorted(second_assigned["partitions"] + third_assigned["partitions"]) == [
        "j-group-0", "j-group-1"]
    assert len(second_assigned["partitions"]) == 1
    later = [r for r in run.records() if r["value"].startswith("w-")]
    assert sorted(r["value"] for r in later) == sorted(f"w-{i}" for i in range(20))
    for record in later:  # each read once, by the member that owns its partition
        owner = second_assigned if record["consumer"] == "second" else third_assigned
        assert owner["partitions"] == [f"j-group-{record['partition']}"]

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "j-app",
                         "logger": quiet()})
    try:
        committed = consumer.committed([TopicPartition("j-group", p) for p in (0, 1)], timeout=10)
    finally:
        consumer.close()
    last_commits = {**run.of("offsets")[-2]["offsets"], **run.of("offsets")[-1]["offsets"]}
    assert {f"j-group-{tp.partition}": tp.offset for tp in committed} == last_commits
    assert sum(last_commits.values()) == 50


def test_a_java_transaction_is_read_whole_when_committed_and_never_when_aborted(broker, java):
    run = java.run(
        broker.bootstrap,
        "create topics=j-orders,j-audit partitions=2",
        "producer name=app transactional.id=j-orders-app",
        "begin producer=app",
        "send producer=app topic=j-orders count=5 value=orders0 partition=0",
        "send producer=app topic=j-orders count=5 value=orders1 partition=1",
        "send producer=app topic=j-audit count=5 value=audit partition=0",
        "commit producer=app",
        "begin producer=app",
        "send producer=app topic=j-orders count=3 value=aborted partition=0",
        "send producer=app topic=j-audit count=3 value=aborted-audit partition=1",
        "abort producer=app",
        "begin producer=app",
        "send producer=app topic=j-orders value=open partition=1",  # left open for now
        "consumer name=committed topics=j-orders,j-audit isolation.level=read_committed",
        "poll consumer=committed",  # to the last stable offset: before the open transaction
        "consumer name=everything topics=j-orders,j-audit isolation.level=read_uncommitted",
        "poll consumer=everything",
        "commit producer=app",
        "consumer name=after topics=j-orders,j-audit isolation.level=read_committed",
        "poll consumer=after")

    committed = [f"orders0-{i}" for i in range(5)] + [f"orders1-{i}" for i in range(5)] + \
        [f"audit-{i}" for i in range(5)]
    aborted = [f"aborted-{i}" for i in range(3)] + [f"aborted-audit-{i}" for i in range(3)]
    assert sorted(run.values("committed")) == sorted(committed)
    assert sorted(run.values("everything")) == sorted(committed + aborted + ["open"])
    assert sorted(run.values("after")) == sorted(committed + ["open"])

    for topic in ("j-orders", "j-audit"):
        java_committed = positions([r for r in run.records("after") if r["topic"] == topic])
        java_everything = positions([r for r in run.records("everything")
                                     if r["topic"] == topic])
        assert read(broker.bootstrap, topic, "read_committed") == java_committed
        assert read(broker.bootstrap, topic, "read_uncommitted") == java_everything


def test_a_second_java_producer_with_the_same_transactional_id_fences_the_first(broker, java):
    """KIP-588: Produce answers a fenced epoch with INVALID_PRODUCER_EPOCH, which the Java
    client treats as abortable (InvalidProducerEpochException, from the send and again from
    commitTransaction); the abort's EndTxn then gets PRODUCER_FENCED, which is fatal. A
    fenced producer whose next call is commitTransaction gets ProducerFencedException at
    once."""
    run = java.run(
        broker.bootstrap,
        "create topics=j-fence partitions=1",
        "producer name=zombie transactional.id=j-fenced",
        "begin producer=zombie",
        "send producer=zombie topic=j-fence value=zombie partition=0",
        "producer name=live transactional.id=j-fenced",  # bumps the epoch, aborts the zombie's
        "begin producer=live",
        "send producer=live topic=j-fence value=live partition=0",
        "commit producer=live",
        "send producer=zombie topic=j-fence value=zombie-again partition=0",
        "commit producer=zombie",
        "abort producer=zombie",
        "producer name=stale transactional.id=j-fenced-at-commit",
        "begin producer=stale",
        "send producer=stale topic=j-fence value=stale partition=0",
        "producer name=successor transactional.id=j-fenced-at-commit",
        "commit producer=stale",
        "begin producer=successor",
        "send producer=successor topic=j-fence value=successor partition=0",
        "commit producer=successor",
        "consumer name=reader topics=j-fence isolation.level=read_committed",
        "poll consumer=reader",
        check=False)

    assert [(e["step"], e["exception"]) for e in run.errors] == [
        ("send", "InvalidProducerEpochException"),
        ("commit", "InvalidProducerEpochException"),
        ("abort", "ProducerFencedException"),
        ("commit", "ProducerFencedException"),
    ], run.explain()
    assert run.returncode == 1
    assert run.values("reader") == ["live", "successor"]
    assert [value for _, _, value in read(broker.bootstrap, "j-fence", "read_uncommitted")] == [
        "zombie", "live", "stale", "successor"]


def test_a_confluent_kafka_transaction_is_read_by_the_java_read_committed_consumer(broker, java):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "j-rdkafka",
                         "logger": quiet()})
    producer.init_transactions(30)
    producer.begin_transaction()
    for number in range(10):
        producer.produce("j-from-librdkafka", f"committed-{number}".encode(), partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for number in range(4):
        producer.produce("j-from-librdkafka", f"aborted-{number}".encode(), partition=0)
    producer.flush(10)  # librdkafka's abort drops what it has not sent yet
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("j-from-librdkafka", b"open", partition=0)
    producer.flush(10)

    run = java.run(
        broker.bootstrap,
        "consumer name=committed topics=j-from-librdkafka isolation.level=read_committed",
        "poll consumer=committed",
        "consumer name=everything topics=j-from-librdkafka isolation.level=read_uncommitted",
        "poll consumer=everything")
    producer.commit_transaction(30)

    committed = [f"committed-{n}" for n in range(10)]
    assert run.values("committed") == committed
    assert run.values("everything") == committed + [f"aborted-{n}" for n in range(4)] + ["open"]
    assert [r["offset"] for r in run.records("everything")] == \
        list(range(10)) + list(range(11, 15)) + [16]  # the markers take offsets 10 and 15


def test_offsets_sent_to_a_java_transaction_are_committed_with_it_and_not_on_abort(broker,
                                                                                   java):
    run = java.run(
        broker.bootstrap,
        "create topics=j-in,j-out partitions=1",
        "producer name=upstream",
        "send producer=upstream topic=j-in count=10 value=in",
        "producer name=app transactional.id=j-read-process-write",
        "consumer name=in topics=j-in subscribe=true group.id=j-rpw "
        "isolation.level=read_committed max.poll.records=5",
        "poll consumer=in count=5",
        "begin producer=app",
        "send producer=app topic=j-out count=5 value=out partition=0",
        "send-offsets producer=app consumer=in",  # AddOffsetsToTxn + TxnOffsetCommit
        "commit producer=app",
        "poll consumer=in count=5",
        "begin producer=app",
        "send producer=app topic=j-out value=never partition=0",
        "send-offsets producer=app consumer=in",
        "abort producer=app",
        "close name=in")

    assert run.values("in") == [f"in-{n}" for n in range(10)]
    assert [e["offsets"] for e in run.of("offsets")] == [{"j-in-0": 5}, {"j-in-0": 10}]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "j-rpw",
                         "isolation.level": "read_committed", "logger": quiet()})
    try:
        (committed,) = consumer.committed([TopicPartition("j-in", 0)], timeout=10)
    finally:
        consumer.close()
    assert committed.offset == 5, "the aborted transaction's offsets were not committed"
    assert [value for _, _, value in read(broker.bootstrap, "j-out", "read_committed")] == [
        f"out-{n}" for n in range(5)]


# The version of each API the Java client 3.9.1 sends to oncelog: the highest both speak
# (docs/compatibility.md lists them). A change here is a change in what the broker
# advertises or in what the client asks for; update the docs with it.
JAVA_CLIENT_VERSIONS = {
    # v4 first, answered at v0 with UNSUPPORTED_VERSION and our range (KIP-511), then v3
    "API_VERSIONS": [3, 4],
    "METADATA": [12], "CREATE_TOPICS": [7],
    "PRODUCE": [11], "INIT_PRODUCER_ID": [5],
    "FETCH": [12], "LIST_OFFSETS": [8],
    "FIND_COORDINATOR": [4], "JOIN_GROUP": [9], "SYNC_GROUP": [5], "HEARTBEAT": [4],
    "LEAVE_GROUP": [5], "OFFSET_COMMIT": [9], "OFFSET_FETCH": [9],
    "ADD_PARTITIONS_TO_TXN": [3], "ADD_OFFSETS_TO_TXN": [3], "TXN_OFFSET_COMMIT": [3],
    "END_TXN": [3],
}


def test_the_api_versions_the_java_client_asks_for(broker, java):
    with ProxyThread(broker.bootstrap, FaultRules()) as proxy:
        java.run(
            proxy.bootstrap,
            "create topics=j-versions-in,j-versions-out partitions=1",
            "producer name=plain",
            "send producer=plain topic=j-versions-in count=4 value=in",
            "consumer name=group topics=j-versions-in subscribe=true group.id=j-versions "
            "heartbeat.interval.ms=100",  # so it heartbeats during this short run
            "poll consumer=group count=2",
            "commit-offsets consumer=group",
            "producer name=app transactional.id=j-versions",
            "begin producer=app",
            "send producer=app topic=j-versions-out value=out",
            "send-offsets producer=app consumer=group",
            "commit producer=app",
            "consumer name=reader topics=j-versions-out isolation.level=read_committed",
            "poll consumer=reader",
            "close name=group")
        seen = {ApiKey(key).name: sorted(versions)
                for key, versions in proxy.stats.versions_by_api.items()}
    assert seen == JAVA_CLIENT_VERSIONS
