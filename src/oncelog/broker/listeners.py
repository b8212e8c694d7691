"""Listeners as Kafka names them: ``listeners``, ``advertised.listeners``,
``listener.security.protocol.map`` and ``inter.broker.listener.name``.

A listener is ``NAME://HOST:PORT``. ``NAME`` is a security protocol (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL) or a name of the operator's own (``CLIENT``, ``REPLICATION``) that
``listener.security.protocol.map`` maps to one; a bare ``HOST:PORT`` is PLAINTEXT. An empty
host listens on every interface. Each listener is advertised at the address
``advertised.listeners`` gives under its name, or else where it listens; a client is told the
endpoints of the listener it connected to (Metadata, FindCoordinator, DescribeCluster, a
Produce response's current leaders), so clients of an internal and of an external listener
each get addresses they can reach. Brokers reach each other on ``inter.broker.listener.name``
(by default the listener named after ``security.inter.broker.protocol``, PLAINTEXT; on a
broker with one listener, that one).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..config import BrokerConfig, ConfigError
from ..controller.store import Endpoint

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's default map: each security protocol is a listener name of itself
DEFAULT_PROTOCOL_MAP = {protocol: protocol for protocol in SECURITY_PROTOCOLS}
_UNROUTABLE = ("0.0.0.0", "::")


@dataclass(frozen=True, slots=True)
class Listeners:
    bound: tuple[Endpoint, ...]  # where the broker listens, in the order configured
    advertised: tuple[Endpoint, ...]  # the same listeners as clients are told to reach them
    inter_broker: str  # the listener other brokers connect to

    def advertised_endpoint(self, listener: str) -> Endpoint:
        return next(e for e in self.advertised if e.listener == listener)

    def with_port(self, listener: str, port: int) -> Listeners:
        """The listener bound to port 0 now listening on ``port`` (advertised there too
        when its advertised port was 0)."""
        return Listeners(
            tuple(replace(e, port=port) if e.listener == listener else e for e in self.bound),
            tuple(replace(e, port=port) if e.listener == listener and e.port == 0 else e
                  for e in self.advertised),
            self.inter_broker)


def parse_listener(listener: str) -> tuple[str, int]:
    """'PLAINTEXT://host:port' or 'host:port' -> (host, port) of the first listener."""
    return _address(listener.split(",")[0].strip())


def _address(text: str) -> tuple[str, int]:
    address = text.split("://", 1)[1] if "://" in text else text
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"listener {text!r} is not HOST:PORT")
    if int(port) > 65535:  # the socket layer would quietly take it modulo 65536
        raise ConfigError(f"listener {text!r}: the port {port} is not a number from 0 "
                          "to 65535")
    return host.strip("[]") or "0.0.0.0", int(port)


def parse_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: 'NAME:PROTOCOL,...' (names upper-cased, as Kafka)."""
    mapping: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not "
                              "LISTENER_NAME:SECURITY_PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: {protocol or '(none)'} for "
                              f"listener {name} is not a security protocol (one of "
                              f"{', '.join(SECURITY_PROTOCOLS)})")
        if name in mapping:
            raise ConfigError(f"listener.security.protocol.map names listener {name} twice")
        mapping[name] = protocol
    return mapping


def _endpoints(setting: str, text: str, protocols: dict[str, str]) -> list[Endpoint]:
    endpoints: list[Endpoint] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name = item.split("://", 1)[0].strip().upper() if "://" in item else "PLAINTEXT"
        if not name:
            raise ConfigError(f"{setting}: {item!r} has no listener name before '://'")
        if name not in protocols:
            raise ConfigError(f"{setting}: no security protocol defined for listener {name}; "
                              f"name it in listener.security.protocol.map ({name}:SASL_SSL...)"
                              f" or use one of {', '.join(SECURITY_PROTOCOLS)}")
        if any(e.listener == name for e in endpoints):
            raise ConfigError(f"{setting} names listener {name} twice; each listener needs a "
                              "name of its own")
        host, port = _address(item)
        endpoints.append(Endpoint(name, protocols[name], host, port))
    return endpoints


def parse_listeners(config: BrokerConfig) -> Listeners:
    """The broker's listeners from its config, checked as Kafka checks them."""
    protocols = dict(DEFAULT_PROTOCOL_MAP)
    if config.source("listener.security.protocol.map") != "default":
        protocols = parse_protocol_map(config["listener.security.protocol.map"])
    bound = _endpoints("listeners", config["listeners"], protocols)
    if not bound:
        raise ConfigError("listeners is empty: give at least one, e.g. "
                          "PLAINTEXT://127.0.0.1:9092")
    taken: dict[tuple[str, int], str] = {}
    for endpoint in bound:
        where = (endpoint.host, endpoint.port)
        if endpoint.port and where in taken:
            raise ConfigError(f"listeners {taken[where]} and {endpoint.listener} both listen on "
                              f"{endpoint.host}:{endpoint.port}; give each its own port")
        taken[where] = endpoint.listener
    names = [e.listener for e in bound]
    advertised_given = {e.listener: e for e in _endpoints(
        "advertised.listeners", config["advertised.listeners"], protocols)}
    for name in advertised_given:
        if name not in names:
            raise ConfigError(f"advertised.listeners names listener {name}, which listeners "
                              f"does not ({', '.join(names)})")
    advertised = tuple(advertised_given.get(e.listener, e) for e in bound)
    for endpoint in advertised:
        if endpoint.host in _UNROUTABLE:
            raise ConfigError(
                f"advertised.listeners must name a host clients can reach, not {endpoint.host} "
                f"(listener {endpoint.listener}); set advertised.listeners="
                f"{endpoint.listener}://HOST:PORT")
    return Listeners(tuple(bound), advertised, _inter_broker(config, names, protocols))


def _inter_broker(config: BrokerConfig, names: list[str], protocols: dict[str, str]) -> str:
    named = config.source("inter.broker.listener.name") != "default"
    by_protocol = config.source("security.inter.broker.protocol") != "default"
    if named and by_protocol:
        raise ConfigError("only one of inter.broker.listener.name and "
                          "security.inter.broker.protocol may be set")
    if named:
        name = config["inter.broker.listener.name"].strip().upper()
        if name not in names:
            raise ConfigError(f"inter.broker.listener.name {name} is not a listener "
                              f"({', '.join(names)})")
        return name
    protocol = config["security.inter.broker.protocol"]
    if protocol in names and protocols.get(protocol) == protocol:
        return protocol
    if len(names) == 1 and not by_protocol:
        return names[0]
    raise ConfigError(f"no listener for brokers to reach each other on: no listener is named "
                      f"{protocol} (security.inter.broker.protocol); set "
                      f"inter.broker.listener.name to one of {', '.join(names)}")
