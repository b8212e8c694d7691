"""CreateTopics (API key 19), versions 2-7.

Behaviour, per topic: name rules (INVALID_TOPIC_EXCEPTION), TOPIC_ALREADY_EXISTS,
partitions (-1 = ``num.partitions``; otherwise positive, INVALID_PARTITIONS), replication
factor (-1 = ``default.replication.factor``; more than the one broker is
INVALID_REPLICATION_FACTOR), a manual assignment instead of counts (every replica must be this
broker, INVALID_REPLICA_ASSIGNMENT), config overrides checked by name and value
(INVALID_CONFIG). A name given twice in one request is INVALID_REQUEST for both (Kafka does
the same). ``validate_only`` checks everything and creates nothing. The metadata store is
awaited off the event loop for at most the request's ``timeout_ms``: a store that does not
answer in time (or cannot be reached) is REQUEST_TIMED_OUT, as Kafka answers when its
controller is slow; the topic may still appear.
Version notes: v5+ returns the created topic's partition count, replication factor and
configs; v7 its topic id.
"""

from __future__ import annotations

import uuid
from collections import Counter

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import CreateTopicsRequest, CreateTopicsResponse
from ...config import describe_topic_configs
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.CREATE_TOPICS
VERSIONS = range(2, 8)

Result = CreateTopicsResponse.CreatableTopicResult
ConfigResult = Result.CreatableTopicConfigs
ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    counts = Counter(t.name for t in request.topics)
    results = []
    on_cluster = ctx.allowed(AclOperation.CREATE, ResourceType.CLUSTER, log_denial=False)
    for topic in request.topics:
        if counts[topic.name] > 1:
            results.append(_error(topic.name, ErrorCode.INVALID_REQUEST,
                                  f"topic {topic.name!r} appears more than once in the request"))
            continue
        if not on_cluster and not ctx.allowed(AclOperation.CREATE, ResourceType.TOPIC,
                                              topic.name):
            results.append(_error(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  "Authorization failed."))
            continue
        try:
            results.append(await _create(ctx, topic, request.validate_only,
                                         _timeout_s(request.timeout_ms)))
        except KafkaError as error:
            results.append(_error(topic.name, error.code, error.message))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _timeout_s(timeout_ms: int) -> float:
    """The request's own timeout; 0 or less is Kafka's "do not wait for the controller",
    which still has to write the store: then ``request.timeout.ms``'s default, 30 s."""
    return timeout_ms / 1000 if timeout_ms > 0 else 30.0


async def _create(ctx: RequestContext, topic: CreateTopicsRequest.CreatableTopic,
                  validate_only: bool, timeout_s: float) -> Result:
    num_partitions, replication_factor = topic.num_partitions, topic.replication_factor
    if topic.assignments:
        if num_partitions != -1 or replication_factor != -1:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "give either a replica assignment or partition and replication "
                             "counts, not both")
        indexes = sorted(a.partition_index for a in topic.assignments)
        if indexes != list(range(len(indexes))):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"assigned partitions {indexes} must be 0..{len(indexes) - 1}")
        assignment = [list(a.broker_ids) for a in
                      sorted(topic.assignments, key=lambda a: a.partition_index)]
        replication_factor = len(assignment[0])
    else:
        assignment = None
    configs: dict[str, str] = {}
    for config in topic.configs:
        if config.value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "a topic config has a null value")
        configs[config.name] = config.value
    manager = ctx.services.partitions
    created = await manager.create_topic(topic.name, num_partitions, replication_factor,
                                         configs, validate_only=validate_only,
                                         assignment=assignment,
                                         live_brokers=list(ctx.services.brokers.live),
                                         timeout_s=timeout_s)
    if replication_factor == -1:
        replication_factor = ctx.services.config["default.replication.factor"]
    if created is None:  # validate_only
        count = (len(assignment) if assignment else num_partitions if num_partitions != -1
                 else ctx.services.config["num.partitions"])
        return _ok(ctx, topic.name, ZERO_UUID, count, configs, replication_factor)
    return _ok(ctx, topic.name, uuid.UUID(created.record.topic_id), created.partition_count,
               configs, replication_factor)


def _ok(ctx: RequestContext, name: str, topic_id: uuid.UUID, partitions: int,
        overrides: dict[str, str], replication_factor: int) -> Result:
    configs = [ConfigResult(name=e.name, value=e.value, read_only=False,
                            config_source=e.source, is_sensitive=False)
               for e in describe_topic_configs(ctx.services.config, overrides)]
    return Result(name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None,
                  num_partitions=partitions, replication_factor=replication_factor,
                  configs=configs)


def _error(name: str, code: ErrorCode, message: str | None) -> Result:
    return Result(name=name, topic_id=ZERO_UUID, error_code=code, error_message=message,
                  num_partitions=-1, replication_factor=-1, configs=[])


def error_response(request: CreateTopicsRequest, code: ErrorCode, message: str | None
                  ) -> CreateTopicsResponse:
    return CreateTopicsResponse(throttle_time_ms=0,
                                topics=[_error(t.name, code, message) for t in request.topics])
