"""JoinGroup (API key 11), versions 0-9.

Behaviour: the member joins (or rejoins) its group through the group coordinator, which may
hold the response until the rebalance completes; this handler awaits it without blocking
anyone else (Kafka's delayed join). Errors: INVALID_GROUP_ID, NOT_COORDINATOR,
INVALID_SESSION_TIMEOUT (outside ``group.min/max.session.timeout.ms``),
INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, MEMBER_ID_REQUIRED.
Version notes: v0 has no rebalance timeout (the session timeout serves); v4+ a member
without an id first gets MEMBER_ID_REQUIRED and its id (KIP-394); v5 adds
group_instance_id (static membership, KIP-345); v6 flexible; v7 returns the protocol type and
a nullable protocol name; v8 carries a reason (logged); v9 tells a returning static leader to
skip the assignment (KIP-814).
"""

from __future__ import annotations

import asyncio

from ...coordinator.group import JoinGroupParams, JoinResult
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import JoinGroupRequest, JoinGroupResponse, as_bytes
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.JOIN_GROUP
VERSIONS = range(0, 10)

Member = JoinGroupResponse.JoinGroupResponseMember


async def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, request.group_id):
        refused = error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
        if ctx.api_version >= 7:
            refused.protocol_name = None  # nullable from v7 on: Kafka's refusal has none
        return refused
    version = ctx.api_version
    instance_id = request.group_instance_id if version >= 5 else None
    rebalance_timeout_ms = request.rebalance_timeout_ms if version >= 1 else -1
    if rebalance_timeout_ms < 0:
        rebalance_timeout_ms = request.session_timeout_ms
    params = JoinGroupParams(
        group_id=request.group_id, member_id=request.member_id, group_instance_id=instance_id,
        client_id=ctx.client_id or "", client_host=client_host(ctx),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=request.protocol_type,
        protocols=[(p.name, as_bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=version >= 4 and instance_id is None,
        supports_skip_assignment=version >= 9,
        reason=request.reason if version >= 8 else None)
    answered: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()

    def respond(result: JoinResult) -> None:
        if not answered.done():  # a client that went away leaves a cancelled future
            answered.set_result(result)

    ctx.services.group_coordinator.join_group(params, respond)
    result = await answered
    if result.error == ErrorCode.NONE:
        code = await ctx.services.wait_for_group_records(request.group_id)
        if code != ErrorCode.NONE:
            return error_response(request, code, None)
    return _response(result, version)


def client_host(ctx: RequestContext) -> str:
    """The client's address as Kafka reports it ("/127.0.0.1")."""
    return "/" + ctx.client_address.rsplit(":", 1)[0]


def _response(result: JoinResult, version: int) -> JoinGroupResponse:
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""  # nullable from v7 on
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
        protocol_type=result.protocol_type, protocol_name=protocol_name,
        leader=result.leader_id, skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[Member(member_id=m.member_id, group_instance_id=m.group_instance_id,
                        metadata=m.metadata) for m in result.members])


def error_response(request: JoinGroupRequest, code: ErrorCode, message: str | None
                  ) -> JoinGroupResponse:
    return JoinGroupResponse(throttle_time_ms=0, error_code=code, generation_id=-1,
                             protocol_type=None, protocol_name="", leader="",
                             skip_assignment=False, member_id=request.member_id or "",
                             members=[])
