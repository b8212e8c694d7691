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
   is named here. SASL needs nothing more: Kafka answers ApiVersions before authentication.
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
    tls = _tls_context(security or {})
    for host, port in parse_bootstrap(bootstrap):
        cause = _unreachable_cause(host, port, timeout_s, tls)
        if cause is None:
            return
        causes.append((f"[{host}]:{port}" if ":" in host else f"{host}:{port}", cause))
    if len(causes) == 1:
        raise BrokerUnreachable(f"cannot reach a broker at {causes[0][0]}: {causes[0][1]}")
    raise BrokerUnreachable("cannot reach a broker at "
                            + ", nor at ".join(f"{address} ({cause})" for address, cause in causes))


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


def _unreachable_cause(host: str, port: int, timeout_s: float,
                       tls: ssl.SSLContext | None = None) -> str | None:
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
        except TimeoutError:
            return (f"it accepts connections but timed out after {timeout_s:g} s without "
                    "answering, as a stopped or overloaded process does")
        except OSError as error:
            return describe_os_error(error)
    if len(answer) < 8 or struct.unpack(">ii", answer)[1] != _PROBE_CORRELATION_ID:
        if tls is None:
            return ("it accepts connections but does not answer as a Kafka broker (a TLS "
                    "listener answers only security.protocol=SSL or SASL_SSL, set in "
                    "--command-config)")
        return "it accepts connections but does not answer as a Kafka broker"
    return None


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
