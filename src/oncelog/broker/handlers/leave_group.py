"""LeaveGroup (API key 13), versions 0-5.

Behaviour: members leave at once instead of waiting for their session to time out, and the
group rebalances. A member named only by its group_instance_id (member id "") is removed as
an administrator would (KIP-345). Per-member errors: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID.
Version notes: v0-2 name one member and report its error as the response's; v3 (KIP-345)
takes a batch of members with per-member results; v4 flexible; v5 carries a reason (logged).
"""

from __future__ import annotations

from ...coordinator.group import LeavingMember
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import LeaveGroupRequest, LeaveGroupResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.LEAVE_GROUP
VERSIONS = range(0, 6)

MemberResult = LeaveGroupResponse.MemberResponse


async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    version = ctx.api_version
    if version < 3:
        leaving = [LeavingMember(request.member_id)]
    else:
        leaving = [LeavingMember(m.member_id, m.group_instance_id,
                                 m.reason if version >= 5 else None) for m in request.members]
    error, results = ctx.services.group_coordinator.leave_group(request.group_id, leaving)
    if version < 3:  # one error: the group's, else the member's (Kafka's LeaveGroupResponse)
        error = next((e for e in [error, *results] if e is not ErrorCode.NONE), ErrorCode.NONE)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=[])
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=[
        MemberResult(member_id=m.member_id, group_instance_id=m.group_instance_id,
                     error_code=code) for m, code in zip(leaving, results)])


def error_response(request: LeaveGroupRequest, code: ErrorCode, message: str | None
                  ) -> LeaveGroupResponse:
    return LeaveGroupResponse(throttle_time_ms=0, error_code=code, members=[])
