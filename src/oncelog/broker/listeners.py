"""A listener's address: ``listeners`` and ``advertised.listeners`` as Kafka spells them."""

from __future__ import annotations

from ..config import ConfigError


def parse_listener(listener: str) -> tuple[str, int]:
    """'PLAINTEXT://host:port' or 'host:port' -> (host, port)."""
    address = listener.split(",")[0].strip()
    if "://" in address:
        address = address.split("://", 1)[1]
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"listener {listener!r} is not HOST:PORT")
    if int(port) > 65535:  # the socket layer would quietly take it modulo 65536
        raise ConfigError(f"listener {listener!r}: the port {port} is not a number from 0 "
                          "to 65535")
    return host.strip("[]") or "0.0.0.0", int(port)
