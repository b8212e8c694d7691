"""Heartbeat (API key 12), versions 0-4.

Behaviour: a member proves it is alive; its session deadline moves to now +
``session_timeout_ms``. REBALANCE_IN_PROGRESS tells a member of a rebalancing group to
rejoin; ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and FENCED_INSTANCE_ID tell it it is no longer
(or never was) that member.
Version notes: v3 adds group_instance_id; v4 flexible.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import HeartbeatRequest, HeartbeatResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.HEARTBEAT
VERSIONS = range(0, 5)


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    instance_id = request.group_instance_id if ctx.api_version >= 3 else None
    error = ctx.services.group_coordinator.heartbeat(request.group_id, request.member_id,
                                                   instance_id, request.generation_id)
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


def error_response(request: HeartbeatRequest, code: ErrorCode, message: str | None
                  ) -> HeartbeatResponse:
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)
