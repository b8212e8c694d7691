"""WriteTxnMarkers (API key 27), versions 0-1: a transaction coordinator on another broker
asks this one, the leader of some of the transaction's partitions, to write their markers.

Behaviour: per partition, append the COMMIT or ABORT control batch for the producer (with
the coordinator's epoch), wait until the ISR has it, and - for ``__consumer_offsets`` - let
the group coordinator apply or drop the transaction's offsets; each partition answers with
its own code (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH for
a marker older than the producer's epoch here, ...), which the coordinator retries.
Version notes: v1 flexible.
"""

from __future__ import annotations

import asyncio

from ...coordinator.transaction.markers import write_marker_locally
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.WRITE_TXN_MARKERS
VERSIONS = range(0, 2)

Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = Result.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    if not ctx.allowed(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    results = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            codes = await asyncio.gather(*(
                write_marker_locally(ctx.services.partitions, ctx.services.group_coordinator,
                                     topic.name, index, marker.producer_id,
                                     marker.producer_epoch, bool(marker.transaction_result),
                                     marker.coordinator_epoch)
                for index in topic.partition_indexes))
            topics.append(TopicResult(name=topic.name, partitions=[
                PartitionResult(partition_index=index, error_code=code)
                for index, code in zip(topic.partition_indexes, codes)]))
        results.append(Result(producer_id=marker.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=results)


def error_response(request: WriteTxnMarkersRequest, code: ErrorCode, message: str | None
                  ) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(markers=[
        Result(producer_id=marker.producer_id, topics=[
            TopicResult(name=topic.name, partitions=[
                PartitionResult(partition_index=index, error_code=code)
                for index in topic.partition_indexes])
            for topic in marker.topics])
        for marker in request.markers])
