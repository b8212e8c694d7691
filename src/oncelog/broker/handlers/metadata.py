"""Metadata (API key 3), versions 0-12.

Behaviour: every live broker (as advertised, which may differ from where it listens) plus, for
a few seconds, those that just left (``controller.live_brokers`` says why), the controller,
and per partition the leader, leader epoch, replicas, ISR and offline replicas (replicas
whose broker is not live), as this broker's view of the metadata store has them. A partition
without a live leader - none elected, or its broker's session ended and the controller has
not elected yet - answers LEADER_NOT_AVAILABLE with leader -1, as Kafka's MetadataCache
does, so clients retry. A broker cut off from the store (its lease lapsed) cannot say who
leads now: it answers every partition so, leader -1, and the listener closes the client's
connection after the answer (``server.py``), so the client asks another broker - one that
answered "I lead" from its last view kept a librdkafka producer, which asks the brokers it
is connected to, on the cut-off broker until the network healed.
A null topic list (v1+), or an empty one at v0, means every topic. A requested topic that
does not exist is created when both the request allows it (v4+; always before) and
``auto.create.topics.enable`` is true; otherwise UNKNOWN_TOPIC_OR_PARTITION. Invalid names
get INVALID_TOPIC_EXCEPTION. Topic ids (v10+) are real, stable UUIDs; lookups by id are
answered with UNKNOWN_TOPIC_ID until topic ids are supported end to end.
ACLs, as Kafka's ``KafkaApis``: the list of every topic holds only those the principal may
DESCRIBE; a requested topic it may not describe gets TOPIC_AUTHORIZATION_FAILED, as does one
it would auto-create without CREATE on the cluster or the topic. KIP-430 (v8+): a topic's
authorized operations when ``include_topic_authorized_operations``, the cluster's (v8-10)
when ``include_cluster_authorized_operations`` - every operation, without an authorizer.
"""

from __future__ import annotations

import logging
import uuid

from ...controller.store import NO_LEADER
from ...partition.manager import Topic, check_topic_name
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import MetadataRequest, MetadataResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.METADATA
VERSIONS = range(0, 13)
# INT32_MIN, "not requested": bit 31 of the bit set (the codec writes None so too, but its
# stubs type the field as the set)
NO_AUTHORIZED_OPERATIONS = {31}
ZERO_UUID = uuid.UUID(int=0)

log = logging.getLogger(__name__)

TopicEntry = MetadataResponse.MetadataResponseTopic
PartitionEntry = TopicEntry.MetadataResponsePartition


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    manager = ctx.services.partitions
    operations = ctx.api_version >= 8 and request.include_topic_authorized_operations
    if request.topics is None or (ctx.api_version == 0 and not request.topics):
        entries = [_topic_entry(ctx, topic, operations) for topic in manager.topics.values()
                   if ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name,
                                  log_denial=False)]
    else:
        allow_create = ctx.api_version < 4 or request.allow_auto_topic_creation
        entries = [await _requested_topic(ctx, t.name, allow_create, operations)
                   for t in request.topics]
    cluster_operations = (ctx.authorized_operations(ResourceType.CLUSTER)
                          if 8 <= ctx.api_version <= 10
                          and request.include_cluster_authorized_operations
                          else NO_AUTHORIZED_OPERATIONS)
    return _response(ctx, entries, cluster_operations=cluster_operations)


async def _requested_topic(ctx: RequestContext, name: str | None, allow_create: bool,
                           operations: bool) -> TopicEntry:
    manager = ctx.services.partitions
    if name is None:
        return _error_entry(name, ErrorCode.UNKNOWN_TOPIC_ID)
    if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    topic = manager.topics.get(name)
    if topic is not None:
        return _topic_entry(ctx, topic, operations)
    try:
        check_topic_name(name)
    except KafkaError as error:
        return _error_entry(name, error.code)
    if not (allow_create and ctx.services.config["auto.create.topics.enable"]):
        return _error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not (ctx.allowed(AclOperation.CREATE, ResourceType.CLUSTER, log_denial=False)
            or ctx.allowed(AclOperation.CREATE, ResourceType.TOPIC, name)):
        return _error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    try:
        topic = await manager.create_topic(name)
    except KafkaError as error:
        known = manager.topics.get(name)
        if error.code == ErrorCode.TOPIC_ALREADY_EXISTS and known is not None:
            return _topic_entry(ctx, known, operations)  # another broker's, just now
        if error.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return _error_entry(name, ErrorCode.LEADER_NOT_AVAILABLE)
        log.warning("auto-creating topic %r failed: %s", name, error)
        return _error_entry(name, error.code)
    assert topic is not None  # None only for validate_only
    return _topic_entry(ctx, topic, operations)


def _topic_entry(ctx: RequestContext, topic: Topic, operations: bool = False) -> TopicEntry:
    brokers = ctx.services.brokers
    live = brokers.live
    partitions = []
    for index, state in enumerate(topic.states):
        replicas = list(topic.record.replicas(index))
        leader = state.leader if state.leader in live and not brokers.cut_off else NO_LEADER
        code = ErrorCode.NONE if leader != NO_LEADER else ErrorCode.LEADER_NOT_AVAILABLE
        if leader != NO_LEADER and live[leader].endpoint(ctx.listener) is None:
            code = ErrorCode.LISTENER_NOT_FOUND  # Kafka's answer: the leader lacks this listener
        partitions.append(PartitionEntry(
            error_code=code, partition_index=index, leader_id=leader,
            leader_epoch=state.leader_epoch, replica_nodes=replicas, isr_nodes=list(state.isr),
            offline_replicas=[r for r in replicas if r not in live]))
    return TopicEntry(error_code=ErrorCode.NONE, name=topic.name,
                      topic_id=uuid.UUID(topic.record.topic_id), is_internal=topic.is_internal,
                      partitions=partitions, authorized_operations=(
                          ctx.authorized_operations(ResourceType.TOPIC, topic.name)
                          if operations else NO_AUTHORIZED_OPERATIONS))


def _error_entry(name: str | None, code: ErrorCode) -> TopicEntry:
    return TopicEntry(error_code=code, name=name, topic_id=ZERO_UUID, is_internal=False,
                      partitions=[], authorized_operations=NO_AUTHORIZED_OPERATIONS)


def _response(ctx: RequestContext, topics: list[TopicEntry], code: ErrorCode = ErrorCode.NONE,
              cluster_operations: set[int] = NO_AUTHORIZED_OPERATIONS) -> MetadataResponse:
    services = ctx.services
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(
            node_id=b.node_id, host=address[0], port=address[1], rack=b.rack)
            for b in services.brokers.listed()
            if (address := b.endpoint(ctx.listener)) is not None],
        cluster_id=services.identity.cluster_id, controller_id=services.brokers.controller_id,
        topics=topics, authorized_operations=cluster_operations, error_code=code)


def error_response(request: MetadataRequest, code: ErrorCode, message: str | None
                  ) -> MetadataResponse:
    topics = [_error_entry(t.name, code) for t in (request.topics or [])]
    return MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1,
                            topics=topics, authorized_operations=NO_AUTHORIZED_OPERATIONS,
                            error_code=code)
