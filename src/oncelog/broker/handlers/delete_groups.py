"""DeleteGroups (API key 42), versions 0-2.

Behaviour: per group, an Empty group is deleted with all its committed offsets (tombstones
in ``__consumer_offsets``); a group with members gets NON_EMPTY_GROUP, an unknown one
GROUP_ID_NOT_FOUND.
Version notes: v2 flexible.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.DELETE_GROUPS
VERSIONS = range(0, 3)

Result = DeleteGroupsResponse.DeletableGroupResult


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    allowed = [g for g in request.groups_names
               if ctx.allowed(AclOperation.DELETE, ResourceType.GROUP, g)]
    results = ctx.services.group_coordinator.delete_groups(allowed)
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        Result(group_id=group_id, error_code=results.get(
            group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        for group_id in dict.fromkeys(request.groups_names)])


def error_response(request: DeleteGroupsRequest, code: ErrorCode, message: str | None
                  ) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        Result(group_id=group_id, error_code=code) for group_id in request.groups_names])
