"""AddOffsetsToTxn (API key 25), versions 0-3.

Behaviour: adds the group's partition of ``__consumer_offsets`` to the producer's
transaction, so a TxnOffsetCommit to the group's coordinator becomes part of it (its offsets
are applied with the commit marker, dropped with the abort marker). Errors as
AddPartitionsToTxn (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2); an empty group id
is INVALID_GROUP_ID.
Version notes: v2 knows PRODUCER_FENCED; v3 flexible; v4 (transaction protocol v2) is not
served.
"""

from __future__ import annotations

from ...coordinator.group.offsets_topic import OFFSETS_TOPIC
from ...coordinator.transaction.metadata import as_client_knows
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
VERSIONS = range(0, 4)


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not ctx.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                       request.transactional_id):
        return error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, request.group_id or ""):
        return error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    if not request.group_id:
        return error_response(request, ErrorCode.INVALID_GROUP_ID, "an empty group id")
    index = ctx.services.group_coordinator.partition_for(request.group_id)
    if index < 0:
        return error_response(request, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                              f"{OFFSETS_TOPIC} does not exist yet")
    try:
        await ctx.services.transaction_coordinator.add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch,
            {(OFFSETS_TOPIC, index)})
    except KafkaError as error:
        return error_response(request, as_client_knows(error.code, ctx.api_version, 2),
                              error.message)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.NONE)


def error_response(request: AddOffsetsToTxnRequest, code: ErrorCode, message: str | None
                  ) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)
