"""Retries through a proxy that drops acknowledgements: idempotent producers write every
record exactly once and in order; plain retrying producers write duplicates."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from oncelog.client.reader import read_topic
from oncelog.verify import FaultRules, ProxyThread

RECORDS = 100_000
PARTITIONS = 3


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)


def check_log(bootstrap: str, topic: str) -> dict:
    """Count copies of every id, and whether each partition holds its ids in send order."""
    records = list(read_topic(bootstrap, topic))
    copies: dict[int, int] = {}
    for record in records:
        copies[int(record.value)] = copies.get(int(record.value), 0) + 1
    ordered = True
    for partition in range(PARTITIONS):
        ids = [int(r.value) for r in records if r.partition == partition]
        ordered &= all(a < b for a, b in zip(ids, ids[1:]))
    return {"total": len(records), "distinct": len(copies), "ordered": ordered,
            "missing": RECORDS - len(copies), "duplicated": len(records) - len(copies)}


def quiet() -> logging.Logger:
    logger = logging.getLogger("test.librdkafka")
    logger.setLevel(logging.CRITICAL)
    return logger


def produce_confluent(bootstrap: str, topic: str, idempotent: bool) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent,
                         "acks": "all", "linger.ms": 2, "batch.num.messages": 200,
                         "compression.type": "lz4",  # sequences live outside the compressed part
                         "retry.backoff.ms": 10, "message.timeout.ms": 120000,
                         "logger": quiet()})
    for number in range(RECORDS):
        while True:
            try:
                producer.produce(topic, value=b"%d" % number, partition=number % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        if not number & 1023:
            producer.poll(0)
    assert producer.flush(120) == 0


def produce_kafka_python(bootstrap: str, topic: str, idempotent: bool) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2,
                             batch_size=4096, enable_idempotence=idempotent, retries=20,
                             retry_backoff_ms=10, max_in_flight_requests_per_connection=5,
                             request_timeout_ms=30000)
    futures = [producer.send(topic, value=b"%d" % n, partition=n % PARTITIONS)
               for n in range(RECORDS)]
    producer.flush(120)
    failed = [f for f in futures if f.failed()]
    producer.close()
    assert not failed, f"{len(failed)} sends failed, e.g. {failed[0].exception!r}"


@pytest.mark.slow
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_dropped_acks_duplicate_without_idempotence_and_not_with(broker, client):
    produce = produce_confluent if client == "confluent-kafka" else produce_kafka_python
    outcomes = {}
    for idempotent in (True, False):
        topic = f"drops-{client}-{idempotent}"
        create(broker.bootstrap, topic)
        rules = FaultRules(drop_response_rate=0.05, seed=7)
        with ProxyThread(broker.bootstrap, rules) as proxy:
            produce(proxy.bootstrap, topic, idempotent)
            dropped = proxy.stats.dropped_responses
        assert dropped >= 5, f"the proxy dropped only {dropped} acknowledgements"
        outcomes[idempotent] = check_log(broker.bootstrap, topic)
    exactly_once, plain = outcomes[True], outcomes[False]
    assert exactly_once == {"total": RECORDS, "distinct": RECORDS, "ordered": True,
                            "missing": 0, "duplicated": 0}
    assert plain["missing"] == 0 and plain["duplicated"] > 0, plain


@pytest.mark.slow
def test_broker_kill_9_mid_idempotent_run_loses_and_duplicates_nothing(broker):
    """The producer keeps sending while the broker is killed with SIGKILL and restarted; its
    retries after the restart are recognised from the producer state the broker rebuilt
    (snapshot + log replay), so the log holds every record once, in order."""
    create(broker.bootstrap, "restart")
    failures: list[str] = []
    delivered_at: list[float] = []
    killed_at: list[float] = []
    first_ack = threading.Event()

    def on_delivery(error, message) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            delivered_at.append(time.monotonic())
            first_ack.set()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 2, "batch.num.messages": 500,
                         "message.timeout.ms": 120000, "logger": quiet()})

    def restart_midway() -> None:
        # The kill lands mid-run: after the first acknowledgement (a loaded machine may take
        # over a second to get there), well before the ~3 s of sending are over.
        first_ack.wait(30)
        time.sleep(0.3)
        killed_at.append(time.monotonic())
        broker.kill()
        time.sleep(0.5)
        broker.start()

    restarter = threading.Thread(target=restart_midway)
    restarter.start()
    sent = 0
    deadline = time.monotonic() + 60
    while sent < RECORDS and time.monotonic() < deadline:
        try:
            producer.produce("restart", value=b"%d" % sent, partition=sent % PARTITIONS,
                             on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.01)
        if sent % 100 == 0:
            time.sleep(0.003)  # spread the run (~3 s) over the restart
            producer.poll(0)
    while restarter.is_alive():  # acknowledgements keep being served until the restart is done
        producer.poll(0.05)
    restarter.join()
    assert producer.flush(120) == 0 and not failures, failures[:3]
    assert "stopped cleanly" not in broker.log_path.read_text()  # it really was killed
    before = sum(1 for t in delivered_at if t < killed_at[0])
    assert 0 < before < RECORDS, f"{before} records were acknowledged before the kill"
    assert check_log(broker.bootstrap, "restart") == {
        "total": RECORDS, "distinct": RECORDS, "ordered": True, "missing": 0, "duplicated": 0}


@pytest.mark.slow
def test_producer_presets_keep_their_contracts_under_faults(broker):
    """at_most_once may lose but never duplicates; at_least_once never loses but may
    duplicate; exactly_once does neither - each through a proxy that breaks connections."""
    from oncelog.client.producer import at_least_once, at_most_once, exactly_once
    count = 20_000
    outcomes = {}
    for name, make, rules in [
            ("at_most_once", at_most_once, FaultRules(cut_rate=0.02, seed=3)),
            ("at_least_once", at_least_once, FaultRules(drop_response_rate=0.1, seed=3)),
            ("exactly_once", exactly_once, FaultRules(drop_response_rate=0.1, seed=3))]:
        topic = f"preset-{name}"
        create(broker.bootstrap, topic)
        with ProxyThread(broker.bootstrap, rules) as proxy:
            producer = make(proxy.bootstrap, **{"linger.ms": 2, "batch.num.messages": 100,
                                                "message.timeout.ms": 60000,
                                                "logger": quiet()})
            for number in range(count):
                while True:
                    try:
                        producer.produce(topic, value=b"%d" % number, partition=number % 3)
                        break
                    except BufferError:
                        producer.poll(0.01)
            producer.flush(90)
        copies: dict[bytes, int] = {}
        for record in read_topic(broker.bootstrap, topic):
            copies[record.value] = copies.get(record.value, 0) + 1
        outcomes[name] = (count - len(copies), sum(c - 1 for c in copies.values()))
    lost, duplicated = outcomes["at_most_once"]
    assert lost > 0 and duplicated == 0, outcomes
    lost, duplicated = outcomes["at_least_once"]
    assert lost == 0 and duplicated > 0, outcomes
    assert outcomes["exactly_once"] == (0, 0), outcomes
