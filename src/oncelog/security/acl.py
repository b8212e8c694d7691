"""ACLs and the authorizer that applies them, with Kafka's model and rules.

An ACL binds a *resource pattern* (a resource type, a name and a pattern type: LITERAL - the
name exactly, or every name when it is ``*`` - or PREFIXED - every name that starts with it)
to an *entry*: a principal (``User:alice``, or ``User:*`` for everyone), a host (an address,
or ``*``), an operation and a permission (ALLOW or DENY). The codes are Kafka's (its
``ResourceType``, ``AclOperation``, ``AclPermissionType`` and ``PatternType``), on the wire and
in the store alike.

``Authorizer.authorize`` decides as Kafka's authorizers (``AclAuthorizer`` on ZooKeeper,
``StandardAuthorizer`` on KRaft) do:

1. a super user (``super.users``) may do everything;
2. the ACLs that apply are those on the literal name, on the literal ``*`` and on every prefix
   of the name, for the resource type;
3. none at all (for anyone): allowed only with ``allow.everyone.if.no.acl.found=true``;
4. a DENY entry matching the principal (or ``User:*``), the host (or ``*``) and the operation
   (or ALL) denies, whatever allows it;
5. else an ALLOW entry matching the same way allows, where READ, WRITE, DELETE and ALTER each
   imply DESCRIBE and ALTER_CONFIGS implies DESCRIBE_CONFIGS (a DENY implies nothing).

``authorize_any`` is Kafka's ``authorizeByResourceType`` (may the principal do ``operation`` on
*some* resource of a type: an idempotent producer needs WRITE on some topic). Without an
authorizer configured every check passes (``ALLOW_ALL``), as in Kafka, and KIP-430's
authorized operations are then every operation the resource type supports.

Denials the client asked for are logged once per principal, operation and resource per
interval (Kafka logs every one at INFO in ``kafka.authorizer.logger``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum

log = logging.getLogger("oncelog.authorizer")

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name, as Kafka's
WILDCARD = "*"  # a literal resource name or host that matches every one
WILDCARD_PRINCIPAL = "User:*"
# Kafka's two authorizer classes; either switches oncelog's on
AUTHORIZER_CLASSES = ("kafka.security.authorizer.AclAuthorizer",
                      "org.apache.kafka.metadata.authorizer.StandardAuthorizer")


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


# the operations each resource type supports (Kafka's AclEntry.supportedOperations): what
# KIP-430's authorized operations are chosen from
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}

_IMPLIED_BY: dict[AclOperation, tuple[AclOperation, ...]] = {
    AclOperation.DESCRIBE: (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                            AclOperation.DELETE, AclOperation.ALTER),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
}

# Kafka's names in kafka-acls' output and in its ZooKeeper documents
_TYPE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group",
               ResourceType.CLUSTER: "Cluster", ResourceType.TRANSACTIONAL_ID: "TransactionalId",
               ResourceType.DELEGATION_TOKEN: "DelegationToken", ResourceType.USER: "User"}
_OPERATION_NAMES = {op: "".join(part.capitalize() for part in op.name.split("_"))
                    for op in AclOperation if op > AclOperation.ANY}


def type_name(resource_type: ResourceType) -> str:
    return _TYPE_NAMES.get(resource_type, resource_type.name.capitalize())


def type_from_name(name: str) -> ResourceType:
    """``Topic``/``topic``/``TOPIC``/``transactional-id``... -> the type; ValueError if none."""
    wanted = name.replace("-", "").replace("_", "").lower()
    for resource_type, kafka_name in _TYPE_NAMES.items():
        if kafka_name.lower() == wanted:
            return resource_type
    raise ValueError(f"unknown resource type {name!r}")


def operation_name(operation: AclOperation) -> str:
    return _OPERATION_NAMES.get(operation, operation.name)


def operation_from_name(name: str) -> AclOperation:
    wanted = name.replace("-", "").replace("_", "").lower()
    for operation, kafka_name in _OPERATION_NAMES.items():
        if kafka_name.lower() == wanted:
            return operation
    raise ValueError(f"unknown operation {name!r}")


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def matches_name(self, name: str) -> bool:
        if self.pattern_type is PatternType.LITERAL:
            return self.name == name or self.name == WILDCARD
        return self.pattern_type is PatternType.PREFIXED and name.startswith(self.name)

    def __str__(self) -> str:
        return f"{type_name(self.resource_type)}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True, order=True)
class AclEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission

    def to_json(self) -> dict[str, str]:
        """As Kafka writes an entry in ZooKeeper."""
        return {"principal": self.principal, "host": self.host,
                "operation": operation_name(self.operation),
                "permissionType": self.permission.name.capitalize()}

    @classmethod
    def from_json(cls, document: dict[str, str]) -> AclEntry:
        return cls(document["principal"], document["host"],
                   operation_from_name(document["operation"]),
                   AclPermission[document["permissionType"].upper()])


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AclEntry

    def filter_only(self) -> str | None:
        """A filter's value where a binding needs a definite one (a resource type ANY, a
        pattern type ANY or MATCH, an operation or permission ANY): Kafka cannot even make
        such a binding, and fails the whole CreateAcls (UNKNOWN_SERVER_ERROR); else None."""
        pattern, entry = self.pattern, self.entry
        if pattern.resource_type is ResourceType.ANY:
            return "resourceType must not be ANY"
        if pattern.pattern_type in (PatternType.ANY, PatternType.MATCH):
            return f"patternType must not be {pattern.pattern_type.name}"
        if entry.operation is AclOperation.ANY:
            return "operation must not be ANY"
        if entry.permission is AclPermission.ANY:
            return "permissionType must not be ANY"
        return None

    def invalid_reason(self) -> str | None:
        """Why a CreateAcls may not store this binding (Kafka's checks, each failing the
        binding alone), or None."""
        pattern, entry = self.pattern, self.entry
        if self.filter_only() is not None:
            return self.filter_only()
        if (pattern.resource_type is ResourceType.UNKNOWN
                or pattern.pattern_type is PatternType.UNKNOWN
                or entry.operation is AclOperation.UNKNOWN
                or entry.permission is AclPermission.UNKNOWN):
            return "ACL binding contains unknown elements"
        if not pattern.name:
            return "Invalid empty resource name specified"
        if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        principal_type, _, principal_name = entry.principal.partition(":")
        if not principal_type or not principal_name:
            return (f"Could not parse principal {entry.principal!r}: expected TYPE:NAME, "
                    "e.g. User:alice")
        return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls' and DeleteAcls' filter: None for a name, principal or host matches any;
    ANY for a code matches any; the pattern type MATCH matches every pattern that applies to
    the name (the literal name, the literal ``*`` and the prefixes of the name)."""
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermission = AclPermission.ANY

    def invalid_reason(self) -> str | None:
        if self.resource_type is ResourceType.UNKNOWN:
            return "the filter's resource type is UNKNOWN"
        if self.pattern_type is PatternType.UNKNOWN:
            return "the filter's pattern type is UNKNOWN"
        if self.operation is AclOperation.UNKNOWN:
            return "the filter's operation is UNKNOWN"
        if self.permission is AclPermission.UNKNOWN:
            return "the filter's permission type is UNKNOWN"
        return None

    def matches(self, binding: AclBinding) -> bool:
        pattern, entry = binding.pattern, binding.entry
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type is PatternType.MATCH:
            if self.name is not None and not pattern.matches_name(self.name):
                return False
        else:
            if self.pattern_type not in (PatternType.ANY, pattern.pattern_type):
                return False
            if self.name is not None and self.name != pattern.name:
                return False
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission in (AclPermission.ANY, entry.permission))


class Authorizer:
    """The ACLs in force on this broker (a copy of the store's, replaced whole when they
    change) and Kafka's decision rules over them. ``enabled`` is False for ``ALLOW_ALL``."""

    enabled = True

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False,
                 log_interval_s: float = 60.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.log_interval_s = log_interval_s
        self.monotonic = monotonic
        self._by_pattern: dict[ResourcePattern, frozenset[AclEntry]] = {}
        # the same, by (type, name) per pattern type: a check looks up the literal name, the
        # literal "*" and each prefix of the name - never every ACL
        self._literal: dict[tuple[ResourceType, str], frozenset[AclEntry]] = {}
        self._prefixed: dict[tuple[ResourceType, str], frozenset[AclEntry]] = {}
        self._logged: dict[tuple[str, AclOperation, ResourceType, str], float] = {}

    # -- the ACLs --------------------------------------------------------------------------

    def replace(self, bindings: Iterable[AclBinding]) -> None:
        by_pattern: dict[ResourcePattern, set[AclEntry]] = {}
        for binding in bindings:
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        self._by_pattern = {p: frozenset(entries) for p, entries in by_pattern.items()}
        self._index()

    def set_entries(self, pattern: ResourcePattern, entries: frozenset[AclEntry]) -> None:
        """One pattern's entries as the store now holds them (none: the pattern is gone)."""
        by_pattern = dict(self._by_pattern)
        if entries:
            by_pattern[pattern] = entries
        else:
            by_pattern.pop(pattern, None)
        self._by_pattern = by_pattern
        self._index()

    def _index(self) -> None:
        self._literal = {(p.resource_type, p.name): entries
                         for p, entries in self._by_pattern.items()
                         if p.pattern_type is PatternType.LITERAL}
        self._prefixed = {(p.resource_type, p.name): entries
                          for p, entries in self._by_pattern.items()
                          if p.pattern_type is PatternType.PREFIXED}

    def bindings(self, acl_filter: AclFilter = AclFilter()) -> list[AclBinding]:
        found = [AclBinding(pattern, entry) for pattern, entries in self._by_pattern.items()
                 for entry in entries]
        return sorted(b for b in found if acl_filter.matches(b))

    # -- decisions -------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str, *, log_denial: bool = True) -> bool:
        if principal in self.super_users:
            return True
        entries = self._entries_for(resource_type, name)
        if not entries:
            allowed = self.allow_if_no_acl
        elif any(_applies(e, principal, host, (operation,), AclPermission.DENY)
                 for e in entries):
            allowed = False
        else:
            implied = _IMPLIED_BY.get(operation, (operation,))
            allowed = any(_applies(e, principal, host, implied, AclPermission.ALLOW)
                          for e in entries)
        if not allowed and log_denial:
            self._log_denial(principal, host, operation, resource_type, name)
        return allowed

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Kafka's ``authorizeByResourceType``: allowed on at least one resource of the
        type - an ALLOW on some literal name or prefix not wholly cancelled by a DENY (a
        DENY on the literal ``*`` cancels everything)."""
        if principal in self.super_users:
            return True

        def matching(permission: AclPermission, pattern_type: PatternType) -> set[str]:
            return {p.name for p, entries in self._by_pattern.items()
                    if p.resource_type is resource_type and p.pattern_type is pattern_type
                    and any(_applies(e, principal, host, (operation,), permission)
                            for e in entries)}

        deny_literals = matching(AclPermission.DENY, PatternType.LITERAL)
        if WILDCARD in deny_literals:
            return False
        if self.allow_if_no_acl:
            return True
        deny_prefixes = matching(AclPermission.DENY, PatternType.PREFIXED)

        def denied_by_prefix(name: str) -> bool:
            return any(name[:length] in deny_prefixes for length in range(len(name) + 1))

        if any(not denied_by_prefix(prefix)
               for prefix in matching(AclPermission.ALLOW, PatternType.PREFIXED)):
            return True
        return any(literal == WILDCARD or (literal not in deny_literals
                                           and not denied_by_prefix(literal))
                   for literal in matching(AclPermission.ALLOW, PatternType.LITERAL))

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              name: str) -> set[int]:
        """KIP-430: the codes of the operations allowed on the resource."""
        return {int(op) for op in SUPPORTED_OPERATIONS.get(resource_type, ())
                if self.authorize(principal, host, op, resource_type, name, log_denial=False)}

    def _entries_for(self, resource_type: ResourceType, name: str) -> list[AclEntry]:
        found: list[AclEntry] = []
        for literal in {name, WILDCARD}:
            found.extend(self._literal.get((resource_type, literal), ()))
        if self._prefixed:
            for length in range(1, len(name) + 1):
                found.extend(self._prefixed.get((resource_type, name[:length]), ()))
        return found

    def _log_denial(self, principal: str, host: str, operation: AclOperation,
                    resource_type: ResourceType, name: str) -> None:
        key = (principal, operation, resource_type, name)
        now = self.monotonic()
        if now - self._logged.get(key, -self.log_interval_s) < self.log_interval_s:
            return
        if len(self._logged) > 10_000:
            self._logged = {k: t for k, t in self._logged.items()
                            if now - t < self.log_interval_s}
        self._logged[key] = now
        log.info("Principal = %s is Denied Operation = %s from host = %s on resource = "
                 "%s:LITERAL:%s", principal, operation_name(operation), host,
                 type_name(resource_type), name)


def _applies(entry: AclEntry, principal: str, host: str, operations: tuple[AclOperation, ...],
             permission: AclPermission) -> bool:
    return (entry.permission is permission
            and (entry.principal == principal or entry.principal == WILDCARD_PRINCIPAL)
            and (entry.host == host or entry.host == WILDCARD)
            and (entry.operation in operations or entry.operation is AclOperation.ALL))


class AllowAll(Authorizer):
    """No authorizer configured: everything is allowed, as in Kafka."""

    enabled = False

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str, *, log_denial: bool = True) -> bool:
        return True

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        return True


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:broker``)."""
    users = frozenset(part.strip() for part in value.split(";") if part.strip())
    for user in users:
        kind, _, name = user.partition(":")
        if not kind or not name:
            raise ValueError(f"super.users: {user!r} is not a principal (TYPE:NAME, e.g. "
                             "User:admin)")
    return users
