"""CreateAcls (API key 30), versions 1-3.

Behaviour: each creation stored, or failed alone (``broker.acls``: INVALID_REQUEST with the
reason for a binding Kafka would refuse); ALTER on the cluster is required
(CLUSTER_AUTHORIZATION_FAILED for every creation); without an authorizer, SECURITY_DISABLED
"No Authorizer is configured.", as Kafka.
Version notes: v1 adds the pattern type; v2 flexible.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import CreateAclsRequest, CreateAclsResponse
from ...security.acl import AclOperation
from ..acls import api_refusal, binding_from_wire
from ..context import RequestContext

API_KEY = ApiKey.CREATE_ACLS
VERSIONS = range(1, 4)

Result = CreateAclsResponse.AclCreationResult


async def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    refused = api_refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        return error_response(request, *refused)
    bindings = [binding_from_wire(c.resource_type, c.resource_name, c.resource_pattern_type,
                                  c.principal, c.host, c.operation, c.permission_type)
                for c in request.creations]
    results = await ctx.services.acls.create(bindings)
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=code, error_message=message) for code, message in results])


def error_response(request: CreateAclsRequest, code: ErrorCode, message: str | None
                   ) -> CreateAclsResponse:
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=code, error_message=message) for _ in request.creations])
