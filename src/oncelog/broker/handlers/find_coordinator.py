"""FindCoordinator (API key 10), versions 0-4.

Behaviour: a group key (key type 0) is answered with the broker that leads the group's
partition of ``__consumer_offsets``, a transaction key (type 1) with the one leading the
transactional id's partition of ``__transaction_state`` (a single broker leads them all), as
this broker's view of the cluster has it; COORDINATOR_NOT_AVAILABLE, which clients retry,
while that partition has no leader, or the leader is this broker and has not loaded it yet.
The first FindCoordinator of each kind creates its topic if missing (Kafka's way), with
``offsets.topic.replication.factor`` / ``transaction.state.log.replication.factor``
replicas or the live brokers if fewer. An empty transactional id and other key types get
INVALID_REQUEST.
Version notes: v1 adds key_type and error_message; v3 is flexible; v4 (KIP-699) batches keys
in coordinator_keys, answered one entry each. v5 (KIP-890) and v6 (share groups) are not
served.
"""

from __future__ import annotations

from ...coordinator.group import GroupCoordinator
from ...coordinator.group.offsets_topic import OffsetsTopic
from ...coordinator.record_codec import partition_for
from ...coordinator.transaction.coordinator import TransactionCoordinator
from ...coordinator.transaction.state_topic import TransactionStateTopic
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = range(0, 5)

GROUP_KEY, TRANSACTION_KEY = 0, 1
Coordinator = FindCoordinatorResponse.Coordinator


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    key_type = request.key_type if ctx.api_version >= 1 else GROUP_KEY
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            await _find(ctx, key, key_type) for key in request.coordinator_keys])
    found = await _find(ctx, request.key, key_type)
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=found.error_code,
                                   error_message=found.error_message, node_id=found.node_id,
                                   host=found.host, port=found.port)


async def _find(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    services = ctx.services
    internal: OffsetsTopic | TransactionStateTopic
    coordinator: GroupCoordinator | TransactionCoordinator
    if key_type == GROUP_KEY:
        if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, key):
            return _error(key, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
        internal, coordinator = services.offsets_topic, services.group_coordinator
    elif key_type == TRANSACTION_KEY:
        if not key:
            return _error(key, ErrorCode.INVALID_REQUEST, "an empty transactional id")
        if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return _error(key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
        internal, coordinator = services.transaction_state_topic, services.transaction_coordinator
    else:
        return _error(key, ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}")
    if services.identity.cluster_mode or not internal.partition_count:
        try:
            await internal.create_if_missing(services.config, len(services.brokers.live) or 1)
        except KafkaError as error:
            return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                          f"cannot create {internal.name}: {error.message}")
    if not services.identity.cluster_mode and not coordinator.is_coordinator_for(key):
        # A single broker leads every partition of the topic: load what it has not, whoever
        # created the topic (another request may have, and not lived to load it).
        coordinator.load()
    topic = services.partitions.topics.get(internal.name)
    index = partition_for(key, topic.partition_count) if topic is not None else -1
    leader = topic.states[index].leader if topic is not None and index >= 0 else -1
    if leader == services.node_id and coordinator.is_coordinator_for(key):
        address = services.identity.address(ctx.listener)
    else:
        registration = services.brokers.live.get(leader)
        if leader == services.node_id or registration is None:
            return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                          f"{internal.name}-{index} has no loaded leader yet")
        address = registration.endpoint(ctx.listener)
    if address is None:  # as Kafka: the coordinator has no listener of this name
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      f"the coordinator (broker {leader}) has no listener {ctx.listener}")
    return _coordinator(key, leader, *address)


def _coordinator(key: str, node_id: int, host: str, port: int) -> Coordinator:
    return Coordinator(key=key, node_id=node_id, host=host, port=port,
                       error_code=ErrorCode.NONE, error_message=None)


def _error(key: str, code: ErrorCode, message: str | None) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code,
                       error_message=message)


def error_response(request: FindCoordinatorRequest, code: ErrorCode, message: str | None
                  ) -> FindCoordinatorResponse:
    keys = list(request.coordinator_keys or []) or [request.key or ""]
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                   node_id=-1, host="", port=-1,
                                   coordinators=[_error(key, code, message) for key in keys])
