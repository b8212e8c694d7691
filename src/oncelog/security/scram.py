"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's broker runs them.

A user's credential is what RFC 5802 lets a server keep instead of a password: a random salt,
the iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``, where ``SaltedPassword`` is PBKDF2 of the
password. It is written as Kafka writes it in ZooKeeper and in ``kafka-storage format
--add-scram``: ``salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=N``.

``ScramExchange`` is one authentication on the server's side: the client's first message
(gs2 header ``n,,``: no channel binding, as Kafka), the server's first (the client's nonce
and ours, the salt, the iterations), the client's final (the proof) checked in constant time,
the server's final (its signature). An unknown user is answered like a known one, with a salt
and iterations derived from the name and a secret of this process, and fails at the proof
with the same message as a wrong password: nothing tells whether a user exists.

``ScramClient`` is the other side, for a broker authenticating to another broker
(``net.connector``): the client-first message (``n,,n=user,r=nonce``), the client-final with
its proof once the server's salt and iterations are known, and the server-final's signature
checked - a server that does not know the password's keys cannot forge it, so a client never
talks on to an impostor (RFC 5802 section 3). Iteration counts outside Kafka's bounds are
refused before any PBKDF2 is run: a hostile server cannot make a broker spin.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's bounds for both mechanisms
DEFAULT_ITERATIONS = 4096
_UNKNOWN_USER_SECRET = os.urandom(32)  # the fake credentials of unknown users derive from it


class AuthenticationFailed(Exception):
    """The exchange failed; the message is what the client is told (no more than Kafka's)."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        digest = MECHANISMS[mechanism]
        salt = salt if salt is not None else os.urandom(32)
        salted = salted_password(digest, password.encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", digest)
        return cls(salt, hashlib.new(digest, client_key).digest(),
                   hmac.digest(salted, b"Server Key", digest), iterations)

    def to_text(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                       base64.b64decode(fields["server_key"]), int(fields["iterations"]))
        except (KeyError, ValueError) as error:
            raise ValueError(f"not a SCRAM credential ({error})") from None

    def matches_password(self, mechanism: str, password: str) -> bool:
        """Whether ``password`` is this credential's (SASL/PLAIN checks passwords so: only
        salted credentials are ever kept). Costs one PBKDF2: run it off the event loop."""
        digest = MECHANISMS[mechanism]
        salted = salted_password(digest, password.encode(), self.salt, self.iterations)
        client_key = hmac.digest(salted, b"Client Key", digest)
        return hmac.compare_digest(hashlib.new(digest, client_key).digest(), self.stored_key)


def salted_password(digest: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(digest, password, salt, iterations)


def _attributes(message: str) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise AuthenticationFailed(f"invalid SCRAM message attribute {part[:20]!r}")
        attributes.setdefault(part[0], part[2:])
    return attributes


def _username(encoded: str) -> str:
    """RFC 5802's saslname: '=2C' is ',' and '=3D' is '='; any other '=' is invalid."""
    if "=" in encoded.replace("=2C", "").replace("=3D", ""):
        raise AuthenticationFailed("invalid username encoding")
    return encoded.replace("=2C", ",").replace("=3D", "=")


class ScramExchange:
    """One SCRAM authentication, server side: ``first(client_first)`` -> server-first,
    ``final(client_final)`` -> server-final; ``username`` once the first message is read.
    Raises AuthenticationFailed with the message the client gets."""

    def __init__(self, mechanism: str,
                 lookup: Callable[[str, str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self.digest = MECHANISMS[mechanism]
        self._lookup = lookup
        self.username = ""
        self._credential: ScramCredential | None = None
        self._known = False
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.done = False

    def first(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("invalid SCRAM client-first message") from None
        gs2, sep, bare = text.partition(",")
        authzid, sep2, bare = bare.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y"):
            raise AuthenticationFailed("invalid SCRAM client-first message: channel binding "
                                       "is not supported")
        attributes = _attributes(bare)
        if "m" in attributes or "n" not in attributes or "r" not in attributes:
            raise AuthenticationFailed("invalid SCRAM client-first message")
        self.username = _username(attributes["n"])
        if authzid and authzid != f"a={attributes['n']}":
            raise AuthenticationFailed("the authorization id is not the user")
        extensions = {k: v for k, v in attributes.items() if k not in "nr"}
        if extensions.get("tokenauth", "").lower() == "true":
            raise AuthenticationFailed("delegation tokens are not supported")
        credential = self._lookup(self.username, self.mechanism)
        self._known = credential is not None
        self._credential = credential or self._unknown_user_credential(self.username)
        self._client_first_bare = bare
        self._nonce = attributes["r"] + secrets.token_urlsafe(24)
        self._server_first = (f"r={self._nonce},s="
                              f"{base64.b64encode(self._credential.salt).decode()},"
                              f"i={self._credential.iterations}")
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        assert self._credential is not None, "final() before first()"
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("invalid SCRAM client-final message") from None
        without_proof, sep, proof_part = text.rpartition(",p=")
        attributes = _attributes(without_proof) if sep else {}
        # The nonce must end with ours, as Kafka's ScramSaslServer checks it: librdkafka
        # (2.0) sends its own nonce again before the combined one.
        if not sep or not attributes.get("r", "").endswith(self._nonce) or attributes.get(
                "c") not in ("biws", "eSws"):  # base64 of "n,," and "y,,"
            raise self._failed()
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise self._failed() from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(self._credential.stored_key, auth_message, self.digest)
        if len(proof) != len(signature):
            raise self._failed()
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        expected = hashlib.new(self.digest, client_key).digest()
        if not hmac.compare_digest(expected, self._credential.stored_key) or not self._known:
            raise self._failed()
        self.done = True
        server_signature = hmac.digest(self._credential.server_key, auth_message, self.digest)
        return b"v=" + base64.b64encode(server_signature)

    def _failed(self) -> AuthenticationFailed:
        # Kafka's words, for a wrong password and an unknown user alike
        return AuthenticationFailed(f"Authentication failed during authentication due to "
                                    f"invalid credentials with SASL mechanism {self.mechanism}")

    def _unknown_user_credential(self, username: str) -> ScramCredential:
        seed = hmac.digest(_UNKNOWN_USER_SECRET, username.encode(), "sha256")
        digest_size = hashlib.new(self.digest).digest_size
        return ScramCredential(seed, os.urandom(digest_size), os.urandom(digest_size),
                               DEFAULT_ITERATIONS)


class ScramClient:
    """One SCRAM authentication, client side: ``first()`` -> client-first,
    ``final(server_first)`` -> client-final, ``verify(server_final)``. Raises
    AuthenticationFailed naming what was wrong with the server's answer. ``final`` costs one
    PBKDF2 (milliseconds): run it off the event loop."""

    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.digest = MECHANISMS[mechanism]
        self.username = username
        self._password = password
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._client_first_bare = ""
        self._server_signature = b""

    def __repr__(self) -> str:  # never the password
        return f"ScramClient({self.mechanism}, {self.username!r})"

    def first(self) -> bytes:
        name = self.username.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={name},r={self._nonce}"
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        assert self._client_first_bare, "final() before first()"
        try:
            text = server_first.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("the server's SCRAM first message is not UTF-8") from None
        if text.startswith("e="):
            raise AuthenticationFailed(f"the server refused: {text[2:]}")
        attributes = _attributes(text)
        nonce, salt_text, iterations_text = (attributes.get(k, "") for k in "rsi")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise AuthenticationFailed("the server's SCRAM nonce does not extend ours")
        try:
            salt = base64.b64decode(salt_text, validate=True)
            iterations = int(iterations_text)
        except ValueError:
            raise AuthenticationFailed("the server's SCRAM salt or iteration count is "
                                       "unreadable") from None
        if not salt or not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise AuthenticationFailed(f"the server asks for {iterations} SCRAM iterations; "
                                       f"Kafka's bounds are {MIN_ITERATIONS}-{MAX_ITERATIONS}")
        salted = salted_password(self.digest, self._password.encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", self.digest)
        stored_key = hashlib.new(self.digest, client_key).digest()
        without_proof = f"c=biws,r={nonce}"  # biws: base64 of the gs2 header "n,,"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_signature = hmac.digest(stored_key, auth_message, self.digest)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature))
        server_key = hmac.digest(salted, b"Server Key", self.digest)
        self._server_signature = hmac.digest(server_key, auth_message, self.digest)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """The server's signature, checked: only a server that holds our credential's
        ServerKey can write it."""
        assert self._server_signature, "verify() before final()"
        try:
            attributes = _attributes(server_final.decode("utf-8"))
        except UnicodeDecodeError:
            raise AuthenticationFailed("the server's SCRAM final message is not UTF-8") from None
        if "e" in attributes:
            raise AuthenticationFailed(f"the server refused: {attributes['e']}")
        try:
            signature = base64.b64decode(attributes.get("v", ""), validate=True)
        except ValueError:
            signature = b""
        if not hmac.compare_digest(signature, self._server_signature):
            raise AuthenticationFailed("the server's SCRAM signature is wrong: it does not "
                                       "hold this user's credential")
