"""OffsetForLeaderEpoch (API key 23), versions 2-4 (KIP-101, KIP-279, KIP-320).

Behaviour, per partition (leader only, NOT_LEADER_OR_FOLLOWER elsewhere): for the requested
``leader_epoch``, the largest epoch we know that is <= it and the offset where that epoch
ended in our log — the start of the next epoch, or our log end offset for the current one;
(-1, -1) when we know no such epoch. ``current_leader_epoch`` fences stale callers
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), as Fetch does.

Who asks: a follower (``replica_id`` >= 0) before fetching from a new leader, to find where
its log diverged and truncate there; a consumer (KIP-320) after a leader change, to check
that its position still exists in the new leader's log.
Version notes: v3 adds ``replica_id``; v4 is the first flexible version.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
VERSIONS = range(2, 5)

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = TopicResult.EpochEndOffset


async def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest
                ) -> OffsetForLeaderEpochResponse:
    topics = []
    follower = ctx.api_version >= 3 and request.replica_id >= 0
    if follower and not ctx.allowed(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    for topic in request.topics:
        results = []
        if not follower and not ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                            topic.topic):
            topics.append(TopicResult(topic=topic.topic, partitions=[
                _result(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in topic.partitions]))
            continue
        for requested in topic.partitions:
            try:
                partition = ctx.services.partitions.get_partition(topic.topic, requested.partition)
                partition.check_leader_epoch(requested.current_leader_epoch)
                partition.check_leader()
                epoch, end_offset = partition.end_offset_for_epoch(requested.leader_epoch)
            except KafkaError as error:
                results.append(_result(requested.partition, error.code))
                continue
            results.append(_result(requested.partition, ErrorCode.NONE, epoch, end_offset))
        topics.append(TopicResult(topic=topic.topic, partitions=results))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def _result(index: int, code: ErrorCode, epoch: int = -1, end_offset: int = -1
            ) -> EpochEndOffset:
    return EpochEndOffset(error_code=code, partition=index, leader_epoch=epoch,
                          end_offset=end_offset)


def error_response(request: OffsetForLeaderEpochRequest, code: ErrorCode, message: str | None
                  ) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[
        TopicResult(topic=t.topic, partitions=[_result(p.partition, code) for p in t.partitions])
        for t in request.topics])
