"""InitProducerId (API key 22), versions 0-5.

Behaviour: without a transactional id, allocate a new producer id at epoch 0, unique across
broker restarts (``controller.producer_ids``). Like Kafka, a request that names its current
producer id and epoch (v3+, KIP-360, sent after an idempotent producer lost its sequence
state) also gets a fresh id: without a transactional id there is nothing to fence.
With a transactional id: transactions are not implemented yet, so the request is refused
with INVALID_REQUEST and a message saying so, rather than a retriable code a client would
retry until its timeout.
Version notes: v2+ flexible; v3 adds producer_id/producer_epoch to the request; v6 (KIP-939
two-phase commit) is not served.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import InitProducerIdResponse
from ..context import RequestContext

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = range(0, 6)


async def handle(ctx: RequestContext, request) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return error_response(request, ErrorCode.INVALID_REQUEST,
                              f"transactional id {request.transactional_id!r}: transactions "
                              "are not supported yet")
    producer_id = ctx.broker.producer_ids.allocate()
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                  producer_id=producer_id, producer_epoch=0)


def error_response(request, code: ErrorCode, message: str | None) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1,
                                  producer_epoch=-1)
