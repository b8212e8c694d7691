"""Transactions on a cluster: ``__transaction_state`` is replicated, the transaction
coordinator moves with its partition's leadership, and markers reach partitions led by other
brokers (WriteTxnMarkers)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer

from oncelog.coordinator.record_codec import partition_for

from .helpers import consume_all, create_topic, isr_of, leader_of, wait_until

pytestmark = pytest.mark.slow

STATE_PARTITIONS = 3


def _commit(producer: Producer, values: list[bytes], partitions: int, abort: bool = False):
    """One transaction over every partition; retried as librdkafka asks while the
    coordinator moves."""
    producer.begin_transaction()
    for number, value in enumerate(values):
        producer.produce("payments", value, partition=number % partitions)
    while True:
        try:
            if abort:
                producer.abort_transaction(60)
            else:
                producer.commit_transaction(60)
            return
        except KafkaException as error:
            if not error.args[0].retriable():
                raise


def test_transactions_commit_across_the_death_of_their_coordinator(cluster_factory):
    cluster = cluster_factory(3, **{"transaction.state.log.num.partitions":
                                    str(STATE_PARTITIONS)})
    create_topic(cluster, "payments", partitions=3, replication=3,
                 config={"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "payer",
                         "transaction.timeout.ms": 60000,
                         "topic.metadata.refresh.interval.ms": 1000})
    producer.init_transactions(60)
    committed: list[bytes] = []
    for batch in range(3):
        values = [b"before-%d-%d" % (batch, n) for n in range(9)]
        _commit(producer, values, 3)
        committed += values
    state_partition = partition_for("payer", STATE_PARTITIONS)
    coordinator = leader_of(cluster, "__transaction_state", state_partition)
    assert coordinator > 0
    wait_until(lambda: len(isr_of(cluster, "__transaction_state", state_partition)) == 3,
               what="__transaction_state fully replicated")
    # markers went to every partition's leader, so other brokers than the coordinator's
    assert {leader_of(cluster, "payments", p) for p in range(3)} - {coordinator}

    cluster.kill(coordinator)
    _commit(producer, [b"aborted-%d" % n for n in range(6)], 3, abort=True)
    for batch in range(3):
        values = [b"after-%d-%d" % (batch, n) for n in range(9)]
        _commit(producer, values, 3)
        committed += values
    new = leader_of(cluster, "__transaction_state", state_partition,
                    [n for n in cluster.brokers if n != coordinator])
    assert new not in (-1, coordinator)

    seen = consume_all(cluster, "payments", len(committed), partitions=3)
    assert sorted(seen) == sorted(committed)  # every committed record once, none aborted
    producer.flush(10)
