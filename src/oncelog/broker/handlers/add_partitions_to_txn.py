"""AddPartitionsToTxn (API key 24), versions 0-3 (the client's form).

Behaviour: adds partitions to the producer's transaction at its coordinator, which starts
the transaction (Ongoing) if none was open; the producer may then write to them. Every
partition gets the one outcome: NONE; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE /
CONCURRENT_TRANSACTIONS (the previous transaction is being completed: retry);
PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2) for an older epoch;
INVALID_PRODUCER_ID_MAPPING for a producer id that is not the transactional id's. If any
partition's topic is unknown, those get UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED, and nothing is added (as Kafka answers).
Version notes: v2 knows PRODUCER_FENCED; v3 flexible. v4 and v5 are the brokers' form
(KIP-890): several transactions per request, each answered on its own; with ``verify_only``
nothing is added, and each partition is answered whether it is in the producer's ongoing
transaction (``TransactionCoordinator.verify_partitions``: NONE or TRANSACTION_ABORTABLE,
which v4 answers as INVALID_TXN_STATE; or one code for the whole transaction:
NOT_COORDINATOR, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS).
Without it, the partitions are added as v3 adds them.
"""

from __future__ import annotations

from collections.abc import Callable

from ...coordinator.transaction.metadata import as_client_knows
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = range(0, 6)

TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult
TransactionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
TransactionTopicResult = TransactionResult.AddPartitionsToTxnTopicResult
TransactionPartitionResult = TransactionTopicResult.AddPartitionsToTxnPartitionResult
Transaction = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction


async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest
                ) -> AddPartitionsToTxnResponse:
    if ctx.api_version >= 4:  # a broker verifying for a producer: the cluster's own action
        if not ctx.allowed(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
            return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                          results_by_transaction=[
            await _transaction(ctx, transaction) for transaction in request.transactions])
    wanted = {(topic.name, index) for topic in request.v3_and_below_topics
              for index in topic.partitions}
    if not ctx.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                       request.v3_and_below_transactional_id):
        return error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
    denied = {(topic, index) for topic, index in wanted
              if not ctx.allowed(AclOperation.WRITE, ResourceType.TOPIC, topic)}
    if denied:
        return _response(request, lambda p: (ErrorCode.TOPIC_AUTHORIZATION_FAILED if p in denied
                                             else ErrorCode.OPERATION_NOT_ATTEMPTED))
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


async def _transaction(ctx: RequestContext, transaction: Transaction) -> TransactionResult:
    """One transaction of a broker's request (v4+)."""
    wanted = [(topic.name, index) for topic in transaction.topics for index in topic.partitions]
    coordinator = ctx.services.transaction_coordinator
    codes: dict[tuple[str, int], ErrorCode]
    if transaction.verify_only:
        codes = coordinator.verify_partitions(transaction.transactional_id,
                                              transaction.producer_id,
                                              transaction.producer_epoch, wanted)
    elif unknown := {p for p in wanted if not _exists(ctx, *p)}:
        codes = {p: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if p in unknown
                     else ErrorCode.OPERATION_NOT_ATTEMPTED) for p in wanted}
    else:
        try:
            await coordinator.add_partitions(transaction.transactional_id,
                                             transaction.producer_id,
                                             transaction.producer_epoch, set(wanted))
            code = ErrorCode.NONE
        except KafkaError as error:
            code = error.code
        codes = {p: code for p in wanted}
    if ctx.api_version < 5:  # TRANSACTION_ABORTABLE is v5's
        codes = {p: (ErrorCode.INVALID_TXN_STATE if c is ErrorCode.TRANSACTION_ABORTABLE else c)
                 for p, c in codes.items()}
    by_topic: dict[str, list[TransactionPartitionResult]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append(
            TransactionPartitionResult(partition_index=index, partition_error_code=code))
    return TransactionResult(transactional_id=transaction.transactional_id, topic_results=[
        TransactionTopicResult(name=topic, results_by_partition=results)
        for topic, results in by_topic.items()])


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
    if request.transactions:  # v4+: the top-level code says it
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=code,
                                          results_by_transaction=[])
    return _response(request, lambda _: code, code)
