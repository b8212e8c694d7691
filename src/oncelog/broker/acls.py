"""The ACLs as this broker applies and changes them: CreateAcls (30), DescribeAcls (29) and
DeleteAcls (31) over the metadata store, with Kafka's rules (its ``AclAuthorizer``):

- the authorizer is configured by ``authorizer.class.name`` (either of Kafka's class names;
  empty: none, and the three APIs answer SECURITY_DISABLED "No Authorizer is configured."),
  ``super.users`` and ``allow.everyone.if.no.acl.found``;
- a creation with a filter's value (a resource type ANY, a pattern type ANY or MATCH, an
  operation or permission ANY) fails the whole request with UNKNOWN_SERVER_ERROR, as Kafka
  4 (it cannot build the binding); one that is not valid otherwise (an UNKNOWN code, a
  CLUSTER resource not named ``kafka-cluster``, an empty name, a principal that is not
  TYPE:NAME) fails alone with INVALID_REQUEST; the valid ones are stored, one atomic change
  per resource pattern (compared with Kafka 4.1 in tests/differential);
- a deletion filter removes every stored ACL it matches and returns them; Describe answers
  the ACLs this broker knows that match its filter;
- the store says when another broker (or ``oncelog acls``) changed them: this broker reads
  them all again (``reread``), so a change made anywhere applies everywhere.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, TypeVar

from ..config import BrokerConfig, ConfigError
from ..controller.store import MetadataStore, StoreCalls
from ..protocol.errors import ErrorCode
from ..protocol.messages import DeleteAclsRequest, DescribeAclsRequest
from ..security.acl import (AUTHORIZER_CLASSES, AclBinding, AclEntry, AclFilter, AclOperation,
                            AclPermission, AllowAll, Authorizer, PatternType, ResourcePattern,
                            ResourceType, parse_super_users)

if TYPE_CHECKING:
    from .context import RequestContext

NO_AUTHORIZER = "No Authorizer is configured."

_Code = TypeVar("_Code", bound=IntEnum)

# -- the wire's ACL fields (an unknown code is UNKNOWN, which the APIs refuse, as Kafka's
# fromCode makes it) ------------------------------------------------------------------------


def _code(kind: type[_Code], value: int) -> _Code:
    try:
        return kind(value)
    except ValueError:
        return kind(0)  # UNKNOWN in each of the four


def binding_from_wire(resource_type: int, name: str, pattern_type: int, principal: str,
                      host: str, operation: int, permission: int) -> AclBinding:
    return AclBinding(
        ResourcePattern(_code(ResourceType, resource_type), name, _code(PatternType, pattern_type)),
        AclEntry(principal, host, _code(AclOperation, operation),
                 _code(AclPermission, permission)))


def filter_from_wire(request: DescribeAclsRequest | DeleteAclsRequest.DeleteAclsFilter
               ) -> AclFilter:
    """A DescribeAclsRequest or a DeleteAclsRequest's filter."""
    return AclFilter(_code(ResourceType, request.resource_type_filter),
                     request.resource_name_filter, _code(PatternType, request.pattern_type_filter),
                     request.principal_filter, request.host_filter,
                     _code(AclOperation, request.operation),
                     _code(AclPermission, request.permission_type))



def api_refusal(ctx: RequestContext, operation: AclOperation
                ) -> tuple[ErrorCode, str | None] | None:
    """Why CreateAcls, DescribeAcls or DeleteAcls is not answered: no authorizer
    (SECURITY_DISABLED, Kafka's message), or a principal that may not do ``operation`` on the
    cluster (CLUSTER_AUTHORIZATION_FAILED); None when it is."""
    if not ctx.services.acls.authorizer.enabled:
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    if not ctx.allowed(operation, ResourceType.CLUSTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
    return None


def authorizer_from_config(config: BrokerConfig) -> Authorizer:
    """The authorizer ``authorizer.class.name`` asks for (ALLOW_ALL when it is empty)."""
    name = config["authorizer.class.name"].strip()
    if not name:
        return AllowAll()
    if name not in AUTHORIZER_CLASSES:
        raise ConfigError(f"authorizer.class.name {name} is not served: oncelog's authorizer "
                          f"is switched on by {' or '.join(AUTHORIZER_CLASSES)}")
    try:
        super_users = parse_super_users(config["super.users"])
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return Authorizer(super_users, config["allow.everyone.if.no.acl.found"])


class BrokerAcls:
    def __init__(self, authorizer: Authorizer, store: MetadataStore, calls: StoreCalls) -> None:
        self.authorizer = authorizer
        self.store = store
        self.calls = calls

    async def reread(self) -> None:
        if self.authorizer.enabled:
            self.authorizer.replace(await self.calls(self.store.acls))

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return self.authorizer.bindings(acl_filter)

    async def create(self, bindings: list[AclBinding]
                     ) -> list[tuple[ErrorCode, str | None]]:
        """(error, message) per binding, in order."""
        results: list[tuple[ErrorCode, str | None]] = [(ErrorCode.NONE, None)] * len(bindings)
        refused = next((reason for b in bindings if (reason := b.filter_only()) is not None),
                       None)
        if refused is not None:  # Kafka cannot make the binding: the whole request fails
            return [(ErrorCode.UNKNOWN_SERVER_ERROR, refused)] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for index, binding in enumerate(bindings):
            reason = binding.invalid_reason()
            if reason is not None:
                results[index] = (ErrorCode.INVALID_REQUEST, f"Failed to create ACL: {reason}")
            else:
                by_pattern.setdefault(binding.pattern, []).append(index)
        for pattern, indexes in by_pattern.items():
            added = frozenset(bindings[i].entry for i in indexes)

            def add(current: frozenset[AclEntry], added: frozenset[AclEntry] = added
                    ) -> frozenset[AclEntry]:
                return current | added

            self.authorizer.set_entries(
                pattern, await self.calls(self.store.update_acls, pattern, add))
        return results

    async def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """The ACLs each filter deleted (an ACL matched by several is reported by the
        first)."""
        await self.reread()  # what another broker created counts too
        deleted: list[list[AclBinding]] = [[] for _ in filters]
        claimed: set[AclBinding] = set()
        patterns = {b.pattern for f in filters for b in self.authorizer.bindings(f)}
        for pattern in sorted(patterns):
            gone: set[AclEntry] = set()

            def remove(current: frozenset[AclEntry], pattern: ResourcePattern = pattern,
                       gone: set[AclEntry] = gone) -> frozenset[AclEntry]:
                gone.clear()
                gone.update(e for e in current
                            if any(f.matches(AclBinding(pattern, e)) for f in filters))
                return current - gone

            self.authorizer.set_entries(
                pattern, await self.calls(self.store.update_acls, pattern, remove))
            for entry in sorted(gone):
                binding = AclBinding(pattern, entry)
                for index, acl_filter in enumerate(filters):
                    if binding not in claimed and acl_filter.matches(binding):
                        claimed.add(binding)
                        deleted[index].append(binding)
        return deleted
