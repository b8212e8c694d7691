"""TLS contexts from Kafka's ``ssl.*`` settings, per listener.

Only PEM files, as Kafka reads them since KIP-651 (``ssl.keystore.type=PEM``):
``ssl.keystore.location`` holds the private key and the certificate chain (the key encrypted
or not; ``ssl.key.password`` decrypts it), ``ssl.truststore.location`` the certificate
authorities trusted. ``ssl.client.auth`` is ``none``, ``requested`` (a certificate is asked
for and checked when given) or ``required``. TLS 1.2 and 1.3 only (``ssl.enabled.protocols``).
Each setting may be given for one listener as ``listener.name.<name>.<setting>``. A setting
that cannot be used stops the broker with one line naming the setting and the cause.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path

from ..config import BrokerConfig, ConfigError

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The context a TLS listener (SSL, SASL_SSL) accepts connections with."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(context, config, listener)
    _load_keystore(context, config, listener, required=True)
    client_auth = config.for_listener(listener, "ssl.client.auth")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    if client_auth != "none":
        if not _load_truststore(context, config, listener):
            raise ConfigError(f"listener {listener}: ssl.client.auth={client_auth} needs "
                              "ssl.truststore.location, the certificate authorities that "
                              "sign clients' certificates")
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The context a broker connects to another broker's TLS listener with: the truststore
    (else the system's authorities), the keystore when there is one (mutual TLS), the host
    name checked unless ``ssl.endpoint.identification.algorithm`` is empty."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_versions(context, config, listener)
    if not _load_truststore(context, config, listener):
        context.load_default_certs()
    _load_keystore(context, config, listener, required=False)
    context.check_hostname = bool(
        str(config.for_listener(listener, "ssl.endpoint.identification.algorithm")).strip())
    return context


def _set_versions(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> None:
    names = [n.strip() for n in
             str(config.for_listener(listener, "ssl.enabled.protocols")).split(",") if n.strip()]
    unknown = [n for n in names if n not in _VERSIONS]
    if unknown or not names:
        raise ConfigError(f"listener {listener}: ssl.enabled.protocols "
                          f"{','.join(names) or '(empty)'}: oncelog serves TLSv1.2 and TLSv1.3 "
                          "only")
    versions = sorted(_VERSIONS[n] for n in names)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]


def _pem_only(config: BrokerConfig, listener: str, setting: str) -> None:
    kind = config.for_listener(listener, setting)
    if kind != "PEM":
        raise ConfigError(f"listener {listener}: {setting}={kind}: oncelog reads PEM files "
                          "only (convert with `keytool -importkeystore ... -deststoretype "
                          "PKCS12` and `openssl pkcs12 -nodes`)")


def _load_keystore(context: ssl.SSLContext, config: BrokerConfig, listener: str,
                   required: bool) -> None:
    location = str(config.for_listener(listener, "ssl.keystore.location"))
    if not location:
        if required:
            raise ConfigError(f"listener {listener}: ssl.keystore.location is not set; give "
                              "a PEM file with the broker's private key and its certificate "
                              "chain")
        return
    _pem_only(config, listener, "ssl.keystore.type")
    _readable(listener, "ssl.keystore.location", location)
    password = str(config.for_listener(listener, "ssl.key.password")).encode()
    try:
        # a callable, so that OpenSSL never asks for an encrypted key's password on a terminal
        context.load_cert_chain(location, password=lambda: password)
    except ssl.SSLError as error:
        encrypted = "ENCRYPTED" in Path(location).read_text(errors="replace")
        reason = ("the private key is encrypted and ssl.key.password is wrong or not set"
                  if encrypted else "it does not hold a PEM private key with its certificate "
                  "chain, or the key is not the certificate's")
        raise ConfigError(f"listener {listener}: ssl.keystore.location {location}: "
                          f"{reason} ({error.reason or error})") from None


def _load_truststore(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> bool:
    location = str(config.for_listener(listener, "ssl.truststore.location"))
    if not location:
        return False
    _pem_only(config, listener, "ssl.truststore.type")
    _readable(listener, "ssl.truststore.location", location)
    try:
        context.load_verify_locations(cafile=location)
    except ssl.SSLError as error:
        raise ConfigError(f"listener {listener}: ssl.truststore.location {location} holds no "
                          f"PEM certificate ({error.reason or error})") from None
    return True


def _readable(listener: str, setting: str, location: str) -> None:
    try:
        Path(location).open("rb").close()
    except OSError as error:
        raise ConfigError(f"listener {listener}: {setting} {location}: "
                          f"{(error.strerror or str(error)).lower()}") from None


def watch_handshakes(context: ssl.SSLContext, report: Callable[[str], None],
                     timeout_s: float) -> None:
    """Have every failed handshake of ``context`` reported (one clause, to ``report``).

    The event loop runs TLS for a listener's connections and closes one whose handshake
    fails or stalls (``ssl_handshake_timeout``) without a word, and the connection's protocol
    is made only once the handshake is done. So the context's TLS objects (the documented
    ``SSLContext.sslobject_class``) report themselves: a handshake refused (a PLAINTEXT
    client's bytes, a missing or untrusted client certificate, TLS 1.1), or not finished
    within ``timeout_s`` (stalled, or abandoned half-way)."""

    class WatchedTLS(ssl.SSLObject):
        _watch: asyncio.TimerHandle | None = None
        _done = False

        def do_handshake(self) -> None:
            if self._watch is None and not self._done:
                self._watch = asyncio.get_running_loop().call_later(timeout_s, self._stalled)
            try:
                super().do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                raise
            except ssl.SSLError as error:
                self._finish()
                report(handshake_error(error))
                raise
            self._finish()

        def _finish(self) -> None:
            self._done = True
            if self._watch is not None:
                self._watch.cancel()

        def _stalled(self) -> None:
            if not self._done:
                self._done = True
                report(f"no handshake finished within {round(timeout_s * 1000)} ms "
                       "(socket.request.read.timeout.ms): the client stalled or left")

    context.sslobject_class = WatchedTLS


def handshake_error(error: ssl.SSLError) -> str:
    """A refused handshake in one clause."""
    reason = error.reason or str(error)
    if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL",
                  "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"):
        return f"not a TLS client hello ({reason}: a PLAINTEXT client?)"
    return reason
