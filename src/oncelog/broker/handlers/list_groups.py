"""ListGroups (API key 16), versions 0-5.

Behaviour: every group this broker coordinates — those with members and those that only
hold committed offsets — with its protocol type ("consumer", or "" for offsets committed
without group management), state and type ("classic"; KIP-848 groups do not exist here).
Version notes: v3 flexible; v4 (KIP-518) filters by state and reports it; v5 (KIP-848)
filters by type and reports it. Filters compare case-insensitively, as Kafka's new
coordinator does.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import ListGroupsRequest, ListGroupsResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.LIST_GROUPS
VERSIONS = range(0, 6)

Listed = ListGroupsResponse.ListedGroup


async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    states = set(request.states_filter or []) if ctx.api_version >= 4 else None
    types = set(request.types_filter or []) if ctx.api_version >= 5 else None
    groups = ctx.services.group_coordinator.list_groups(states or None, types or None)
    if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, log_denial=False):
        groups = [g for g in groups if ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP,
                                                   g.group_id, log_denial=False)]
    return ListGroupsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=[
        Listed(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
               group_type=g.group_type) for g in sorted(groups, key=lambda g: g.group_id)])


def error_response(request: ListGroupsRequest, code: ErrorCode, message: str | None
                  ) -> ListGroupsResponse:
    return ListGroupsResponse(throttle_time_ms=0, error_code=code, groups=[])
