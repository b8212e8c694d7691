"""ListTransactions (API key 66), versions 0-1 (KIP-664; KIP-994 adds the duration filter).

Behaviour: the transactional ids this broker coordinates (``kafka-transactions.sh list``
asks every broker), filtered by state names and producer ids when given, and in v1 by
``duration_filter`` (ms): only transactions open at least that long (-1: no filter). State
names that are not Kafka's come back in ``unknown_state_filters``.
Version notes: v0 flexible; v1 adds duration_filter; v2 (a transactional-id pattern) is not
served.
"""

from __future__ import annotations

from ...coordinator.transaction.state import TransactionState
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import ListTransactionsRequest, ListTransactionsResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.LIST_TRANSACTIONS
VERSIONS = range(0, 2)

State = ListTransactionsResponse.TransactionState
_NAMES = {state.display_name for state in TransactionState}


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    wanted = set(request.state_filters or [])
    duration = request.duration_filter if ctx.api_version >= 1 else -1
    found = ctx.services.transaction_coordinator.list(
        wanted & _NAMES if wanted else None, set(request.producer_id_filters or []) or None,
        duration if duration is not None else -1)
    if wanted and not wanted & _NAMES:
        found = []
    found = [m for m in found if ctx.allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                             m.transactional_id, log_denial=False)]
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE,
        unknown_state_filters=sorted(wanted - _NAMES),
        transaction_states=[State(transactional_id=m.transactional_id, producer_id=m.producer_id,
                                  transaction_state=m.state.display_name) for m in found])


def error_response(request: ListTransactionsRequest, code: ErrorCode, message: str | None
                  ) -> ListTransactionsResponse:
    return ListTransactionsResponse(throttle_time_ms=0, error_code=code,
                                    unknown_state_filters=[], transaction_states=[])
