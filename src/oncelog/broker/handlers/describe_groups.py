"""DescribeGroups (API key 15), versions 0-6.

Behaviour: per group, its state, protocol type and protocol, and its live members (member
id, group instance id, client id and host); once the group is Stable, each member's
subscription metadata and assignment too (Kafka's ``GroupMetadata.summary``). A group that
does not exist is reported as Dead with no error before v6, and GROUP_ID_NOT_FOUND from v6
(KIP-1043). Authorized operations (v3+), when asked for, are those the principal may do
(without an authorizer: READ, DELETE, DESCRIBE); a group it may not DESCRIBE is
GROUP_AUTHORIZATION_FAILED.
Version notes: v4 adds group_instance_id; v5 flexible; v6 error messages.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import DescribeGroupsRequest, DescribeGroupsResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.DESCRIBE_GROUPS
VERSIONS = range(0, 7)

Described = DescribeGroupsResponse.DescribedGroup
DescribedMember = Described.DescribedGroupMember
# INT32_MIN, "not requested": bit 31 of the bit set (the codec writes None so too, but its
# stubs type the field as the set)
NOT_REQUESTED = {31}


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    wanted = ctx.api_version >= 3 and request.include_authorized_operations
    return DescribeGroupsResponse(throttle_time_ms=0, groups=[
        _describe(ctx, group_id, wanted) for group_id in request.groups])


def _describe(ctx: RequestContext, group_id: str, wanted: bool) -> Described:
    if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return _error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    operations = (ctx.authorized_operations(ResourceType.GROUP, group_id) if wanted
                  else NOT_REQUESTED)
    error, summary = ctx.services.group_coordinator.describe_group(group_id)
    if error is not ErrorCode.NONE:
        return _error(group_id, error, None)
    if summary is None:
        if ctx.api_version >= 6:
            return _error(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                          f"group {group_id!r} does not exist")
        return _error(group_id, ErrorCode.NONE, None)
    return Described(
        error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
        group_state=summary.state.value, protocol_type=summary.protocol_type,
        protocol_data=summary.protocol_name, authorized_operations=operations,
        members=[DescribedMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                 client_id=m.client_id, client_host=m.client_host,
                                 member_metadata=m.metadata,
                                 member_assignment=m.assignment)
                 for m in summary.members])


def _error(group_id: str, code: ErrorCode, message: str | None) -> Described:
    return Described(error_code=code, error_message=message, group_id=group_id,
                     group_state="Dead", protocol_type="", protocol_data="", members=[],
                     authorized_operations=NOT_REQUESTED)


def error_response(request: DescribeGroupsRequest, code: ErrorCode, message: str | None
                  ) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(throttle_time_ms=0, groups=[
        _error(group_id, code, message) for group_id in request.groups])
