"""``oncelog producers describe TOPIC``: the idempotent and transactional producers each
partition tracks, with the start offset of a transaction a producer has open there (what
``oncelog transactions abort --start-offset`` takes)."""

from __future__ import annotations

import click

from . import main
from ..client.security import kafka_python_settings
from .common import Failure, bootstrap_option, client_settings, topic_metadata


@main.group()
def producers() -> None:
    """Inspect idempotent and transactional producers."""


@producers.command("describe")
@bootstrap_option
@click.argument("topic")
def producers_describe(bootstrap, topic) -> None:
    """Show each partition's active producers: id, epoch, last sequence, last timestamp,
    and the start offset of an open transaction (- for none)."""
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import KafkaError

    entry = topic_metadata(bootstrap, topic, "describe producers of")
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000,
                                 **kafka_python_settings(client_settings()))
    except KafkaError as error:
        raise Failure(f"cannot reach a broker at {bootstrap}: {error}") from None
    try:
        states = admin.describe_producers([TopicPartition(topic, p)
                                           for p in sorted(entry.partitions)])
    except KafkaError as error:
        raise Failure(f"cannot describe producers of {topic}: {error}") from None
    finally:
        admin.close()
    click.echo("partition\tproducer id\tepoch\tlast sequence\tlast timestamp\t"
               "open transaction from")
    for partition in sorted(states, key=lambda tp: tp.partition):
        for producer in states[partition].active_producers:
            start = producer.current_transaction_start_offset
            click.echo(f"{partition.partition}\t{producer.producer_id}\t{producer.producer_epoch}"
                       f"\t{producer.last_sequence}\t{producer.last_timestamp}"
                       f"\t{start if start >= 0 else '-'}")
