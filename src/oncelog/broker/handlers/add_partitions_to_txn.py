"""AddPartitionsToTxn (API key 24), versions 0-3 (the client's form).

Behaviour: adds partitions to the producer's transaction at its coordinator, which starts
the transaction (Ongoing) if none was open; the producer may then write to them. Every
partition gets the one outcome: NONE; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE /
CONCURRENT_TRANSACTIONS (the previous transaction is being completed: retry);
PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2) for an older epoch;
INVALID_PRODUCER_ID_MAPPING for a producer id that is not the transactional id's. If any
partition's topic is unknown, those get UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED, and nothing is added (as Kafka answers).
Version notes: v2 knows PRODUCER_FENCED; v3 flexible; v4+ (batched, broker-to-broker
verification of KIP-890) is not served.
"""

from __future__ import annotations

from collections.abc import Callable

from ...coordinator.transaction.metadata import as_client_knows
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from ..context import RequestContext

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = range(0, 4)

TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult


async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest
                ) -> AddPartitionsToTxnResponse:
    wanted = {(topic.name, index) for topic in request.v3_and_below_topics
              for index in topic.partitions}
    unknown = {(topic, index) for topic, index in wanted if not _exists(ctx, topic, index)}
    if unknown:
        return _response(request, lambda p: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if p in unknown
                                             else ErrorCode.OPERATION_NOT_ATTEMPTED))
    try:
        await ctx.services.transaction_coordinator.add_partitions(
            request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, wanted)
    except KafkaError as error:
        code = as_client_knows(error.code, ctx.api_version, 2)
        return _response(request, lambda _: code)
    return _response(request, lambda _: ErrorCode.NONE)


def _exists(ctx: RequestContext, topic: str, index: int) -> bool:
    known = ctx.services.partitions.topics.get(topic)
    return known is not None and 0 <= index < known.partition_count


def _response(request: AddPartitionsToTxnRequest,
              code_for: Callable[[tuple[str, int]], ErrorCode],
              top_level: ErrorCode = ErrorCode.NONE) -> AddPartitionsToTxnResponse:
    # error_code and results_by_transaction exist from v4 on, which only UNSUPPORTED_VERSION
    # answers reach.
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=top_level,
                                      results_by_transaction=[], results_by_topic_v3_and_below=[
        TopicResult(name=topic.name, results_by_partition=[
            PartitionResult(partition_index=index,
                            partition_error_code=code_for((topic.name, index)))
            for index in topic.partitions])
        for topic in request.v3_and_below_topics])


def error_response(request: AddPartitionsToTxnRequest, code: ErrorCode, message: str | None
                  ) -> AddPartitionsToTxnResponse:
    return _response(request, lambda _: code, code)
