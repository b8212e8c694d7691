"""AlterUserScramCredentials (API key 51), version 0.

Behaviour: deletions and upsertions of users' SCRAM credentials in the metadata store (the
data directory's file, or ZooKeeper, where every broker sees them), with Kafka's validation
and error codes (``broker.users``). An upsertion carries a salted password the client made;
only StoredKey and ServerKey are kept.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import (AlterUserScramCredentialsRequest,
                                  AlterUserScramCredentialsResponse, as_bytes)
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
VERSIONS = range(0, 1)
Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


async def handle(ctx: RequestContext, request: AlterUserScramCredentialsRequest
                 ) -> AlterUserScramCredentialsResponse:
    if not ctx.allowed(AclOperation.ALTER, ResourceType.CLUSTER):
        return error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    outcomes = await ctx.services.scram_users.alter(
        [(d.name, d.mechanism) for d in request.deletions],
        [(u.name, u.mechanism, u.iterations, as_bytes(u.salt), as_bytes(u.salted_password))
         for u in request.upsertions])
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        Result(user=o.user, error_code=o.error_code, error_message=o.error_message)
        for o in outcomes])


def error_response(request: AlterUserScramCredentialsRequest, code: ErrorCode,
                   message: str | None) -> AlterUserScramCredentialsResponse:
    users = dict.fromkeys([d.name for d in request.deletions]
                          + [u.name for u in request.upsertions])
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        Result(user=user, error_code=code, error_message=message) for user in users])
