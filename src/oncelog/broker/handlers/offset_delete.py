"""OffsetDelete (API key 47), version 0 (KIP-496).

Behaviour: removes a group's committed offsets for the named partitions (tombstones in
``__consumer_offsets``). Allowed in an Empty group; in an active consumer group only for
topics no member subscribes to (others: GROUP_SUBSCRIBED_TO_TOPIC); other active groups get
NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND. Partitions of unknown topics get
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import OffsetDeleteRequest, OffsetDeleteResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.OFFSET_DELETE
VERSIONS = range(0, 1)

TopicResult = OffsetDeleteResponse.OffsetDeleteResponseTopic
PartitionResult = TopicResult.OffsetDeleteResponsePartition


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not ctx.allowed(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    results: dict[tuple[str, int], ErrorCode] = {}
    known = []
    for topic in request.topics:
        found = ctx.services.partitions.topics.get(topic.name)
        readable = ctx.allowed(AclOperation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            if not readable:
                results[(topic.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif found is None or not 0 <= p.partition_index < found.partition_count:
                results[(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append((topic.name, p.partition_index))
    error, deleted = ctx.services.group_coordinator.delete_offsets(request.group_id, known)
    if error is not ErrorCode.NONE:
        return error_response(request, error, None)
    results.update(deleted)
    return OffsetDeleteResponse(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
        TopicResult(name=t.name, partitions=[
            PartitionResult(partition_index=p.partition_index,
                            error_code=results[(t.name, p.partition_index)])
            for p in t.partitions]) for t in request.topics])


def error_response(request: OffsetDeleteRequest, code: ErrorCode, message: str | None
                  ) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[])
