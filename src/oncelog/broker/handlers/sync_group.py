"""SyncGroup (API key 14), versions 0-5.

Behaviour: the leader sends the generation's assignment, which the group coordinator stores
in ``__consumer_offsets`` and then hands to every member; followers' responses are held
until then (awaited here, never blocking the event loop). In a stable group, the member's
current assignment comes back at once. Errors: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, NOT_COORDINATOR.
Version notes: v3 adds group_instance_id; v4 flexible; v5 (KIP-559) carries the protocol
type and name, checked against the group's and returned.
"""

from __future__ import annotations

import asyncio

from ...coordinator.group import SyncGroupParams, SyncResult
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import SyncGroupRequest, SyncGroupResponse, as_bytes
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.SYNC_GROUP
VERSIONS = range(0, 6)


async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    version = ctx.api_version
    params = SyncGroupParams(
        group_id=request.group_id, generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
        assignments={a.member_id: as_bytes(a.assignment) for a in request.assignments})
    answered: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()

    def respond(result: SyncResult) -> None:
        if not answered.done():
            answered.set_result(result)

    ctx.services.group_coordinator.sync_group(params, respond)
    result = await answered
    if result.error == ErrorCode.NONE:
        code = await ctx.services.wait_for_group_records(request.group_id)
        if code != ErrorCode.NONE:
            return error_response(request, code, None)
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error,
                             protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)


def error_response(request: SyncGroupRequest, code: ErrorCode, message: str | None
                  ) -> SyncGroupResponse:
    return SyncGroupResponse(throttle_time_ms=0, error_code=code, protocol_type=None,
                             protocol_name=None, assignment=b"")
