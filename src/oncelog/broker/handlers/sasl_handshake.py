"""SaslHandshake (API key 17), versions 0-1.

Behaviour: on a SASL listener the connection's ``SaslServer`` answers it (``server.py``, which
never hands it to this module): the mechanism is chosen, or UNSUPPORTED_SASL_MECHANISM with
the mechanisms enabled. Here - a PLAINTEXT or SSL listener, or a SASL connection that is not
in a state to start an exchange - it is answered ILLEGAL_SASL_STATE, as Kafka does. After a
v0 handshake the mechanism's tokens follow as bare size-prefixed frames, not requests
(``server.py`` reads them so); v1 clients send them in SaslAuthenticate.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import SaslHandshakeRequest, SaslHandshakeResponse
from ..context import RequestContext

API_KEY = ApiKey.SASL_HANDSHAKE
VERSIONS = range(0, 2)


async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    raise KafkaError(ErrorCode.ILLEGAL_SASL_STATE, "Unexpected SASL handshake request")


def error_response(request: SaslHandshakeRequest, code: ErrorCode, message: str | None
                   ) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=code, mechanisms=[])
