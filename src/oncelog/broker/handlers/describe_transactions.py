"""DescribeTransactions (API key 65), version 0 (KIP-664; what ``kafka-transactions.sh
describe`` and ``oncelog transactions describe`` ask).

Behaviour: per transactional id, its state as the coordinator holds it: state name (Kafka's:
Empty, Ongoing, PrepareCommit, ...), timeout, start time of the open transaction (-1 at
rest), producer id and epoch, and the partitions of the transaction. NOT_COORDINATOR when
this broker does not coordinate the id; TRANSACTIONAL_ID_NOT_FOUND when it does and has
never seen it (or it expired).
Version notes: v0 flexible.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import DescribeTransactionsRequest, DescribeTransactionsResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
VERSIONS = range(0, 1)

State = DescribeTransactionsResponse.TransactionState


async def handle(ctx: RequestContext, request: DescribeTransactionsRequest
                ) -> DescribeTransactionsResponse:
    coordinator = ctx.services.transaction_coordinator
    states = []
    for transactional_id in request.transactional_ids:
        if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                           transactional_id):
            states.append(_error(transactional_id,
                                 ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        try:
            meta = coordinator.describe(transactional_id)
        except KafkaError as error:
            states.append(_error(transactional_id, error.code))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(index)
        states.append(State(
            error_code=ErrorCode.NONE, transactional_id=transactional_id,
            transaction_state=meta.state.display_name, transaction_timeout_ms=meta.timeout_ms,
            transaction_start_time_ms=meta.start_ms, producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            topics=[State.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


def _error(transactional_id: str, code: ErrorCode) -> State:
    return State(error_code=code, transactional_id=transactional_id, transaction_state="",
                 transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                 producer_epoch=-1, topics=[])


def error_response(request: DescribeTransactionsRequest, code: ErrorCode, message: str | None
                   ) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=[
        _error(t, code) for t in request.transactional_ids or []])
