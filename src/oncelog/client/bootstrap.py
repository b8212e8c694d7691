"""The bootstrap address, parsed and checked before a client is built.

librdkafka answers an address it cannot use by retrying quietly until a request times out:
a refused port, a name that does not resolve and a typo all end, 10-30 s later, in
``Local: Broker transport failure`` or ``Local: Message timed out``. So before a command
builds a client, ``check_bootstrap`` finds out itself, in at most ``timeout_s`` per server:

1. ``parse_bootstrap``: each comma-separated entry is ``HOST:PORT`` (``[::1]:9092`` for
   IPv6), the port a number from 1 to 65535; otherwise ``ValueError`` naming the entry.
2. The name resolves (``getaddrinfo``), a TCP connection opens, and the server answers an
   ApiVersions request (a stopped or hung process accepts connections through the kernel
   but never answers) - the first server that does is enough, as for the clients.
   With ``security`` (librdkafka settings, ``client.security``) naming SSL or SASL_SSL the
   request goes over TLS, verified as librdkafka verifies (the authority of
   ``ssl.ca.location``, the host name unless ``ssl.endpoint.identification.algorithm`` is
   ``none``, a client certificate when one is set), so a certificate the client would refuse
   is named here. With SASL_PLAINTEXT or SASL_SSL it then logs in (SaslHandshake and
   SaslAuthenticate, with PLAIN or SCRAM and the server's signature checked): librdkafka
   reports a refused password as ``Broker transport failure`` after its timeout, so a wrong
   user or password is named here, as the broker's error message, instead.
3. Otherwise ``BrokerUnreachable``: one sentence naming the address and the cause in words
   (connection refused, the name does not resolve, timed out, no route to host), never an
   errno or an exception's name.
"""

from __future__ import annotations

import errno
import socket
import ssl
import struct
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..net.connector import Connector

# ApiVersions v0 with request header v1 (Kafka's protocol guide): size, api_key 18,
# api_version 0, correlation_id, client_id; the v0 body is empty. Any broker of any version
# answers it (KIP-511 keeps v0 for exactly this), so it tells a Kafka broker from a port
# that only accepts connections.
_CLIENT_ID = b"oncelog-cli"
_PROBE_CORRELATION_ID = 1
_API_VERSIONS_V0 = struct.pack(">ihhih", 2 + 2 + 4 + 2 + len(_CLIENT_ID), 18, 0,
                               _PROBE_CORRELATION_ID, len(_CLIENT_ID)) + _CLIENT_ID


class BrokerUnreachable(ConnectionError):
    """No server of a bootstrap list answers; the message is one sentence saying why."""


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``"h1:9092,[::1]:9093"`` -> ``[("h1", 9092), ("::1", 9093)]``; ValueError naming the
    entry that is not HOST:PORT."""
    servers = []
    for entry in bootstrap.split(","):
        entry = entry.strip()
        host, colon, port = entry.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not colon or not host:
            raise ValueError(f"{entry!r} is not HOST:PORT, such as 127.0.0.1:9092")
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"{entry!r} is not HOST:PORT: the port {port!r} is not a "
                             "number from 1 to 65535")
        servers.append((host, int(port)))
    return servers


def check_bootstrap(bootstrap: str, timeout_s: float = 3.0,
                    security: Mapping[str, str] | None = None) -> None:
    """Return once a server of ``bootstrap`` answers as a Kafka broker; raise ValueError for a
    malformed list, ``BrokerUnreachable`` when no server answers."""
    causes = []
    security = security or {}
    tls = _tls_context(security)
    login = _Login.of(security)
    for host, port in parse_bootstrap(bootstrap):
        cause = _unreachable_cause(host, port, timeout_s, tls, login)
        if cause is None:
            return
        causes.append((f"[{host}]:{port}" if ":" in host else f"{host}:{port}", cause))
    if len(causes) == 1:
        verb = "log in to" if causes[0][1].startswith("SASL") else "reach"
        raise BrokerUnreachable(f"cannot {verb} a broker at {causes[0][0]}: {causes[0][1]}")
    raise BrokerUnreachable("cannot reach a broker at "
                            + ", nor at ".join(f"{address} ({cause})" for address, cause in causes))


def connector_for(security: Mapping[str, str]) -> Connector:
    """The connector (``net.connector``) that speaks what librdkafka's ``security`` settings
    say - for the requests oncelog's CLI sends itself (``client.transactions``,
    ``client.metadata``): the same TLS context the bootstrap probe checks with, the SASL
    user and mechanism."""
    from ..net.connector import Connector
    from ..security.login import SaslLogin
    protocol = security.get("security.protocol", "PLAINTEXT").upper()
    login = (SaslLogin(security["sasl.mechanism"], security["sasl.username"],
                       security["sasl.password"]) if protocol.startswith("SASL_") else None)
    return Connector(protocol, _tls_context(security), login)


def _tls_context(security: Mapping[str, str]) -> ssl.SSLContext | None:
    """What librdkafka would verify with these settings; None for a plaintext protocol."""
    if security.get("security.protocol", "PLAINTEXT") not in ("SSL", "SASL_SSL"):
        return None
    try:
        context = ssl.create_default_context(cafile=security.get("ssl.ca.location"))
    except (ssl.SSLError, OSError):
        raise ValueError(f"ssl.ca.location {security['ssl.ca.location']} is not a PEM "
                         "certificate") from None
    if security.get("ssl.endpoint.identification.algorithm") == "none":
        context.check_hostname = False
    if security.get("enable.ssl.certificate.verification", "true").lower() == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if "ssl.keystore.location" in security:  # PKCS#12: ssl wants PEM files
        _load_pkcs12(context, security["ssl.keystore.location"],
                     security.get("ssl.keystore.password"))
    if "ssl.certificate.location" in security:
        try:
            context.load_cert_chain(security["ssl.certificate.location"],
                                    security.get("ssl.key.location"),
                                    security.get("ssl.key.password"))
        except (ssl.SSLError, OSError):
            raise ValueError(f"cannot use the client certificate "
                             f"{security['ssl.certificate.location']} with its key (a PEM "
                             "certificate and key, ssl.key.password for an encrypted "
                             "key)") from None
    return context


def _load_pkcs12(context: ssl.SSLContext, location: str, password: str | None) -> None:
    """A PKCS#12 keystore's key and chain into ``context``, through a PEM file only this
    user can read, removed at once."""
    import os
    import tempfile

    from cryptography.hazmat.primitives.serialization import (Encoding, NoEncryption,
                                                              PrivateFormat, pkcs12)
    try:
        with open(location, "rb") as file:
            key, certificate, chain = pkcs12.load_key_and_certificates(
                file.read(), password.encode() if password else None)
    except (OSError, ValueError):
        raise ValueError(f"cannot read the PKCS#12 keystore {location} (a wrong "
                         "ssl.keystore.password?)") from None
    if key is None or certificate is None:
        raise ValueError(f"the PKCS#12 keystore {location} holds no key and certificate")
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) + b"".join(
        c.public_bytes(Encoding.PEM) for c in [certificate, *chain])
    descriptor, path = tempfile.mkstemp(suffix=".pem")  # mode 0600
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(pem)
        context.load_cert_chain(path)
    finally:
        os.unlink(path)


def _unreachable_cause(host: str, port: int, timeout_s: float,
                       tls: ssl.SSLContext | None = None,
                       login: _Login | None = None) -> str | None:
    """None when ``host:port`` answers ApiVersions within ``timeout_s``, else why not."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return f"the name {host} does not resolve"
    deadline = time.monotonic() + timeout_s
    try:
        connection = socket.create_connection((host, port), timeout=timeout_s)
    except TimeoutError:
        return f"connecting timed out after {timeout_s:g} s"
    except OSError as error:
        return describe_os_error(error)
    if tls is not None:
        try:
            connection = tls.wrap_socket(connection, server_hostname=host)
        except ssl.SSLCertVerificationError as error:
            connection.close()
            return f"its TLS certificate is not trusted: {error.verify_message}"
        except (ssl.SSLError, OSError) as error:
            connection.close()
            return ("the TLS handshake failed "
                    f"({getattr(error, 'reason', None) or describe_os_error(error)}); is "
                    "it a TLS listener?")
    with connection:
        try:
            connection.settimeout(max(deadline - time.monotonic(), 0.5))
            connection.sendall(_API_VERSIONS_V0)
            answer = _receive(connection, 8)  # the response's size and correlation id
            if login is not None and len(answer) == 8 and \
                    struct.unpack(">ii", answer)[1] == _PROBE_CORRELATION_ID:
                _receive(connection, struct.unpack(">i", answer[:4])[0] - 4)
                try:
                    return login.refused(connection)
                except (KeyError, ValueError, IndexError, struct.error):
                    return "it does not answer SASL authentication as a Kafka broker does"
        except TimeoutError:
            return (f"it accepts connections but timed out after {timeout_s:g} s without "
                    "answering, as a stopped or overloaded process does")
        except ssl.SSLError as error:  # TLS 1.3: a refused client certificate comes here
            hint = ("; does it require a client certificate (ssl.keystore.location)?"
                    if "CERTIFICATE" in str(error.reason) else "")
            return f"the broker ended the TLS connection ({error.reason}){hint}"
        except OSError as error:
            return describe_os_error(error)
    if len(answer) < 8 or struct.unpack(">ii", answer)[1] != _PROBE_CORRELATION_ID:
        if tls is not None and not answer:
            return ("it closed the TLS connection without answering, as a listener with "
                    "ssl.client.auth=required does to a client without a certificate "
                    "(ssl.keystore.location)")
        if tls is None:
            return ("it accepts connections but does not answer as a Kafka broker (a TLS "
                    "listener answers only security.protocol=SSL or SASL_SSL, set in "
                    "--command-config)")
        return "it accepts connections but does not answer as a Kafka broker"
    return None


class _Login:
    """SASL's two requests as the client sends them (SaslHandshake v1, SaslAuthenticate v1:
    request header v1, Kafka's protocol guide), with PLAIN or SCRAM (RFC 5802)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism, self.username, self.password = mechanism, username, password
        self._correlation = _PROBE_CORRELATION_ID

    @classmethod
    def of(cls, security: Mapping[str, str]) -> _Login | None:
        if not security.get("security.protocol", "").startswith("SASL"):
            return None
        return cls(security.get("sasl.mechanism", ""), security.get("sasl.username", ""),
                   security.get("sasl.password", ""))

    def refused(self, connection: socket.socket) -> str | None:
        """None once logged in; else why not, in the broker's words where it gave some."""
        body = self._ask(connection, 17, _string(self.mechanism))  # SaslHandshake
        (error,) = struct.unpack(">h", body[:2])
        if error:
            count = struct.unpack(">i", body[2:6])[0]
            offered, at = [], 6
            for _ in range(max(count, 0)):
                (size,) = struct.unpack(">h", body[at:at + 2])
                offered.append(body[at + 2:at + 2 + size].decode())
                at += 2 + size
            return (f"it does not offer sasl.mechanism {self.mechanism} (it offers "
                    f"{', '.join(offered) or 'none'})")
        if self.mechanism == "PLAIN":
            return self._authenticate(connection, f"\0{self.username}\0{self.password}"
                                      .encode())[0]
        from ..security.scram import AuthenticationFailed, ScramClient
        scram = ScramClient(self.mechanism, self.username, self.password)
        failed, server_first = self._authenticate(connection, scram.first())
        if failed:
            return failed
        try:
            final = scram.final(server_first)
        except AuthenticationFailed as error:
            return f"its SCRAM answer is not one a broker sends: {error}"
        failed, server_final = self._authenticate(connection, final)
        if failed:
            return failed
        try:
            scram.verify(server_final)
        except AuthenticationFailed:
            return "its SCRAM answer does not prove it knows the user's credential"
        return None

    def _authenticate(self, connection: socket.socket, token: bytes) -> tuple[str | None, bytes]:
        body = self._ask(connection, 36, struct.pack(">i", len(token)) + token)
        error, size = struct.unpack(">hh", body[:4])
        text = body[4:4 + size].decode("utf-8", "replace") if size >= 0 else ""
        at = 4 + max(size, 0)
        (length,) = struct.unpack(">i", body[at:at + 4])
        if error:
            return (f"SASL authentication of {self.username} with {self.mechanism} failed"
                    + (f": {text}" if text else "")), b""
        return None, body[at + 4:at + 4 + max(length, 0)]

    def _ask(self, connection: socket.socket, api_key: int, body: bytes) -> bytes:
        self._correlation += 1
        header = struct.pack(">hhi", api_key, 1, self._correlation) + _string(
            _CLIENT_ID.decode())
        connection.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size_and_id = _receive(connection, 8)
        if len(size_and_id) < 8:  # closed: a failed authentication ends so
            raise ConnectionResetError(errno.ECONNRESET, "closed during authentication")
        size, correlation = struct.unpack(">ii", size_and_id)
        if correlation != self._correlation:
            raise ConnectionResetError(errno.ECONNRESET, "an answer to another request")
        return _receive(connection, size - 4)


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _receive(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            break  # closed by the other side: not a Kafka broker
        data += chunk
    return data


_CAUSES = {
    errno.ECONNREFUSED: "connection refused, nothing listens on that port",
    errno.ECONNRESET: "the connection was reset",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "the network is unreachable",
    errno.EADDRNOTAVAIL: "the address is not available",
}


def describe_os_error(error: BaseException) -> str:
    """Words for a connection failure: what a user can act on, not an errno."""
    if isinstance(error, socket.gaierror):
        return "the name does not resolve"
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, OSError) and error.errno in _CAUSES:
        return _CAUSES[error.errno]
    if isinstance(error, OSError) and error.strerror:
        return error.strerror[0].lower() + error.strerror[1:]
    return "the connection failed"


def describe_connection_error(error: ConnectionError) -> str:
    """A ``BrokerClient``'s ConnectionError in words. It raises a ConnectionError of its own
    from inside its ``except`` block, so the socket's error that says why is its context."""
    address = str(error).split(": ", 1)[0]
    cause = error.__context__
    if isinstance(cause, OSError):  # refused, reset, timed out (TimeoutError is an OSError)
        return f"{address}: {describe_os_error(cause)}"
    if isinstance(cause, EOFError):
        return f"{address}: the broker closed the connection"
    return str(error)
