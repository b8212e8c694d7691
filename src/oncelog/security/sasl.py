"""A SASL listener's authentication of one connection, as Kafka's SaslServerAuthenticator does
it with SaslHandshake (v1) and SaslAuthenticate (v0-2):

- Before authentication a connection may send ApiVersions and SaslHandshake, then the
  SaslAuthenticate requests of its mechanism; anything else closes it (ILLEGAL_SASL_STATE).
- Mechanisms: PLAIN (``authzid NUL user NUL password``, the password checked against the
  user's salted SCRAM credential - no password is kept, so a PLAIN user is one made with
  ``oncelog users add``), SCRAM-SHA-256 and SCRAM-SHA-512 (``scram.py``), as
  ``sasl.enabled.mechanisms`` lists them.
- A failure answers SASL_AUTHENTICATION_FAILED with the same message for a wrong password and
  an unknown user, after ``connection.failed.authentication.delay.ms``, and closes.
- KIP-368: with ``connections.max.reauth.ms`` set, SaslAuthenticate v1+ tells the client its
  session's lifetime; the client authenticates again on the same connection (as the same
  principal) before it ends, and a request after its end closes the connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from ..config import BrokerConfig, ConfigError
from .credentials import Credentials
from .scram import MECHANISMS, AuthenticationFailed, ScramExchange

SUPPORTED = ("PLAIN", *MECHANISMS)
PLAIN_FAILED = "Authentication failed: Invalid username or password"  # Kafka's words


def sasl_mechanisms(config: BrokerConfig, listener: str) -> tuple[str, ...]:
    """A SASL listener's ``sasl.enabled.mechanisms``, checked: ones oncelog does not serve
    stop the broker naming them."""
    names = tuple(n.strip().upper() for n in
                  str(config.for_listener(listener, "sasl.enabled.mechanisms")).split(",")
                  if n.strip())
    unserved = [n for n in names if n not in SUPPORTED]
    if unserved or not names:
        raise ConfigError(f"listener {listener}: sasl.enabled.mechanisms "
                          f"{','.join(names) or '(empty)'}: oncelog serves "
                          f"{', '.join(SUPPORTED)} (not {', '.join(unserved) or 'none'})")
    return names


class SaslServer:
    """One connection's SASL state: ``handshake(mechanism)``, then ``authenticate(token)``
    until it says the exchange is done; ``principal`` once authenticated."""

    def __init__(self, mechanisms: tuple[str, ...], credentials: Credentials,
                 reauth_ms: int = 0, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.mechanisms = mechanisms
        self.credentials = credentials
        self.reauth_ms = reauth_ms
        self._monotonic = monotonic
        self.mechanism: str | None = None  # chosen by the handshake under way
        self.mechanism_used: str | None = None  # the one the principal authenticated with
        self.principal: str | None = None  # "User:name" once authenticated
        self.expires_at: float | None = None  # monotonic seconds; None: never
        self.exchanging = False  # a handshake was answered; SaslAuthenticate comes next
        self.raw_tokens = False  # after a SaslHandshake v0: tokens come as bare frames
        self._scram: ScramExchange | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def expired(self) -> bool:
        return self.expires_at is not None and self._monotonic() >= self.expires_at

    def handshake(self, mechanism: str, raw_tokens: bool = False) -> bool:
        """Start an exchange with ``mechanism``; False if it is not enabled here. With
        ``raw_tokens`` (SaslHandshake v0) its tokens come as bare frames."""
        if mechanism not in self.mechanisms:
            return False
        if self.authenticated and mechanism != self.mechanism_used:
            return False  # KIP-368: re-authentication keeps the mechanism
        self.mechanism = mechanism
        self.exchanging = True
        self.raw_tokens = raw_tokens and not self.authenticated
        self._scram = None
        return True

    async def authenticate(self, token: bytes) -> tuple[bytes, bool]:
        """One SaslAuthenticate token: (the answer's token, whether authentication is
        complete). AuthenticationFailed with the client's message on failure."""
        mechanism = self.mechanism
        assert mechanism is not None and self.exchanging, "authenticate before handshake"
        if mechanism == "PLAIN":
            user = await self._plain(token)
            return b"", self._complete(user)
        if self._scram is None:
            self._scram = ScramExchange(mechanism, self.credentials.lookup)
            return self._scram.first(token), False
        answer = self._scram.final(token)
        return answer, self._complete(self._scram.username)

    async def _plain(self, token: bytes) -> str:
        parts = token.split(b"\x00")
        if len(parts) != 3 or not parts[1]:
            raise AuthenticationFailed("Invalid SASL/PLAIN request: expected 3 tokens")
        try:
            authzid, user, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN request: not UTF-8") from None
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an "
                                       "authorization id that is different from username")
        credentials = self.credentials.of_user(user)
        if not credentials:
            raise AuthenticationFailed(PLAIN_FAILED)
        mechanism, credential = credentials[0]  # any of the user's: one password made both
        # one PBKDF2 (milliseconds of CPU): off the event loop
        if not await asyncio.to_thread(credential.matches_password, mechanism, password):
            raise AuthenticationFailed(PLAIN_FAILED)
        return user

    def _complete(self, user: str) -> bool:
        principal = f"User:{user}"
        if self.authenticated and principal != self.principal:
            raise AuthenticationFailed("Cannot change principals during re-authentication "
                                       f"from {self.principal}: {principal}")
        self.principal = principal
        self.mechanism_used = self.mechanism
        self.exchanging = False
        self.raw_tokens = False
        self._scram = None
        self.expires_at = (self._monotonic() + self.reauth_ms / 1000) if self.reauth_ms else None
        return True

    def session_lifetime_ms(self) -> int:
        return self.reauth_ms if self.authenticated else 0
