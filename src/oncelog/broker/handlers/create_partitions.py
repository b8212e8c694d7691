"""CreatePartitions (API key 37), versions 0-3.

Behaviour: grows a topic to ``count`` partitions (INVALID_PARTITIONS unless larger than
now); a manual assignment must place every new partition on this broker
(INVALID_REPLICA_ASSIGNMENT); unknown topics are UNKNOWN_TOPIC_OR_PARTITION (after asking
the metadata store: another broker may have created it a moment ago); a topic named twice is
INVALID_REQUEST. ``validate_only`` changes nothing. A store that does not answer within the
request's ``timeout_ms`` is REQUEST_TIMED_OUT.
"""

from __future__ import annotations

from collections import Counter

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import CreatePartitionsRequest, CreatePartitionsResponse
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.CREATE_PARTITIONS
VERSIONS = range(0, 4)

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in request.topics)
    results = []
    # as Kafka's controller: Alter on the cluster covers every topic
    on_cluster = ctx.allowed(AclOperation.ALTER, ResourceType.CLUSTER, log_denial=False)
    for topic in request.topics:
        try:
            if counts[topic.name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"topic {topic.name!r} appears more than once in the request")
            if not on_cluster and not ctx.allowed(AclOperation.ALTER, ResourceType.TOPIC,
                                                  topic.name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                 "Authorization failed.")
            assignment = [list(a.broker_ids) for a in topic.assignments or []] or None
            await ctx.services.partitions.create_partitions(
                topic.name, topic.count, request.validate_only,
                live_brokers=list(ctx.services.brokers.live), assignment=assignment,
                timeout_s=request.timeout_ms / 1000 if request.timeout_ms > 0 else 30.0)
            results.append(Result(name=topic.name, error_code=ErrorCode.NONE, error_message=None))
        except KafkaError as error:
            results.append(Result(name=topic.name, error_code=error.code,
                                  error_message=error.message))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


def error_response(request: CreatePartitionsRequest, code: ErrorCode, message: str | None
                  ) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(throttle_time_ms=0, results=[
        Result(name=t.name, error_code=code, error_message=message) for t in request.topics])
