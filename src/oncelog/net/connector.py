"""How a broker reaches the other brokers: the inter-broker listener's security protocol,
spoken by every connection a broker opens to another (a follower's fetcher, the transaction
markers, the transaction verifier).

A ``Connector`` is made once, in ``Broker.__init__``, from the config (``inter_broker``): the
TLS client context for SSL and SASL_SSL (``security.tls.client_context``: the truststore,
the broker's own keystore for mutual TLS, the host name checked as
``ssl.endpoint.identification.algorithm`` says) and the SASL login for SASL_PLAINTEXT and
SASL_SSL (``security.login``). Each part that opens connections is handed it at construction
and asks it for clients (``client``); nothing reaches through the broker for it.

A SASL connection authenticates before its first request, as Kafka's
``SaslClientAuthenticator``: SaslHandshake v1 naming the mechanism, then SaslAuthenticate v1
tokens - PLAIN's one (``NUL user NUL password``) or SCRAM's two (``security.scram.
ScramClient``, whose PBKDF2 runs in a thread, off the event loop), the server's signature
checked. A session the server limits (KIP-368's ``session_lifetime_ms``) is ended by the
client before it runs out: the connection is closed and the next request opens and
authenticates a new one.

A refused authentication is not retried at once: the same answer is raised without a
connection for ``AUTHENTICATION_RETRY_S`` (doubling to ``AUTHENTICATION_RETRY_MAX_S``), so a
broker with a wrong password makes a few attempts a minute, not one per fetch back-off, and
says why once (the callers log ConnectionErrors on change, not per attempt).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..config import BrokerConfig
from ..protocol.errors import ErrorCode
from ..protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest
from ..security.login import SaslLogin, inter_broker_login
from ..security.scram import AuthenticationFailed, ScramClient
from ..security.tls import client_context

if TYPE_CHECKING:
    from .client import BrokerClient

SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 1  # v1: the session's lifetime (KIP-368); v2 is only flexible
AUTHENTICATION_RETRY_S = 2.0
AUTHENTICATION_RETRY_MAX_S = 30.0
# a session is ended this far before the server's limit (Kafka's clients re-authenticate at
# 85-95 % of it)
SESSION_USE = 0.85

Exchange = Callable[[Any, int], Awaitable[Any]]


class AuthenticationError(ConnectionError):
    """Another broker refused this broker's login (or this broker refused the other's
    proof of who it is): one sentence naming the broker, the user, the mechanism and the
    answer."""


class Connector:
    def __init__(self, protocol: str = "PLAINTEXT", ssl_context: ssl.SSLContext | None = None,
                 login: SaslLogin | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.protocol = protocol
        self.ssl_context = ssl_context
        self.login = login
        self.monotonic = monotonic
        # (host, port) -> (retry no sooner than, the error, the back-off that follows)
        self._refused: dict[tuple[str, int], tuple[float, AuthenticationError, float]] = {}

    def __repr__(self) -> str:
        who = f", as {self.login.username} ({self.login.mechanism})" if self.login else ""
        return f"Connector({self.protocol}{who})"

    def client(self, host: str, port: int, timeout_s: float = 30.0) -> BrokerClient:
        """A client of the broker at ``host``:``port`` that speaks this protocol."""
        from .client import BrokerClient
        return BrokerClient(host, port, timeout_s=timeout_s, connector=self)

    # -- what BrokerClient asks ----------------------------------------------------------

    def check_not_refused(self, host: str, port: int) -> None:
        """Raise the last refusal of ``host``:``port`` again while its back-off runs."""
        refused = self._refused.get((host, port))
        if refused is not None and self.monotonic() < refused[0]:
            raise refused[1]

    async def authenticate(self, host: str, port: int, exchange: Exchange) -> float | None:
        """Log in over a new connection (``exchange`` sends one request and returns its
        response); returns when the session must end (monotonic seconds), or None. Raises
        AuthenticationError when refused, remembering it for the back-off."""
        login = self.login
        assert login is not None, "authenticate without a SASL login"
        try:
            lifetime_ms = await self._sasl(login, exchange)
        except AuthenticationFailed as error:
            raise self._remember(host, port, str(error)) from None
        self._refused.pop((host, port), None)
        if not lifetime_ms:
            return None
        return self.monotonic() + lifetime_ms * SESSION_USE / 1000

    async def _sasl(self, login: SaslLogin, exchange: Exchange) -> int:
        handshake = await exchange(SaslHandshakeRequest(mechanism=login.mechanism),
                                   SASL_HANDSHAKE_VERSION)
        if handshake.error_code != ErrorCode.NONE:
            offered = ", ".join(handshake.mechanisms or []) or "none"
            raise AuthenticationFailed(f"the broker does not offer {login.mechanism} "
                                       f"({ErrorCode(handshake.error_code).name}; it offers "
                                       f"{offered})")
        if login.mechanism == "PLAIN":
            token = f"\x00{login.username}\x00{login.password}".encode()
            answer = await self._token(exchange, token)
            return int(answer.session_lifetime_ms)
        scram = ScramClient(login.mechanism, login.username, login.password)
        server_first = await self._token(exchange, scram.first())
        # one PBKDF2 (milliseconds of CPU): off the event loop
        client_final = await asyncio.to_thread(scram.final, bytes(server_first.auth_bytes))
        server_final = await self._token(exchange, client_final)
        scram.verify(bytes(server_final.auth_bytes))
        return int(server_final.session_lifetime_ms)

    @staticmethod
    async def _token(exchange: Exchange, token: bytes) -> Any:
        answer = await exchange(SaslAuthenticateRequest(auth_bytes=token),
                                SASL_AUTHENTICATE_VERSION)
        if answer.error_code != ErrorCode.NONE:
            raise AuthenticationFailed(answer.error_message
                                       or ErrorCode(answer.error_code).name)
        return answer

    def _remember(self, host: str, port: int, reason: str) -> AuthenticationError:
        login = self.login
        assert login is not None
        error = AuthenticationError(
            f"SASL authentication as {login.username!r} with {login.mechanism} refused: "
            f"{reason} (the inter-broker login: sasl.jaas.config)")
        previous = self._refused.get((host, port))
        backoff = AUTHENTICATION_RETRY_S if previous is None else previous[2]
        self._refused[(host, port)] = (self.monotonic() + backoff, error,
                                       min(backoff * 2, AUTHENTICATION_RETRY_MAX_S))
        return error

    def tls_failed(self, error: ssl.SSLError) -> ConnectionError:
        """A TLS handshake with another broker failed: the reason in one clause."""
        reason = error.reason or str(error)
        if getattr(error, "verify_message", None):
            reason = f"{reason}: {error.verify_message}"  # type: ignore[attr-defined]
        return ConnectionError(f"TLS handshake failed: {reason} (the inter-broker listener's "
                               "ssl.truststore.location, ssl.keystore.location, "
                               "ssl.endpoint.identification.algorithm)")


PLAINTEXT = Connector()


def inter_broker(config: BrokerConfig, listener: str, protocol: str) -> Connector:
    """The connector for brokers reaching each other on ``listener`` (its security
    ``protocol``); ConfigError naming the setting when it cannot be made."""
    context = client_context(config, listener) if protocol in ("SSL", "SASL_SSL") else None
    login = inter_broker_login(config, listener) if protocol.startswith("SASL_") else None
    return Connector(protocol, context, login)
