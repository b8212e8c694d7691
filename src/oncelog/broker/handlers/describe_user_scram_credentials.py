"""DescribeUserScramCredentials (API key 50), version 0.

Behaviour: each user's SCRAM mechanisms and iterations, never a credential, as Kafka answers
(``broker.users``): every user for an empty or null list, RESOURCE_NOT_FOUND and
DUPLICATE_RESOURCE per user with Kafka's messages.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import (DescribeUserScramCredentialsRequest,
                                  DescribeUserScramCredentialsResponse)
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
VERSIONS = range(0, 1)
Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult


async def handle(ctx: RequestContext, request: DescribeUserScramCredentialsRequest
                 ) -> DescribeUserScramCredentialsResponse:
    if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    names = None if request.users is None else [user.name for user in request.users]
    results = [Result(user=user, error_code=code, error_message=message, credential_infos=[
        Result.CredentialInfo(mechanism=mechanism, iterations=iterations)
        for mechanism, iterations in infos])
        for user, code, message, infos in ctx.services.scram_users.describe(names)]
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                error_message=None, results=results)


def error_response(request: DescribeUserScramCredentialsRequest, code: ErrorCode,
                   message: str | None) -> DescribeUserScramCredentialsResponse:
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=code,
                                                error_message=message, results=[])
