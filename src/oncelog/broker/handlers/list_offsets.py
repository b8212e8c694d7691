"""ListOffsets (API key 2), versions 1-8.

Behaviour, per partition:
- ``-2`` EARLIEST and ``-4`` EARLIEST_LOCAL: the log start offset.
- ``-1`` LATEST: the offset after the last readable record - the high watermark, which on a
  single broker is the log end offset (last offset + 1); under ``read_committed`` (v2+) the
  last stable offset: the first offset of the earliest transaction not yet complete and
  replicated, or the HW when there is none. (Not "last batch's base offset + 1".)
- ``-3`` MAX_TIMESTAMP (v7+): the record with the largest timestamp.
- a timestamp >= 0: the first record whose timestamp is >= it, at record precision (batches
  are decoded for this, never on the produce or fetch path); offset -1 if there is none, or
  if it is not below the HW (the LSO under ``read_committed``).
Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION; a stale ``current_leader_epoch`` gets
FENCED_LEADER_EPOCH; a broker that does not lead the partition NOT_LEADER_OR_FOLLOWER. A new
leader whose high watermark has not yet reached the start of its epoch answers anything but
earliest with OFFSET_NOT_AVAILABLE (v5+; LEADER_NOT_AVAILABLE before), both retriable, rather
than an offset lower than one a client may already have seen (KIP-207).
"""

from __future__ import annotations

from ...partition import IsolationLevel
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.LIST_OFFSETS
VERSIONS = range(1, 9)

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4

TopicResult = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResult = TopicResult.ListOffsetsPartitionResponse


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    isolation = IsolationLevel.from_wire(request.isolation_level if ctx.api_version >= 2 else 0)
    topics = [TopicResult(name=t.name, partitions=[_lookup(ctx, t.name, p, isolation)
                                                   for p in t.partitions])
              for t in request.topics]
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _lookup(ctx: RequestContext, topic: str,
            request_partition: ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition,
            isolation: IsolationLevel) -> PartitionResult:
    index = request_partition.partition_index
    try:
        if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        partition = ctx.services.partitions.get_partition(topic, index)
        partition.check_leader_epoch(request_partition.current_leader_epoch)
        partition.check_leader()
        timestamp = request_partition.timestamp
        if timestamp not in (EARLIEST, EARLIEST_LOCAL) and not partition.high_watermark_current:
            raise KafkaError(ErrorCode.OFFSET_NOT_AVAILABLE if ctx.api_version >= 5
                             else ErrorCode.LEADER_NOT_AVAILABLE,
                             f"{partition}: new leader's high watermark "
                             f"{partition.high_watermark} is still catching up")
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            offset, found_timestamp = partition.log_start_offset, -1
        elif timestamp == LATEST:
            offset, found_timestamp = partition.fetch_bound(isolation), -1
        elif timestamp == MAX_TIMESTAMP or timestamp >= 0:
            found = (partition.max_timestamp() if timestamp == MAX_TIMESTAMP
                     else partition.offset_for_timestamp(timestamp))
            bound = partition.fetch_bound(isolation)
            if found is None or found.offset >= bound:
                offset, found_timestamp = -1, -1
            else:
                offset, found_timestamp = found.offset, found.timestamp
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"{partition}: timestamp {timestamp} is not a timestamp or a "
                             "known special value")
    except KafkaError as error:
        return PartitionResult(partition_index=index, error_code=error.code, timestamp=-1,
                               offset=-1, leader_epoch=-1)
    return PartitionResult(partition_index=index, error_code=ErrorCode.NONE,
                           timestamp=found_timestamp, offset=offset,
                           leader_epoch=partition.leader_epoch)


def error_response(request: ListOffsetsRequest, code: ErrorCode, message: str | None
                  ) -> ListOffsetsResponse:
    return ListOffsetsResponse(throttle_time_ms=0, topics=[
        TopicResult(name=t.name, partitions=[
            PartitionResult(partition_index=p.partition_index, error_code=code, timestamp=-1,
                            offset=-1, leader_epoch=-1) for p in t.partitions])
        for t in request.topics])
