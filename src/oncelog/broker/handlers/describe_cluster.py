"""DescribeCluster (API key 60), versions 0-1.

Behaviour: this broker as the only broker and the controller, with the cluster id kept in
``meta.properties``. v1 adds the endpoint type; we answer as a broker endpoint (1).
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import DescribeClusterRequest, DescribeClusterResponse
from ...security.acl import ResourceType
from ..context import RequestContext

API_KEY = ApiKey.DESCRIBE_CLUSTER
VERSIONS = range(0, 2)
# INT32_MIN, "not requested": bit 31 of the bit set (the codec writes None so too, but its
# stubs type the field as the set)
NO_AUTHORIZED_OPERATIONS = {31}


async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    services = ctx.services
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=1,
        cluster_id=services.identity.cluster_id, controller_id=services.brokers.controller_id,
        brokers=[DescribeClusterResponse.DescribeClusterBroker(
            broker_id=b.node_id, host=address[0], port=address[1], rack=b.rack, is_fenced=False)
            for b in sorted(services.brokers.live.values(), key=lambda b: b.node_id)
            if (address := b.endpoint(ctx.listener)) is not None],
        authorized_operations=(ctx.authorized_operations(ResourceType.CLUSTER)
                               if request.include_cluster_authorized_operations
                               else NO_AUTHORIZED_OPERATIONS))


def error_response(request: DescribeClusterRequest, code: ErrorCode, message: str | None
                  ) -> DescribeClusterResponse:
    return DescribeClusterResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                   cluster_id="", brokers=[],
                                   authorized_operations=NO_AUTHORIZED_OPERATIONS)
