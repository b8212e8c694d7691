"""Route a decoded request to its handler module; turn every failure into a Kafka error code.

The table below lists the APIs we speak. Each handler module declares ``API_KEY``, the
``VERSIONS`` it serves (what ApiVersions advertises), ``handle(ctx, request)`` and
``error_response(request, code, message)`` (the same request answered with one error for
every entity it names); optionally ``unreadable(request)``, the reason Kafka could not even
build such a request object (the listener then closes the connection, as Kafka's does).
Exceptions never reach a client: a ``KafkaError`` becomes its code, anything else becomes
UNKNOWN_SERVER_ERROR and one log line with the API and version.

Each handler also checks the ACLs Kafka's ``KafkaApis`` checks for its API
(``RequestContext.allowed``; every check passes without an authorizer), answering Kafka's
*_AUTHORIZATION_FAILED codes: docs/security.md's table lists them per request.
"""

from __future__ import annotations

import logging

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages import ApiMessage, Response
from .context import RequestContext
from .handlers import (api_versions, create_partitions, create_topics, delete_topics,
                       describe_cluster, describe_configs, fetch, list_offsets, metadata,
                       offset_for_leader_epoch, produce)
from .handlers import describe_producers, init_producer_id  # idempotent producer
from .handlers import (add_offsets_to_txn, add_partitions_to_txn,  # transactions
                       describe_transactions, end_txn, list_transactions, txn_offset_commit,
                       write_txn_markers)
from .handlers import sasl_authenticate, sasl_handshake  # answered by the connection's SASL
from .handlers import alter_user_scram_credentials, describe_user_scram_credentials  # users
from .handlers import create_acls, delete_acls, describe_acls  # ACLs
from .handlers import (delete_groups, describe_groups, find_coordinator, heartbeat,  # groups
                       join_group, leave_group, list_groups, offset_commit, offset_delete,
                       offset_fetch, sync_group)

log = logging.getLogger(__name__)

HANDLERS = {module.API_KEY: module for module in (
    produce, fetch, list_offsets, metadata, api_versions, create_topics, delete_topics,
    create_partitions, describe_configs, describe_cluster, offset_for_leader_epoch,
    init_producer_id, describe_producers,
    find_coordinator, join_group, sync_group, heartbeat, leave_group, offset_commit,
    offset_fetch, list_groups, describe_groups, delete_groups, offset_delete,
    add_partitions_to_txn, add_offsets_to_txn, end_txn, write_txn_markers, txn_offset_commit,
    describe_transactions, list_transactions, sasl_handshake, sasl_authenticate,
    describe_user_scram_credentials, alter_user_scram_credentials,
    describe_acls, create_acls, delete_acls,
)}


async def dispatch(ctx: RequestContext, request: ApiMessage) -> Response:
    # The table's values are modules, so what they return is Any to the type checker; each
    # handler's own signature is checked in its module.
    handler = HANDLERS[ctx.api_key]
    response: Response
    if ctx.api_version not in handler.VERSIONS:
        response = handler.error_response(request, ErrorCode.UNSUPPORTED_VERSION,
                                          f"v{ctx.api_version} is not served")
        return response
    try:
        response = await handler.handle(ctx, request)
    except KafkaError as error:
        log.debug("%s v%d from %s: %s", ctx.api_key.name, ctx.api_version, ctx.client_address,
                 error)
        response = handler.error_response(request, error.code, error.message)
    except Exception:
        log.exception("unexpected error in %s v%d from %s", ctx.api_key.name, ctx.api_version,
                      ctx.client_address)
        response = handler.error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR, None)
    return response
