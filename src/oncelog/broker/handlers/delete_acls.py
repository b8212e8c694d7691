"""DeleteAcls (API key 31), versions 1-3.

Behaviour: per filter, the stored ACLs it matched, now deleted (``broker.acls``; an ACL two
filters match is reported by the first); ALTER on the cluster is required
(CLUSTER_AUTHORIZATION_FAILED per filter); a filter with an UNKNOWN code closes the
connection, as Kafka's (it cannot build such a request);
without an authorizer, SECURITY_DISABLED "No Authorizer is configured.", as Kafka.
Version notes: v1 adds the pattern type; v2 flexible.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import DeleteAclsRequest, DeleteAclsResponse
from ...security.acl import AclOperation
from ..acls import api_refusal, filter_from_wire
from ..context import RequestContext

API_KEY = ApiKey.DELETE_ACLS
VERSIONS = range(1, 4)

Result = DeleteAclsResponse.DeleteAclsFilterResult
Matching = Result.DeleteAclsMatchingAcl


async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    refused = api_refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        return error_response(request, *refused)
    deleted = await ctx.services.acls.delete([filter_from_wire(f) for f in request.filters])
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        Result(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
            Matching(error_code=ErrorCode.NONE, error_message=None,
                     resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                     pattern_type=b.pattern.pattern_type, principal=b.entry.principal,
                     host=b.entry.host, operation=b.entry.operation,
                     permission_type=b.entry.permission)
            for b in found])
        for found in deleted])


def unreadable(request: DeleteAclsRequest) -> str | None:
    """A filter with an UNKNOWN code: Kafka cannot build the request, and closes the
    connection."""
    return next((reason for f in request.filters
                 if (reason := filter_from_wire(f).invalid_reason()) is not None), None)


def error_response(request: DeleteAclsRequest, code: ErrorCode, message: str | None
                   ) -> DeleteAclsResponse:
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        Result(error_code=code, error_message=message, matching_acls=[])
        for _ in request.filters])
