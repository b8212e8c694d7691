"""``oncelog acls add|list|remove``: ACLs, shaped like Kafka's ``kafka-acls`` (``--allow-principal
User:alice --operation Read --topic orders``, ``--resource-pattern-type prefixed``,
``--producer``/``--consumer`` for the usual sets), written where brokers read them: the
metadata store - a single broker's data directory (``--data-dir``, the broker stopped: it reads
them as it starts) or a cluster's ZooKeeper (``--zookeeper``, at any time: every broker watches
them). A running broker's ACLs are also changed through any Kafka AdminClient (CreateAcls,
DeleteAcls) by a principal allowed ALTER on the cluster.
"""

from __future__ import annotations

import click

from . import main
from .common import Failure
from .users import _Store, _store_options

OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
              "DescribeConfigs", "AlterConfigs", "IdempotentWrite")


@main.group()
def acls() -> None:
    """Add, list and remove ACLs (with authorizer.class.name set, brokers apply them)."""


def _resource_options(command):
    for option in reversed((
            click.option("--topic", "topics", multiple=True, metavar="NAME",
                         help="A topic (or, with --resource-pattern-type prefixed, a prefix)."),
            click.option("--group", "groups", multiple=True, metavar="NAME",
                         help="A consumer group."),
            click.option("--transactional-id", "transactional_ids", multiple=True,
                         metavar="ID", help="A producer's transactional.id."),
            click.option("--cluster", is_flag=True, help="The cluster (kafka-cluster)."),
            click.option("--resource-pattern-type", "pattern", default="literal",
                         show_default=True,
                         type=click.Choice(["literal", "prefixed"], case_sensitive=False),
                         help="literal: the name exactly (* is every name); prefixed: every "
                              "name starting with it."))):
        command = option(command)
    return command


def _entry_options(command):
    for option in reversed((
            click.option("--allow-principal", "allow", multiple=True, metavar="TYPE:NAME",
                         help="Who is allowed, e.g. User:alice (User:* for everyone)."),
            click.option("--deny-principal", "deny", multiple=True, metavar="TYPE:NAME",
                         help="Who is denied (a DENY wins over every ALLOW)."),
            click.option("--host", "hosts", multiple=True, metavar="ADDRESS",
                         help="From where [default: *, every host]."),
            click.option("--operation", "operations", multiple=True,
                         type=click.Choice(OPERATIONS, case_sensitive=False),
                         help="What they may (or may not) do; repeat for several."),
            click.option("--producer", is_flag=True,
                         help="WRITE, DESCRIBE and CREATE on the topics (and WRITE, DESCRIBE "
                              "on the transactional ids), as kafka-acls --producer."),
            click.option("--consumer", is_flag=True,
                         help="READ and DESCRIBE on the topics, READ on the groups, as "
                              "kafka-acls --consumer."))):
        command = option(command)
    return command


def _patterns(topics, groups, transactional_ids, cluster, pattern):
    from ..security.acl import CLUSTER_NAME, PatternType, ResourcePattern, ResourceType
    kind = PatternType[pattern.upper()]
    found = [ResourcePattern(ResourceType.TOPIC, name, kind) for name in topics]
    found += [ResourcePattern(ResourceType.GROUP, name, kind) for name in groups]
    found += [ResourcePattern(ResourceType.TRANSACTIONAL_ID, name, kind)
              for name in transactional_ids]
    if cluster:
        found.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return found


def _bindings(topics, groups, transactional_ids, cluster, pattern, allow, deny, hosts,
              operations, producer, consumer):
    from ..security.acl import (AclBinding, AclEntry, AclOperation, AclPermission,
                                ResourceType, operation_from_name)
    patterns = _patterns(topics, groups, transactional_ids, cluster, pattern)
    if not patterns:
        raise Failure("name a resource: --topic, --group, --transactional-id or --cluster")
    if not allow and not deny:
        raise Failure("name who: --allow-principal User:NAME or --deny-principal User:NAME")
    if not operations and not producer and not consumer:
        raise Failure("name what: --operation (e.g. Read), --producer or --consumer")
    if (producer or consumer) and deny:
        raise Failure("--producer and --consumer only allow: use --allow-principal")
    per_type: dict[ResourceType, set[AclOperation]] = {}
    given = {operation_from_name(op) for op in operations}
    for resource_type in {p.resource_type for p in patterns}:
        per_type[resource_type] = set(given)
    if producer:
        per_type.get(ResourceType.TOPIC, set()).update(
            {AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE})
        per_type.get(ResourceType.TRANSACTIONAL_ID, set()).update(
            {AclOperation.WRITE, AclOperation.DESCRIBE})
    if consumer:
        per_type.get(ResourceType.TOPIC, set()).update({AclOperation.READ,
                                                         AclOperation.DESCRIBE})
        per_type.get(ResourceType.GROUP, set()).update({AclOperation.READ})
    bindings = []
    for resource in patterns:
        for permission, principals in ((AclPermission.ALLOW, allow), (AclPermission.DENY, deny)):
            for principal in principals:
                for host in hosts or ("*",):
                    for operation in sorted(per_type[resource.resource_type]):
                        binding = AclBinding(resource, AclEntry(principal, host, operation,
                                                                permission))
                        reason = binding.invalid_reason()
                        if reason is not None:
                            raise Failure(reason)
                        bindings.append(binding)
    if not bindings:
        raise Failure("--producer and --consumer apply to topics, groups and transactional ids")
    return bindings


def _show(binding) -> str:
    from ..security.acl import operation_name, type_name
    pattern, entry = binding.pattern, binding.entry
    return (f"{type_name(pattern.resource_type)}\t{pattern.name}\t"
            f"{pattern.pattern_type.name.lower()}\t{entry.principal}\t{entry.host}\t"
            f"{operation_name(entry.operation)}\t{entry.permission.name.capitalize()}")


HEADER = "RESOURCE\tNAME\tPATTERN\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION"


def _binding_options(command):
    """The options ``add`` and ``remove`` share: what to change, and the store."""
    return _resource_options(_entry_options(_store_options(command)))


@acls.command("add")
@_binding_options
def acls_add(data_dir, zookeeper, **chosen) -> None:
    """Add ACLs: each principal, host and operation on each resource named."""
    _show_all(_change(_bindings(**chosen), data_dir, zookeeper, adding=True))


def _change(bindings, data_dir, zookeeper, adding: bool) -> list:
    """Add (or remove) ``bindings``, one atomic change per resource pattern; the bindings
    added (or those removed: the ones that were there)."""
    changed = []
    with _Store(data_dir, zookeeper) as store:
        for resource in {b.pattern for b in bindings}:
            wanted = frozenset(b.entry for b in bindings if b.pattern == resource)
            held: set = set()

            def change(current, wanted=wanted, held=held):
                held.clear()
                held.update(wanted if adding else current & wanted)
                return current | wanted if adding else current - wanted

            store.update_acls(resource, change)
            changed += [b for b in bindings if b.pattern == resource and b.entry in held]
    return changed


def _show_all(bindings) -> None:
    click.echo(HEADER)
    for binding in sorted(bindings):
        click.echo(_show(binding))


@acls.command("list")
@click.option("--topic", "topics", multiple=True, metavar="NAME")
@click.option("--group", "groups", multiple=True, metavar="NAME")
@click.option("--transactional-id", "transactional_ids", multiple=True, metavar="ID")
@click.option("--cluster", is_flag=True)
@click.option("--principal", metavar="TYPE:NAME", help="Only this principal's ACLs.")
@_store_options
def acls_list(topics, groups, transactional_ids, cluster, principal, data_dir,
              zookeeper) -> None:
    """Every ACL, or those on the resources named (every pattern that applies to them, as
    kafka-acls --list --resource-pattern-type match)."""
    from ..security.acl import AclFilter, PatternType
    patterns = _patterns(topics, groups, transactional_ids, cluster, "literal")
    filters = [AclFilter(p.resource_type, p.name, PatternType.MATCH, principal)
               for p in patterns] or [AclFilter(principal=principal)]
    with _Store(data_dir, zookeeper) as store:
        found = store.acls()
    _show_all(b for b in found if any(f.matches(b) for f in filters))


@acls.command("remove")
@_binding_options
def acls_remove(data_dir, zookeeper, **chosen) -> None:
    """Remove the ACLs ``add`` with the same options would add."""
    removed = _change(_bindings(**chosen), data_dir, zookeeper, adding=False)
    if not removed:
        raise Failure("no such ACL")
    _show_all(removed)
