"""``oncelog topics create|list|describe|delete``."""

from __future__ import annotations

import click

from . import main
from .common import (admin_client, bootstrap_option, cluster_metadata, parse_pair,
                     client_config, client_settings, topic_metadata, wait_for)

@main.group()
def topics() -> None:
    """Create, list, describe and delete topics."""


@topics.command("create")
@bootstrap_option
@click.argument("name")
@click.option("--partitions", "-p", type=int, default=-1, help="[default: the broker's]")
@click.option("--replication-factor", "-r", type=int, default=-1, help="[default: the broker's]")
@click.option("--config", "-c", "configs", multiple=True, metavar="NAME=VALUE",
              help="A topic config, e.g. retention.ms=60000 (repeatable).")
def topics_create(bootstrap, name, partitions, replication_factor, configs) -> None:
    """Create topic NAME."""
    from confluent_kafka.admin import NewTopic
    config = dict(parse_pair(c) for c in configs)
    admin = admin_client(bootstrap)  # held: a collected client fails its futures
    future = admin.create_topics(
        [NewTopic(name, partitions, replication_factor, config=config)], request_timeout=15)[name]
    wait_for(future, f"cannot create topic {name}")
    click.echo(f"created topic {name}")


@topics.command("list")
@bootstrap_option
def topics_list(bootstrap) -> None:
    """List topics with their partition counts."""
    metadata = cluster_metadata(bootstrap)
    for name in sorted(metadata.topics):
        click.echo(f"{name}\t{len(metadata.topics[name].partitions)} partitions")


@topics.command("describe")
@bootstrap_option
@click.argument("name")
def topics_describe(bootstrap, name) -> None:
    """Show a topic's partitions, offsets and configs."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import ConfigResource, ConfigSource
    topic = topic_metadata(bootstrap, name, "describe topic")
    consumer = Consumer(client_config(bootstrap, {"group.id": "oncelog-cli",
                                                         "enable.auto.commit": False}))
    try:
        epochs = _leader_epochs(bootstrap, name)
        click.echo(f"topic {name}: {len(topic.partitions)} partitions")
        click.echo("partition\tleader\tepoch\treplicas\tisr\toffline\tstart offset\t"
                   "end offset")
        for index in sorted(topic.partitions):
            info = topic.partitions[index]
            epoch, offline = epochs.get(index, ("?", []))
            low: int | str = "-"  # no leader to ask, or it does not answer
            high: int | str = "-"
            if info.leader >= 0:
                try:
                    low, high = consumer.get_watermark_offsets(TopicPartition(name, index),
                                                               timeout=5)
                except KafkaException:
                    pass
            click.echo(f"{index}\t{info.leader}\t{epoch}\t{info.replicas}\t{info.isrs}\t"
                       f"{offline}\t{low}\t{high}")
    finally:
        consumer.close()
    resource = ConfigResource("topic", name)
    admin = admin_client(bootstrap)
    configs = wait_for(admin.describe_configs([resource])[resource],
                    f"cannot read configs of {name}")
    click.echo("configs:")
    for key in sorted(configs):
        entry = configs[key]
        source = ConfigSource(entry.source).name.lower().replace("_", " ")
        click.echo(f"  {key}={entry.value}  ({source})")


def _leader_epochs(bootstrap: str, name: str) -> dict[int, tuple[int, list[int]]]:
    """Leader epoch and offline replicas per partition (confluent-kafka reports neither)."""
    from ..client.bootstrap import connector_for
    from ..client.metadata import fetch_metadata
    try:
        metadata = fetch_metadata(bootstrap, [name], connector=connector_for(client_settings()))
    except ConnectionError:
        return {}
    return {p.partition_index: (p.leader_epoch, list(p.offline_replicas))
            for t in metadata.topics if t.name == name for p in t.partitions}


@topics.command("delete")
@bootstrap_option
@click.argument("name")
def topics_delete(bootstrap, name) -> None:
    """Delete topic NAME and all its data."""
    admin = admin_client(bootstrap)
    future = admin.delete_topics([name], request_timeout=15)[name]
    wait_for(future, f"cannot delete topic {name}")
    click.echo(f"deleted topic {name}")


