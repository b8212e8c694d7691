"""``oncelog groups list|describe|delete|reset-offsets``: consumer groups over confluent-kafka's
AdminClient, against any Kafka-protocol broker.

``describe`` shows members and their assignments, then every committed offset with the
partition's end offset and the lag (end - committed). ``reset-offsets`` moves a group's
committed offsets for one topic (earliest, latest, an offset, or the first record at or after
a time); like Kafka's ``kafka-consumer-groups --reset-offsets`` it refuses a group that has
members, since they would overwrite the reset with their next commit.
"""

from __future__ import annotations

import click

from . import main
from .common import (Failure, admin_client, bootstrap_option, client_config, topic_metadata,
                     wait_for)


@main.group()
def groups() -> None:
    """List, describe and delete consumer groups; reset their committed offsets."""


def _state(state) -> str:
    """ConsumerGroupState.PREPARING_REBALANCING -> PreparingRebalance (Kafka's spelling)."""
    names = {"STABLE": "Stable", "EMPTY": "Empty", "DEAD": "Dead",
             "PREPARING_REBALANCING": "PreparingRebalance",
             "COMPLETING_REBALANCING": "CompletingRebalance"}
    name = getattr(state, "name", str(state))
    return names.get(name, name.title())


@groups.command("list")
@bootstrap_option
def groups_list(bootstrap) -> None:
    """List consumer groups and their states."""
    admin = admin_client(bootstrap)  # held: a collected client fails its futures
    listed = wait_for(admin.list_consumer_groups(request_timeout=15),
                      f"cannot list groups at {bootstrap}")
    for listing in sorted(listed.valid, key=lambda g: g.group_id):
        click.echo(f"{listing.group_id}\t{_state(listing.state)}")


def _describe(admin, group: str):
    return wait_for(admin.describe_consumer_groups([group], request_timeout=15)[group],
                    f"cannot describe group {group}")


def _committed(admin, group: str) -> list:
    from confluent_kafka import ConsumerGroupTopicPartitions
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                               request_timeout=15)[group]
    result = wait_for(future, f"cannot read the committed offsets of group {group}")
    return sorted(result.topic_partitions, key=lambda tp: (tp.topic, tp.partition))


def _watermarks(bootstrap: str, partitions) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, high) watermark of each (topic, partition), read without joining a group."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    consumer = Consumer(client_config(bootstrap, {"group.id": "oncelog-cli",
                                                         "enable.auto.commit": False}))
    try:
        return {(topic, partition): consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=10)
                for topic, partition in partitions}
    except KafkaException as error:
        raise Failure(f"cannot read end offsets: {error.args[0].str()}") from None
    finally:
        consumer.close()


@groups.command("describe")
@bootstrap_option
@click.argument("group")
def groups_describe(bootstrap, group) -> None:
    """Show GROUP's members, assignments, committed offsets and lag."""
    admin = admin_client(bootstrap)
    description = _describe(admin, group)
    state = _state(description.state)
    if state == "Dead":
        raise Failure(f"group {group} does not exist")
    members = description.members
    click.echo(f"group {group}: {state}, assignor {description.partition_assignor or '-'}, "
               f"{len(members)} members")
    owner: dict[tuple[str, int], str] = {}
    if members:
        click.echo("member\tclient id\thost\tinstance id\tassigned partitions")
        for member in members:
            parts = sorted((tp.topic, tp.partition) for tp in member.assignment.topic_partitions)
            owner.update({part: member.member_id for part in parts})
            click.echo(f"{member.member_id}\t{member.client_id}\t{member.host}\t"
                       f"{member.group_instance_id or '-'}\t"
                       f"{', '.join(f'{t}-{p}' for t, p in parts) or '-'}")
    committed = [tp for tp in _committed(admin, group) if tp.offset >= 0]
    if not committed:
        click.echo("no committed offsets")
        return
    ends = _watermarks(bootstrap, [(tp.topic, tp.partition) for tp in committed])
    click.echo("topic\tpartition\tcommitted\tend\tlag\tmember\tmetadata")
    for tp in committed:
        end = ends[(tp.topic, tp.partition)][1]
        click.echo(f"{tp.topic}\t{tp.partition}\t{tp.offset}\t{end}\t{max(end - tp.offset, 0)}\t"
                   f"{owner.get((tp.topic, tp.partition), '-')}\t{tp.metadata or ''}")


@groups.command("delete")
@bootstrap_option
@click.argument("names", metavar="GROUP...", nargs=-1, required=True)
def groups_delete(bootstrap, names) -> None:
    """Delete empty groups with their committed offsets."""
    admin = admin_client(bootstrap)
    futures = admin.delete_consumer_groups(list(names), request_timeout=15)
    for name in names:
        wait_for(futures[name], f"cannot delete group {name}")
        click.echo(f"deleted group {name}")


@groups.command("reset-offsets")
@bootstrap_option
@click.argument("group")
@click.option("--topic", "-t", required=True, help="The topic whose offsets to reset.")
@click.option("--to-earliest", "target", flag_value="earliest", help="The first offset kept.")
@click.option("--to-latest", "target", flag_value="latest", help="The end of each partition.")
@click.option("--to-offset", type=int, default=None, metavar="N",
              help="Offset N in every partition (clamped to what the partition holds).")
@click.option("--to-datetime", default=None, metavar="ISO",
              help="The first record at or after this time, e.g. 2026-11-22T10:00.")
@click.option("--dry-run", is_flag=True, help="Show the new offsets without committing them.")
def groups_reset_offsets(bootstrap, group, topic, target, to_offset, to_datetime,
                         dry_run) -> None:
    """Move GROUP's committed offsets for a topic; the group must have no members."""
    chosen = [name for name, value in (("--to-earliest/--to-latest", target),
                                       ("--to-offset", to_offset),
                                       ("--to-datetime", to_datetime)) if value is not None]
    if len(chosen) != 1:
        raise Failure("choose exactly one of --to-earliest, --to-latest, --to-offset N and "
                      "--to-datetime ISO")
    admin = admin_client(bootstrap)
    description = _describe(admin, group)
    if description.members:
        raise Failure(f"group {group} is {_state(description.state)} with "
                      f"{len(description.members)} members; stop its consumers first, or "
                      "they will commit over the reset")
    partitions = sorted(topic_metadata(bootstrap, topic, "reset offsets for topic").partitions)
    ends = _watermarks(bootstrap, [(topic, p) for p in partitions])
    if to_datetime is not None:
        offsets = _offsets_at(bootstrap, topic, partitions, to_datetime, ends)
    elif to_offset is not None:
        offsets = {p: min(max(to_offset, ends[(topic, p)][0]), ends[(topic, p)][1])
                   for p in partitions}
    else:
        offsets = {p: ends[(topic, p)][0 if target == "earliest" else 1] for p in partitions}
    if not dry_run:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())])
        future = admin.alter_consumer_group_offsets([request], request_timeout=15)[group]
        wait_for(future, f"cannot reset the offsets of group {group}")
    click.echo("topic\tpartition\tnew offset")
    for partition, offset in sorted(offsets.items()):
        click.echo(f"{topic}\t{partition}\t{offset}")
    if dry_run:
        click.echo("(dry run: nothing committed)", err=True)


def _offsets_at(bootstrap: str, topic: str, partitions: list[int], moment: str,
                ends: dict) -> dict[int, int]:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    from ..client.reader import parse_start
    try:
        kind, timestamp_ms = parse_start(moment)
    except ValueError:
        kind = None
    if kind != "time":
        raise Failure(f"--to-datetime {moment!r} is not an ISO-8601 time such as "
                      "2026-11-22T10:00")
    consumer = Consumer(client_config(bootstrap, {"group.id": "oncelog-cli",
                                                         "enable.auto.commit": False}))
    try:
        found = consumer.offsets_for_times(
            [TopicPartition(topic, p, timestamp_ms) for p in partitions], timeout=10)
    except KafkaException as error:
        raise Failure(f"cannot look up offsets by time: {error.args[0].str()}") from None
    finally:
        consumer.close()
    # No record at or after the time: the end of the partition, as Kafka's tool does.
    return {tp.partition: tp.offset if tp.offset >= 0 else ends[(topic, tp.partition)][1]
            for tp in found}
