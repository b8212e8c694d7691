"""TxnOffsetCommit (API key 28), versions 0-3: a transactional producer commits a consumer
group's offsets inside its transaction (consume-transform-produce).

Behaviour: sent to the group's coordinator after AddOffsetsToTxn; the offsets are written to
``__consumer_offsets`` as a transactional batch of the producer and stay pending - OffsetFetch
does not return them, and answers UNSTABLE_OFFSET_COMMIT under require_stable - until the
transaction's marker reaches the group's partition: commit applies them, abort drops them.
Checks: NOT_COORDINATOR for a group coordinated elsewhere; when this broker also coordinates
the transactional id, the group's partition must be in the producer's ongoing transaction
(INVALID_TXN_STATE otherwise: AddOffsetsToTxn first) and the producer its current one
(INVALID_PRODUCER_EPOCH, as Kafka answers a fenced producer here). KIP-447 (v3): a member
id, instance id or generation, when given, must be the group's current ones
(UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION), so a zombie of an older
generation cannot commit. Per partition: UNKNOWN_TOPIC_OR_PARTITION,
OFFSET_METADATA_TOO_LARGE.
Version notes: v2 adds the leader epoch; v3 flexible with the group's generation, member id
and instance id; v4-v5 (KIP-890) are not served.
"""

from __future__ import annotations

from collections.abc import Callable

from ...coordinator.group import OffsetAndMetadata
from ...coordinator.group.offsets_topic import OFFSETS_TOPIC
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.TXN_OFFSET_COMMIT
VERSIONS = range(0, 4)

TopicResult = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartitionResult = TopicResult.TxnOffsetCommitResponsePartition


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    if not ctx.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                       request.transactional_id):
        return error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, request.group_id or ""):
        return error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    version = ctx.api_version
    coordinator = ctx.services.group_coordinator
    if not coordinator.is_coordinator_for(request.group_id or ""):
        return error_response(request, ErrorCode.NOT_COORDINATOR, None)
    index = coordinator.partition_for(request.group_id)
    code = _verify(ctx, request, index)
    if code is not ErrorCode.NONE:
        return error_response(request, code, None)
    results: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for topic in request.topics:
        readable = ctx.allowed(AclOperation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            known = ctx.services.partitions.topics.get(topic.name)
            if not readable:
                results[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if known is None or not 0 <= p.partition_index < known.partition_count:
                results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[key] = OffsetAndMetadata(
                p.committed_offset, p.committed_leader_epoch if version >= 2 else -1,
                p.committed_metadata or "")
    member = (request.member_id, request.group_instance_id, request.generation_id) \
        if version >= 3 else ("", None, -1)
    results.update(coordinator.txn_offset_commit(request.group_id, request.producer_id,
                                                 request.producer_epoch, *member, offsets))
    if ErrorCode.NONE in results.values():
        wait = await ctx.services.offsets_topic.wait_for_replication(
            index, ctx.services.config["offsets.commit.timeout.ms"])
        if wait is not ErrorCode.NONE:
            results = {k: (wait if c is ErrorCode.NONE else c) for k, c in results.items()}
    return _response(request, lambda topic, partition: results[(topic, partition)])


def _verify(ctx: RequestContext, request: TxnOffsetCommitRequest, index: int) -> ErrorCode:
    """When this broker also coordinates the transactional id: the group's partition must
    be in the producer's ongoing transaction, and the producer its current one."""
    transactions = ctx.services.transaction_coordinator
    if not request.transactional_id or not transactions.is_coordinator_for(
            request.transactional_id):
        return ErrorCode.NONE  # coordinated elsewhere: nothing to check here
    code = transactions.verify_partitions(request.transactional_id, request.producer_id,
                                          request.producer_epoch, [(OFFSETS_TOPIC, index)])
    return _TXN_OFFSET_COMMIT_ANSWERS.get(code[(OFFSETS_TOPIC, index)],
                                          code[(OFFSETS_TOPIC, index)])


# how TxnOffsetCommit answers what verification found (the codes its clients know)
_TXN_OFFSET_COMMIT_ANSWERS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.TRANSACTION_ABORTABLE: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.INVALID_TXN_STATE,
}


def _response(request: TxnOffsetCommitRequest, code_of: Callable[[str, int], ErrorCode]
              ) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        TopicResult(name=t.name, partitions=[
            PartitionResult(partition_index=p.partition_index,
                            error_code=code_of(t.name, p.partition_index))
            for p in t.partitions])
        for t in request.topics])


def error_response(request: TxnOffsetCommitRequest, code: ErrorCode, message: str | None
                  ) -> TxnOffsetCommitResponse:
    return _response(request, lambda topic, partition: code)
