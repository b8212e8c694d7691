"""SaslAuthenticate (API key 36), versions 0-2.

Behaviour: on a SASL listener the connection's ``SaslServer`` answers it (``server.py``): one
token of the mechanism's exchange, SASL_AUTHENTICATION_FAILED (after
``connection.failed.authentication.delay.ms``, then the connection closes), and from v1 the
session's lifetime (KIP-368, ``connections.max.reauth.ms``). Here - any other listener, or no
handshake before it - it is answered ILLEGAL_SASL_STATE, as Kafka does.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import SaslAuthenticateRequest, SaslAuthenticateResponse
from ..context import RequestContext

API_KEY = ApiKey.SASL_AUTHENTICATE
VERSIONS = range(0, 3)


async def handle(ctx: RequestContext, request: SaslAuthenticateRequest
                 ) -> SaslAuthenticateResponse:
    raise KafkaError(ErrorCode.ILLEGAL_SASL_STATE,
                     "Unexpected SaslAuthenticate request: no SASL handshake on this connection")


def error_response(request: SaslAuthenticateRequest, code: ErrorCode, message: str | None
                   ) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=code, error_message=message, auth_bytes=b"",
                                    session_lifetime_ms=0)
