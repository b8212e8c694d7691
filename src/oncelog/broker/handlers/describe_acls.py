"""DescribeAcls (API key 29), versions 1-3.

Behaviour: the ACLs matching the filter, grouped by resource pattern (``broker.acls``);
DESCRIBE on the cluster is required (CLUSTER_AUTHORIZATION_FAILED); without an authorizer,
SECURITY_DISABLED "No Authorizer is configured.", as Kafka; a filter with an UNKNOWN code
closes the connection, as Kafka's (it cannot build such a request).
Version notes: v1 adds the pattern type (v0, literal only, is gone from Kafka 4); v2
flexible.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import DescribeAclsRequest, DescribeAclsResponse
from ...security.acl import AclBinding, AclOperation, ResourcePattern
from ..acls import api_refusal, filter_from_wire
from ..context import RequestContext

API_KEY = ApiKey.DESCRIBE_ACLS
VERSIONS = range(1, 4)

Resource = DescribeAclsResponse.DescribeAclsResource


async def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    refused = api_refusal(ctx, AclOperation.DESCRIBE)
    if refused is not None:
        return error_response(request, *refused)
    wanted = filter_from_wire(request)
    by_pattern: dict[ResourcePattern, list[AclBinding]] = {}
    for found in ctx.services.acls.describe(wanted):
        by_pattern.setdefault(found.pattern, []).append(found)
    return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                error_message=None, resources=[
        Resource(resource_type=pattern.resource_type, resource_name=pattern.name,
                 pattern_type=pattern.pattern_type, acls=[
                     Resource.AclDescription(principal=b.entry.principal, host=b.entry.host,
                                             operation=b.entry.operation,
                                             permission_type=b.entry.permission)
                     for b in bindings])
        for pattern, bindings in by_pattern.items()])


def unreadable(request: DescribeAclsRequest) -> str | None:
    """A filter with an UNKNOWN code: Kafka cannot build the request, and closes the
    connection."""
    return filter_from_wire(request).invalid_reason()


def error_response(request: DescribeAclsRequest, code: ErrorCode, message: str | None
                   ) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                resources=[])
