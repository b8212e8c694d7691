"""OffsetFetch (API key 9), versions 1-9.

Behaviour: the committed offset, leader epoch and metadata of each requested partition;
-1 and "" where nothing is committed (no error, as in Kafka). A null topic list (v2+) means
every partition the group has committed. Offsets written by a transaction that is still open
(TxnOffsetCommit) are not returned; with require_stable (v7+) such a partition answers
UNSTABLE_OFFSET_COMMIT (retriable) instead of its older committed offset, so a consumer
starting after a crash does not resume from an offset its transaction is about to replace.
Version notes: v1 reports group errors per partition; v2 adds the top-level error and null
topics; v5 the leader epoch; v6 flexible; v7 require_stable; v8 (KIP-709) several groups per
request; v9 adds a member id and epoch, which only KIP-848 groups check. v10 names topics by
id and is not served.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ...coordinator.group import GroupCoordinator, OffsetAndMetadata
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import OffsetFetchRequest, OffsetFetchResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.OFFSET_FETCH
VERSIONS = range(1, 10)

Topic = OffsetFetchResponse.OffsetFetchResponseTopic
Partition = Topic.OffsetFetchResponsePartition
Group = OffsetFetchResponse.OffsetFetchResponseGroup
GroupTopic = Group.OffsetFetchResponseTopics
GroupPartition = GroupTopic.OffsetFetchResponsePartitions


_Offsets = dict[tuple[str, int], OffsetAndMetadata | None]
_Topic = TypeVar("_Topic")


def _requested(topics: list[OffsetFetchRequest.OffsetFetchRequestTopic]
               | list[OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics] | None
               ) -> list[tuple[str, int]] | None:
    if topics is None:
        return None
    return [(t.name, index) for t in topics for index in t.partition_indexes]


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    coordinator = ctx.services.group_coordinator
    stable = ctx.api_version >= 7 and bool(request.require_stable)
    if ctx.api_version >= 8:
        groups = []
        for group in request.groups:
            if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id):
                groups.append(Group(group_id=group.group_id,
                                    error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[]))
                continue
            error, offsets = coordinator.fetch_offsets(group.group_id, _requested(group.topics))
            unstable = _unstable(coordinator, group.group_id, offsets) if stable else set()
            groups.append(Group(group_id=group.group_id, error_code=error, topics=_authorized(
                ctx, _topics(offsets, GroupTopic, GroupPartition, error, unstable),
                group.topics is None)))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id):
        return error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    requested = _requested(request.topics)
    error, offsets = coordinator.fetch_offsets(request.group_id, requested)
    if error is not ErrorCode.NONE:
        return error_response(request, error, None)
    unstable = _unstable(coordinator, request.group_id, offsets) if stable else set()
    return OffsetFetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                               topics=_authorized(ctx, _topics(offsets, Topic, Partition,
                                                               ErrorCode.NONE, unstable),
                                                  request.topics is None))


def _authorized(ctx: RequestContext, topics: list[_Topic], every_topic: bool) -> list[_Topic]:
    """As Kafka: asked for every topic, those the principal may not DESCRIBE are left out;
    asked for by name, they answer TOPIC_AUTHORIZATION_FAILED."""
    kept = []
    for topic in topics:
        name = topic.name  # type: ignore[attr-defined]
        if ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name,
                       log_denial=not every_topic):
            kept.append(topic)
        elif not every_topic:
            for partition in topic.partitions:  # type: ignore[attr-defined]
                partition.committed_offset = -1
                partition.metadata = ""
                partition.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            kept.append(topic)
    return kept


def _unstable(coordinator: GroupCoordinator, group_id: str, offsets: _Offsets
              ) -> set[tuple[str, int]]:
    return {partition for partition in offsets
            if coordinator.has_pending_offsets(group_id, [partition])}


def _topics(offsets: _Offsets, topic_class: Callable[..., _Topic],
            partition_class: Callable[..., object], error: ErrorCode,
            unstable: frozenset[tuple[str, int]] | set[tuple[str, int]] = frozenset()
            ) -> list[_Topic]:
    """The response's topics; the same for both shapes (v1-7 top-level, v8+ per group)."""
    by_topic: dict[str, list[object]] = {}
    for (topic, index), committed in sorted(offsets.items()):
        if (topic, index) in unstable:
            committed = None
        by_topic.setdefault(topic, []).append(partition_class(
            partition_index=index,
            committed_offset=committed.offset if committed else -1,
            committed_leader_epoch=committed.leader_epoch if committed else -1,
            metadata=committed.metadata if committed else "",
            error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT if (topic, index) in unstable
            else error))
    return [topic_class(name=name, partitions=partitions)
            for name, partitions in by_topic.items()]


def error_response(request: OffsetFetchRequest, code: ErrorCode, message: str | None
                  ) -> OffsetFetchResponse:
    """v2+ carry a group-level error (top-level, or per group from v8); v1 only per
    partition, so every requested partition gets it (Kafka's getErrorResponse)."""
    failed: _Offsets = {partition: None for partition in _requested(request.topics) or []}
    return OffsetFetchResponse(throttle_time_ms=0, error_code=code,
                               topics=_topics(failed, Topic, Partition, code),
                               groups=[Group(group_id=g.group_id, error_code=code, topics=[])
                                       for g in request.groups or []])
