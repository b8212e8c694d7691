"""InitProducerId (API key 22), versions 0-5.

Behaviour: without a transactional id, allocate a new producer id at epoch 0, unique across
broker restarts (``controller.producer_ids``; a new block of ids is reserved off the event
loop, and COORDINATOR_NOT_AVAILABLE answered while the metadata store cannot be reached).
Like Kafka, a request that names its current producer id and epoch (v3+, KIP-360, sent after
an idempotent producer lost its sequence state) also gets a fresh id: without a
transactional id there is nothing to fence.
With a transactional id the transaction coordinator answers (``coordinator.transaction``):
the id's producer id at its next epoch, which fences every older instance (or a new producer
id when the epoch is exhausted). NOT_COORDINATOR when this broker does not coordinate the
id; INVALID_TRANSACTION_TIMEOUT beyond ``transaction.max.timeout.ms``;
CONCURRENT_TRANSACTIONS (retriable) while the id's previous transaction is being completed
or, when a new instance found it still open, aborted; PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
before v4) when a KIP-360 request names a producer id and epoch that are not the id's.
Version notes: v2+ flexible; v3 adds producer_id/producer_epoch to the request; v6 (KIP-939
two-phase commit) is not served.
"""

from __future__ import annotations

from ...coordinator.transaction.metadata import as_client_knows
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = range(0, 6)


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        if not ctx.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                           request.transactional_id):
            return error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                  None)
        return await _transactional(ctx, request, request.transactional_id)
    # an idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
    if not (ctx.allowed(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, log_denial=False)
            or ctx.allowed_on_some(AclOperation.WRITE, ResourceType.TOPIC)):
        return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    try:
        producer_id = await ctx.services.producer_ids.next_id()
    except KafkaError as error:  # no id block: the metadata store cannot be reached
        return error_response(request, error.code, error.message)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                  producer_id=producer_id, producer_epoch=0)


async def _transactional(ctx: RequestContext, request: InitProducerIdRequest,
                         transactional_id: str) -> InitProducerIdResponse:
    expected = None
    if ctx.api_version >= 3 and request.producer_id >= 0:
        expected = (request.producer_id, request.producer_epoch)
    try:
        producer_id, epoch = await ctx.services.transaction_coordinator.init_producer_id(
            transactional_id, request.transaction_timeout_ms, expected)
    except KafkaError as error:
        return error_response(request, as_client_knows(error.code, ctx.api_version, 4),
                              error.message)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                  producer_id=producer_id, producer_epoch=epoch)


def error_response(request: InitProducerIdRequest, code: ErrorCode, message: str | None
                  ) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1,
                                  producer_epoch=-1)
