"""DescribeProducers (API key 61), version 0.

Behaviour: for each requested partition, the producers whose idempotence state it keeps:
producer id, epoch, last sequence, the timestamp of its last batch, the epoch of the
coordinator that wrote its last transaction marker here (-1: none) and the first offset of
its transaction open here (-1: none). Unknown topics or partitions get
UNKNOWN_TOPIC_OR_PARTITION for that partition only.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import DescribeProducersRequest, DescribeProducersResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.DESCRIBE_PRODUCERS
VERSIONS = range(0, 1)

TopicResult = DescribeProducersResponse.TopicResponse
PartitionResult = TopicResult.PartitionResponse
ProducerState = PartitionResult.ProducerState


async def handle(ctx: RequestContext, request: DescribeProducersRequest
                ) -> DescribeProducersResponse:
    topics = []
    for topic in request.topics:
        results = []
        if not ctx.allowed(AclOperation.READ, ResourceType.TOPIC, topic.name):
            topics.append(TopicResult(name=topic.name, partitions=[
                _result(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, [])
                for index in topic.partition_indexes]))
            continue
        for index in topic.partition_indexes:
            try:
                partition = ctx.services.partitions.get_partition(topic.name, index)
            except KafkaError as error:
                results.append(_result(index, error.code, error.message, []))
                continue
            producers = [ProducerState(producer_id=entry.producer_id,
                                       producer_epoch=entry.producer_epoch,
                                       last_sequence=entry.last_sequence,
                                       last_timestamp=entry.last_timestamp,
                                       coordinator_epoch=entry.coordinator_epoch,
                                       current_txn_start_offset=(
                                           -1 if entry.current_txn_first_offset is None
                                           else entry.current_txn_first_offset))
                         for entry in partition.producer_state.producers.values()]
            results.append(_result(index, ErrorCode.NONE, None, producers))
        topics.append(TopicResult(name=topic.name, partitions=results))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def _result(index: int, code: ErrorCode, message: str | None,
            producers: list[PartitionResult.ProducerState]) -> PartitionResult:
    return PartitionResult(partition_index=index, error_code=code, error_message=message,
                           active_producers=producers)


def error_response(request: DescribeProducersRequest, code: ErrorCode, message: str | None
                  ) -> DescribeProducersResponse:
    return DescribeProducersResponse(throttle_time_ms=0, topics=[
        TopicResult(name=t.name, partitions=[_result(i, code, message, [])
                                             for i in t.partition_indexes])
        for t in request.topics])
