"""OffsetCommit (API key 8), versions 2-9.

Behaviour: per partition, the committed offset, leader epoch and metadata are written to
``__consumer_offsets`` (one batch per request) and become what OffsetFetch returns; the
metadata string round-trips unchanged (null is stored as "", as Kafka does). Members commit
with their generation (ILLEGAL_GENERATION when stale, UNKNOWN_MEMBER_ID when not a member,
REBALANCE_IN_PROGRESS before their assignment); anyone may commit to a group without members
with generation -1. Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION,
OFFSET_METADATA_TOO_LARGE (``offset.metadata.max.bytes``). With ``log.flush.policy=ack``
the response waits for the fsync of that partition of ``__consumer_offsets``.
Version notes: v2-v4 carry retention_time_ms, accepted and ignored (offsets are kept until
deleted); v6 adds the leader epoch; v7 group_instance_id; v8 flexible; v9 is v8 for classic
groups, except that a generation of a group that does not exist is GROUP_ID_NOT_FOUND
(ILLEGAL_GENERATION before v9), as in Kafka. v10 names topics by id and is not served.
"""

from __future__ import annotations

from collections.abc import Callable

from ...coordinator.group import OffsetAndMetadata
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import OffsetCommitRequest, OffsetCommitResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.OFFSET_COMMIT
VERSIONS = range(2, 10)

TopicResult = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResult = TopicResult.OffsetCommitResponsePartition


async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    version = ctx.api_version
    coordinator = ctx.services.group_coordinator
    results: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for topic in request.topics:
        readable = ctx.allowed(AclOperation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if not readable:
                results[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not _exists(ctx, topic.name, p.partition_index):
                results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[key] = OffsetAndMetadata(
                p.committed_offset, p.committed_leader_epoch if version >= 6 else -1,
                p.committed_metadata or "")
    results.update(coordinator.commit_offsets(
        request.group_id, request.member_id,
        request.group_instance_id if version >= 7 else None,
        request.generation_id_or_member_epoch, offsets,
        ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION))
    if ErrorCode.NONE in results.values():
        index = coordinator.partition_for(request.group_id)
        try:
            # Answer once every in-sync replica has the commit (acks=all, as Kafka's
            # coordinator writes), so a coordinator failover cannot lose it.
            code = await ctx.services.offsets_topic.wait_for_replication(
                index, ctx.services.config["offsets.commit.timeout.ms"])
            if code is ErrorCode.NONE and ctx.services.config["log.flush.policy"] == "ack":
                await ctx.services.offsets_topic.wait_for_flush(index, ctx.services.flusher)
        except KafkaError:
            code = ErrorCode.NOT_COORDINATOR
        if code is not ErrorCode.NONE:
            results = {k: (code if c is ErrorCode.NONE else c) for k, c in results.items()}
    return _response(request, lambda topic, partition: results[(topic, partition)])


def _exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    found = ctx.services.partitions.topics.get(topic)
    return found is not None and 0 <= partition < found.partition_count


def _response(request: OffsetCommitRequest, code_of: Callable[[str, int], ErrorCode]
              ) -> OffsetCommitResponse:
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        TopicResult(name=t.name, partitions=[
            PartitionResult(partition_index=p.partition_index,
                            error_code=code_of(t.name, p.partition_index))
            for p in t.partitions])
        for t in request.topics])


def error_response(request: OffsetCommitRequest, code: ErrorCode, message: str | None
                  ) -> OffsetCommitResponse:
    return _response(request, lambda topic, partition: code)
