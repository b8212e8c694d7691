"""DeleteTopics (API key 20), versions 1-6.

Behaviour: deletes each named topic's partitions and files; an unknown name is
UNKNOWN_TOPIC_OR_PARTITION; deletion disabled by ``delete.topic.enable=false`` is
TOPIC_DELETION_DISABLED; a metadata store that does not answer within the request's
``timeout_ms`` is REQUEST_TIMED_OUT (the deletion may still happen). A topic this broker has
not heard of yet is looked up in the store first. Waiting fetches on a deleted partition are
woken and then see UNKNOWN_TOPIC_OR_PARTITION.
Version notes: v6 names topics in a struct that may carry a topic id instead of a name;
lookups by id answer UNKNOWN_TOPIC_ID until topic ids are supported end to end.
"""

from __future__ import annotations

import uuid

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.DELETE_TOPICS
VERSIONS = range(1, 7)

Result = DeleteTopicsResponse.DeletableTopicResult
ZERO_UUID = uuid.UUID(int=0)


def _names(request: DeleteTopicsRequest, version: int) -> list[str | None]:
    if version >= 6:
        return [t.name for t in request.topics]
    return list(request.topic_names)


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    results = []
    # as Kafka's controller: Delete on the cluster covers every topic
    on_cluster = ctx.allowed(AclOperation.DELETE, ResourceType.CLUSTER, log_denial=False)
    for name in _names(request, ctx.api_version):
        if name is None:
            results.append(Result(name=None, topic_id=ZERO_UUID,
                                  error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                  error_message="deletion by topic id is not supported"))
            continue
        if not on_cluster and not ctx.allowed(AclOperation.DELETE, ResourceType.TOPIC, name):
            results.append(Result(name=name, topic_id=ZERO_UUID,
                                  error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  error_message="Authorization failed."))
            continue
        try:
            topic = await ctx.services.partitions.delete_topic(
                name, request.timeout_ms / 1000 if request.timeout_ms > 0 else 30.0)
        except KafkaError as error:
            results.append(Result(name=name, topic_id=ZERO_UUID, error_code=error.code,
                                  error_message=error.message))
            continue
        results.append(Result(name=name, topic_id=uuid.UUID(topic.record.topic_id),
                              error_code=ErrorCode.NONE, error_message=None))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


def error_response(request: DeleteTopicsRequest, code: ErrorCode, message: str | None
                  ) -> DeleteTopicsResponse:
    names = [t.name for t in request.topics or []] or list(request.topic_names or [])
    return DeleteTopicsResponse(throttle_time_ms=0, responses=[
        Result(name=name, topic_id=ZERO_UUID, error_code=code, error_message=message)
        for name in names])
