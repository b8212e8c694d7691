"""EndTxn (API key 26), versions 0-3.

Behaviour: commits (``committed``) or aborts the producer's transaction: the coordinator
writes PrepareCommit/PrepareAbort and answers once it is replicated (the outcome is decided
then, as in Kafka); the markers in every partition of the transaction and
CompleteCommit/CompleteAbort follow, and the id's next request waits for them. A retry of an
EndTxn already completed gets NONE again. Errors: INVALID_TXN_STATE with no transaction open
(or a commit of one being aborted); CONCURRENT_TRANSACTIONS while the same EndTxn is still
completing; PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2); INVALID_PRODUCER_ID_MAPPING;
NOT_COORDINATOR.
Version notes: v2 knows PRODUCER_FENCED; v3 flexible; v4-v5 (KIP-890) are not served.
"""

from __future__ import annotations

from ...coordinator.transaction.metadata import as_client_knows
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import EndTxnRequest, EndTxnResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.END_TXN
VERSIONS = range(0, 4)


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not ctx.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                       request.transactional_id):
        return error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
    try:
        await ctx.services.transaction_coordinator.end_transaction(
            request.transactional_id, request.producer_id, request.producer_epoch,
            bool(request.committed))
    except KafkaError as error:
        return error_response(request, as_client_knows(error.code, ctx.api_version, 2),
                              error.message)
    return EndTxnResponse(throttle_time_ms=0, error_code=ErrorCode.NONE)


def error_response(request: EndTxnRequest, code: ErrorCode, message: str | None) -> EndTxnResponse:
    return EndTxnResponse(throttle_time_ms=0, error_code=code)
