"""Produce (API key 0), versions 3-11 (magic-2 record batches only).

Behaviour: per partition, validate the one record batch (CRC, lengths, counts, size) and
append it as sent, patching only its base offset and leader epoch; one bad partition does
not fail the others. Only the leader appends (NOT_LEADER_OR_FOLLOWER elsewhere).
acks=0 is answered with nothing (the connection closes on failure); acks=1 once appended;
acks=all (-1) once the high watermark passes the batch, i.e. every in-sync replica has it
(Kafka's delayed produce; at once on a single broker), and, with
``log.flush.policy=ack``, after an fsync (group commit). acks=all with fewer in-sync
replicas than ``min.insync.replicas`` is refused with NOT_ENOUGH_REPLICAS before anything is
written, and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below it while
waiting; a wait longer than the request's ``timeout_ms`` is REQUEST_TIMED_OUT (the records
may still be committed later, as in Kafka). Other acks values get INVALID_REQUIRED_ACKS.

Transactional batches: the request must carry the transactional id (INVALID_TXN_STATE
otherwise). A producer's first transactional batch in a partition waits for its transaction
coordinator to confirm that the partition is in the producer's ongoing transaction (KIP-890,
``coordinator.transaction.verification``; at once when this broker coordinates the id):
INVALID_TXN_STATE when it is not (a late write, after its transaction ended),
INVALID_PRODUCER_EPOCH for a fenced producer, NOT_ENOUGH_REPLICAS (retried by every
producer) when the coordinator cannot answer now.

Ordering invariant: every append happens before this coroutine's first ``await`` (see
``broker.server``), so pipelined requests append in the order they arrived - except a batch
that waits for its coordinator: it and the producer's later batches to that partition wait
in the partition, in the order they came, and are appended together when the answer comes.
Version notes: v8 adds per-partition error messages; v10 the current-leader and node-endpoint
tagged fields (KIP-951), filled on NOT_LEADER_OR_FOLLOWER when this broker knows the leader
and omitted otherwise (a default tagged field is never written). The response is built and
encoded by ``protocol.produce_response`` (plain objects, no codec: it is paid per request).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import cast

from ...partition import Partition
from ...protocol import batches
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol import produce_response
from ...protocol.messages import ProduceRequest
from ...storage import AppendInfo
from ...protocol.produce_response import ProduceResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.PRODUCE
VERSIONS = produce_response.VERSIONS  # 3-11: served as far as the response encoder writes

TopicResult = ProduceResponse.TopicProduceResponse
PartitionResult = TopicResult.PartitionProduceResponse
PartitionData = ProduceRequest.TopicProduceData.PartitionProduceData


def _result(index: int, code: ErrorCode, base_offset: int = -1, log_start_offset: int = -1,
            message: str | None = None) -> PartitionResult:
    return PartitionResult(index, code, base_offset, -1, log_start_offset, None, message)


async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse:
    if request.acks not in (0, 1, -1):
        return error_response(request, ErrorCode.INVALID_REQUIRED_ACKS,
                              f"acks={request.acks}; expected 0, 1 or -1")
    if request.transactional_id is not None and not ctx.allowed(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
    appended: list[tuple[PartitionResult, Partition, int | None]] = []
    waiting: list[tuple[list[PartitionResult], int, Awaitable[_Appended]]] = []
    topics = []
    for topic_data in request.topic_data:
        results: list[PartitionResult] = []
        if not ctx.allowed(AclOperation.WRITE, ResourceType.TOPIC, topic_data.name):
            topics.append(TopicResult(name=topic_data.name, partition_responses=[
                _result(data.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for data in topic_data.partition_data]))
            continue
        for data in topic_data.partition_data:
            outcome = _append(ctx, topic_data.name, data, request.acks,
                              request.transactional_id)
            if isinstance(outcome, tuple):
                result, partition, required_offset = outcome
                results.append(result)
                if partition is not None:
                    appended.append((result, partition, required_offset))
            else:  # waits for its transaction's coordinator: its place is kept
                waiting.append((results, len(results), outcome))
                results.append(_result(data.index, ErrorCode.NONE))
        topics.append(TopicResult(name=topic_data.name, partition_responses=results))
    # All appends are done (but those waiting for a coordinator); only now may this
    # coroutine wait.
    if waiting:
        for (results, position, _), (result, partition, required_offset) in zip(
                waiting, await asyncio.gather(*(w for _, _, w in waiting))):
            results[position] = result
            if partition is not None:
                appended.append((result, partition, required_offset))
    if request.acks == -1 and appended:
        waits = [_wait_for_acks(result, partition, required_offset, request.timeout_ms)
                 for result, partition, required_offset in appended
                 if required_offset is not None]
        if waits:
            await asyncio.gather(*waits)
        if ctx.services.config["log.flush.policy"] == "ack":
            await _wait_for_flush(ctx, [(r, p) for r, p, _ in appended
                                        if r.error_code == ErrorCode.NONE])
    return ProduceResponse(responses=topics, throttle_time_ms=0,
                           node_endpoints=_point_to_leaders(ctx, topics))


def _point_to_leaders(ctx: RequestContext, topics: list[TopicResult]
                      ) -> list[ProduceResponse.NodeEndpoint]:
    """KIP-951: a NOT_LEADER_OR_FOLLOWER entry names the leader we know (v10+ tagged
    fields), with its endpoint, so the client moves there at once instead of waiting for
    its next metadata refresh (librdkafka otherwise re-queries about a second later)."""
    leaders: set[int] = set()
    for topic in topics:
        known = ctx.services.partitions.topics.get(topic.name)
        for result in topic.partition_responses:
            if result.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER or known is None:
                continue
            if not 0 <= result.index < len(known.states):
                continue
            state = known.states[result.index]
            if state.has_leader and state.leader != ctx.services.node_id \
                    and state.leader in ctx.services.brokers.live:
                result.current_leader = PartitionResult.LeaderIdAndEpoch(
                    leader_id=state.leader, leader_epoch=state.leader_epoch)
                leaders.add(state.leader)
    return [ProduceResponse.NodeEndpoint(node_id=b.node_id, host=address[0], port=address[1],
                                         rack=b.rack)
            for b in (ctx.services.brokers.live[n] for n in sorted(leaders))
            if (address := b.endpoint(ctx.listener)) is not None]


# a partition's result, its replica when something was appended, and the offset acks=all
# waits for (None: the high watermark is past it already)
_Appended = tuple[PartitionResult, "Partition | None", "int | None"]


def _append(ctx: RequestContext, topic: str, data: PartitionData, acks: int,
            transactional_id: str | None) -> _Appended | Awaitable[_Appended]:
    """Append one partition's batch now, or - a producer's first transactional batch here -
    once its coordinator has answered (an awaitable of the same)."""
    # a bytearray of their own (protocol.messages.bounded_decoder), patched and written as is
    records = cast("bytearray | None", data.records)
    try:
        partition = ctx.services.partitions.get_partition(topic, data.index)
        waiting = _verify_transaction(ctx, transactional_id, partition, records, acks)
    except KafkaError as error:
        return _result(data.index, error.code, message=error.message), None, None
    if waiting is not None:
        return _appended_when_verified(partition, data.index, waiting)
    try:
        info = partition.append_records(records, required_acks=acks)
    except KafkaError as error:
        return _failed(partition, data.index, error), None, None
    return _appended(partition, data.index, info)


# Errors answered without the log start offset; Kafka's ReplicaManager gives it with every
# other error of an append (an out-of-order sequence, a fenced epoch, an invalid record).
_NO_LOG_START_OFFSET = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.UNKNOWN_TOPIC_ID})


def _failed(partition: Partition, index: int, error: KafkaError) -> PartitionResult:
    start = -1 if error.code in _NO_LOG_START_OFFSET else partition.log_start_offset
    return _result(index, error.code, log_start_offset=start, message=error.message)


def _appended(partition: Partition, index: int, info: AppendInfo) -> _Appended:
    result = _result(index, ErrorCode.NONE, info.base_offset, partition.log_start_offset)
    # acks=all waits until the HW passes the last offset (a retried batch's too)
    required_offset = info.last_offset + 1 if partition.high_watermark <= info.last_offset else None
    return result, partition, required_offset


async def _appended_when_verified(partition: Partition, index: int,
                                  waiting: asyncio.Future[AppendInfo]) -> _Appended:
    try:
        info = await waiting
    except KafkaError as error:
        return _result(index, error.code, message=error.message), None, None
    return _appended(partition, index, info)


def _verify_transaction(ctx: RequestContext, transactional_id: str | None,
                        partition: Partition, records: bytearray | None, acks: int
                        ) -> asyncio.Future[AppendInfo] | None:
    """KIP-890: a transactional batch must come with its transactional id, and a
    producer's first one in this partition must be in its ongoing transaction, as its
    coordinator says. Returns None to append now (raises KafkaError not to), or the future
    of an append that waits for the coordinator's answer."""
    if not records or len(records) < batches.HEADER_SIZE:
        return None  # append_records reports what is wrong with it
    header = batches.parse_header(records)
    if not header.is_transactional:
        return None
    if not transactional_id:
        raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                         f"a transactional batch of producer {header.producer_id} without a "
                         "transactional id")
    producer_id, epoch = header.producer_id, header.producer_epoch
    if not partition.needs_verification(producer_id, epoch):
        return None
    verifier = ctx.services.transaction_verifier
    where = (partition.topic, partition.index)
    if verifier.is_local(transactional_id) and not partition.is_verifying(producer_id):
        code = verifier.verify_here(transactional_id, producer_id, epoch, where)
        if code is not ErrorCode.NONE:
            raise KafkaError(code, _refusal(code, partition, transactional_id, producer_id,
                                            epoch) or code.name)
        return None
    waiting, first = partition.append_when_verified(records, acks, producer_id)
    if first:
        answer = verifier.verify(transactional_id, producer_id, epoch, where)
        answer.add_done_callback(lambda done: partition.verified(
            producer_id, done.result(), _refusal(done.result(), partition, transactional_id,
                                                 producer_id, epoch)))
    return waiting


def _refusal(code: ErrorCode, partition: Partition, transactional_id: str, producer_id: int,
             epoch: int) -> str | None:
    if code is ErrorCode.NONE:
        return None
    if code is ErrorCode.INVALID_PRODUCER_EPOCH:
        return (f"producer {producer_id} epoch {epoch} is not {transactional_id!r}'s current "
                "one: it was fenced")
    if code is ErrorCode.INVALID_PRODUCER_ID_MAPPING:
        return f"producer {producer_id} is not {transactional_id!r}'s"
    if code is ErrorCode.INVALID_TXN_STATE:
        return (f"{partition} is not in {transactional_id!r}'s ongoing transaction "
                "(AddPartitionsToTxn first; or the transaction has ended)")
    return f"{transactional_id!r}'s coordinator cannot say now ({code.name}); retry"


async def _wait_for_acks(result: PartitionResult, partition: Partition, required_offset: int,
                         timeout_ms: int) -> None:
    waiter = partition.wait_for_acks(required_offset)
    message: str | None
    try:
        code = await asyncio.wait_for(waiter, max(timeout_ms, 0) / 1000)
    except TimeoutError:
        code, message = ErrorCode.REQUEST_TIMED_OUT, (
            f"{partition}: not replicated to the ISR {list(partition.isr)} within "
            f"{timeout_ms} ms")
    else:
        message = None if code == ErrorCode.NONE else (
            f"{partition}: {code.name} (ISR {list(partition.isr)}, leader "
            f"{partition.leader_id}, epoch {partition.leader_epoch})")
    if code != ErrorCode.NONE:
        result.error_code, result.error_message, result.base_offset = code, message, -1


async def _wait_for_flush(ctx: RequestContext,
                          appended: list[tuple[PartitionResult, Partition]]) -> None:
    partitions = {id(p): p for _, p in appended}
    outcomes = await asyncio.gather(
        *(ctx.services.flusher.wait_for_flush(p.log) for p in partitions.values()),
        return_exceptions=True)
    failed = {key for key, outcome in zip(partitions, outcomes) if isinstance(outcome, Exception)}
    for result, partition in appended:
        if id(partition) in failed:
            result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            result.error_message = "fsync failed; the write may not be durable"
            result.base_offset = -1


def error_response(request: ProduceRequest, code: ErrorCode, message: str | None
                  ) -> ProduceResponse:
    return ProduceResponse(responses=[
        TopicResult(name=t.name, partition_responses=[
            _result(p.index, code, message=message) for p in t.partition_data])
        for t in request.topic_data], throttle_time_ms=0)
