"""DescribeConfigs (API key 32), versions 1-4.

Behaviour: real entries. For a topic (resource type 2): every topic config with its effective
value and source (TOPIC_CONFIG for an override, STATIC_BROKER_CONFIG when the broker-level
config was set, DEFAULT_CONFIG otherwise) and, when asked, the synonyms behind it. For a broker
(type 4): its configs, named by this broker's id (or "" for cluster defaults); another id is
INVALID_REQUEST; every broker config is read-only (none changes while the broker runs).
``configuration_keys`` filters; an unknown resource type is INVALID_REQUEST.
Version notes: v3 adds config types and documentation.
"""

from __future__ import annotations

from ...config import ConfigEntry, describe_broker_configs, describe_topic_configs
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import DescribeConfigsRequest, DescribeConfigsResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = range(1, 5)

TOPIC, BROKER = 2, 4

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym


async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        try:
            entries = _entries(ctx, resource.resource_type, resource.resource_name)
        except KafkaError as error:
            results.append(_result(resource, error.code, error.message, []))
            continue
        keys = resource.configuration_keys
        if keys is not None:
            entries = [e for e in entries if e.name in set(keys)]
        # oncelog changes no broker config while it runs (no AlterConfigs): all read-only,
        # as Kafka marks its broker configs that are not dynamic
        read_only = resource.resource_type == BROKER
        configs = [_entry(e, request.include_synonyms, request.include_documentation, read_only)
                   for e in entries]
        results.append(_result(resource, ErrorCode.NONE, None, configs))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _entries(ctx: RequestContext, resource_type: int, name: str) -> list[ConfigEntry]:
    if resource_type == TOPIC and not ctx.allowed(AclOperation.DESCRIBE_CONFIGS,
                                                  ResourceType.TOPIC, name):
        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if resource_type == BROKER and not ctx.allowed(AclOperation.DESCRIBE_CONFIGS,
                                                   ResourceType.CLUSTER):
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if resource_type == TOPIC:
        topic = ctx.services.partitions.get_topic(name)
        return describe_topic_configs(ctx.services.config, topic.record.configs)
    if resource_type == BROKER:
        if name not in ("", str(ctx.services.node_id)):
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"this is broker {ctx.services.node_id}, not {name!r}")
        return describe_broker_configs(ctx.services.config)
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"resource type {resource_type} is not supported")


def _entry(entry: ConfigEntry, synonyms: bool, documentation: bool, read_only: bool) -> Entry:
    return Entry(name=entry.name, value=entry.value, read_only=read_only,
                 config_source=entry.source,
                 is_sensitive=entry.sensitive,
                 synonyms=[Synonym(name=n, value=v, source=s) for n, v, s in entry.synonyms]
                 if synonyms else [],
                 config_type=entry.config_type,
                 documentation=entry.doc if documentation else None)


def _result(resource: DescribeConfigsRequest.DescribeConfigsResource, code: ErrorCode,
            message: str | None, configs: list[Entry]) -> Result:
    return Result(error_code=code, error_message=message, resource_type=resource.resource_type,
                  resource_name=resource.resource_name, configs=configs)


def error_response(request: DescribeConfigsRequest, code: ErrorCode, message: str | None
                  ) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(throttle_time_ms=0, results=[
        _result(r, code, message, []) for r in request.resources])
