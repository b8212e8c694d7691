"""Broker and topic configuration, under Kafka's own names.

Sources, lowest precedence first: built-in defaults, a ``server.properties``-style file
(``--config``, ``read_properties``), repeated ``--set name=value`` flags. Topic configs
(``retention.ms``...) default to their broker-level counterparts (``log.retention.ms``...), and
a topic may override them at creation (``validate_topic_configs``). ``DescribeConfigs`` reports
each value with its source, as Kafka does (``describe``).

A name that is neither oncelog's nor one of Apache Kafka's (``kafka_config_names``) stops the
broker at start, naming the closest known name: a misspelt ``log.flush.polcy=ack`` would
otherwise run with the default durability. Kafka's names that oncelog does not use are
accepted and listed as ignored, so a stock ``server.properties`` still starts; likewise at
topic level, where an unknown name gets INVALID_CONFIG and an unused Kafka one is dropped.

Known divergences: ``log.flush.policy`` is oncelog's own (``os``: rely on the page cache like
Kafka's default; ``ack``: fsync before acknowledging acks=all, batched across requests).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .kafka_config_names import (KAFKA_BROKER_CONFIGS, KAFKA_TOPIC_CONFIGS, closest,
                                 is_kafka_broker_config)

log = logging.getLogger(__name__)

DAY_MS = 24 * 3600 * 1000


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return Path(base) / "oncelog"


class ConfigError(ValueError):
    """A config name or value that cannot be used; the message is one clear sentence."""


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"expected true or false, got {value!r}")
    return lowered == "true"


def _int(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:  # int()'s own words ("invalid literal for int() with base 10")
        raise ValueError("expected an integer") from None


def _str(value: str) -> str:
    return value.strip()


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        value = value.strip()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return value
    return parse


@dataclass(frozen=True)
class ConfigDef:
    name: str
    parse: Callable[[str], object]
    default: str
    doc: str
    topic_name: str | None = None  # the per-topic config this broker config defaults
    minimum: int | None = None
    # a secret: never logged, and DescribeConfigs answers it with a null value (as Kafka)
    sensitive: bool = False


BROKER_CONFIGS = {d.name: d for d in (
    ConfigDef("node.id", _int, "1", "This broker's id, reported in Metadata.", minimum=0),
    ConfigDef("listeners", _str, "PLAINTEXT://127.0.0.1:9092",
              "Where the broker listens: NAME://HOST:PORT,... (broker/listeners.py)."),
    ConfigDef("advertised.listeners", _str, "",
              "Where clients are told to reach each listener, NAME://HOST:PORT (defaults to "
              "where it listens)."),
    ConfigDef("listener.security.protocol.map", _str,
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
              "Each listener name's security protocol, NAME:PROTOCOL,..."),
    ConfigDef("inter.broker.listener.name", _str, "",
              "The listener brokers reach each other on (default: the one named after "
              "security.inter.broker.protocol, or the only one)."),
    ConfigDef("security.inter.broker.protocol",
              _choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), "PLAINTEXT",
              "The security protocol brokers reach each other with, when "
              "inter.broker.listener.name is not set."),
    ConfigDef("log.dirs", _str, "", "The data directory (defaults to ~/.local/share/oncelog)."),
    # TLS (SSL and SASL_SSL listeners; each may be given per listener as
    # listener.name.<name>.<config>): PEM files only, as Kafka reads them since KIP-651
    ConfigDef("ssl.keystore.type", _choice("PEM", "JKS", "PKCS12"), "PEM",
              "The keystore's format: oncelog reads PEM only."),
    ConfigDef("ssl.keystore.location", _str, "",
              "A PEM file with this broker's private key and its certificate chain."),
    ConfigDef("ssl.key.password", _str, "", "The password of an encrypted private key.",
              sensitive=True),
    ConfigDef("ssl.keystore.password", _str, "",
              "Not used by PEM keystores (Kafka's too): the key's is ssl.key.password.",
              sensitive=True),
    ConfigDef("ssl.truststore.type", _choice("PEM", "JKS", "PKCS12"), "PEM",
              "The truststore's format: oncelog reads PEM only."),
    ConfigDef("ssl.truststore.location", _str, "",
              "A PEM file with the certificate authorities this broker trusts (clients' "
              "certificates, other brokers')."),
    ConfigDef("ssl.truststore.password", _str, "", "Not used by PEM truststores.",
              sensitive=True),
    ConfigDef("ssl.client.auth", _choice("none", "requested", "required"), "none",
              "Whether clients must present a certificate (mutual TLS)."),
    ConfigDef("ssl.enabled.protocols", _str, "TLSv1.2,TLSv1.3",
              "TLS versions served: TLSv1.2 and TLSv1.3 only."),
    ConfigDef("ssl.principal.mapping.rules", _str, "DEFAULT",
              "How a client certificate's distinguished name becomes a principal: "
              "RULE:pattern/replacement/[LU], ..., DEFAULT."),
    # SASL (SASL_PLAINTEXT and SASL_SSL listeners; per listener too)
    ConfigDef("sasl.enabled.mechanisms", _str, "SCRAM-SHA-256,SCRAM-SHA-512",
              "The SASL mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, "
              "SCRAM-SHA-512 (Kafka's default, GSSAPI, is not served)."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", _str, "GSSAPI",
              "The SASL mechanism a broker authenticates to another with on a SASL "
              "inter-broker listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's "
              "default, GSSAPI, is not served)."),
    ConfigDef("sasl.jaas.config", _str, "",
              "The inter-broker login, as Kafka writes it: '<LoginModule> required "
              "username=\"NAME\" password=\"SECRET\";' (per listener and mechanism as "
              "listener.name.<listener>.<mechanism>.sasl.jaas.config).", sensitive=True),
    ConfigDef("connections.max.reauth.ms", _int, "0",
              "KIP-368: a SASL session's lifetime, after which the client authenticates "
              "again on its connection (0: sessions do not end).", minimum=0),
    ConfigDef("connection.failed.authentication.delay.ms", _int, "100",
              "How long a failed authentication waits before its answer and the "
              "connection's close.", minimum=0),
    # ACLs (security/acl.py)
    ConfigDef("authorizer.class.name", _str, "",
              "kafka.security.authorizer.AclAuthorizer or org.apache.kafka.metadata."
              "authorizer.StandardAuthorizer switch ACLs on (empty: every request allowed)."),
    ConfigDef("super.users", _str, "",
              "Principals allowed everything, separated by ';' (User:admin;User:broker)."),
    ConfigDef("allow.everyone.if.no.acl.found", _bool, "false",
              "With an authorizer: allow a resource no ACL names to everyone."),
    ConfigDef("ssl.endpoint.identification.algorithm", _str, "https",
              "https: a broker connecting to another checks the host name in its "
              "certificate; empty: it does not."),
    ConfigDef("num.partitions", _int, "1", "Partitions of a topic created without a count.",
              minimum=1),
    ConfigDef("max.partitions.per.topic", _int, "10000",
              "oncelog's own: larger partition counts are refused with INVALID_PARTITIONS "
              "(creating partitions runs on the event loop).", minimum=1),
    ConfigDef("default.replication.factor", _int, "1", "Replication factor of auto-created topics.",
              minimum=1),
    ConfigDef("auto.create.topics.enable", _bool, "true",
              "Create a topic when a client asks Metadata for it."),
    ConfigDef("delete.topic.enable", _bool, "true", "Allow DeleteTopics."),
    ConfigDef("message.max.bytes", _int, "1048588", "Largest record batch accepted.",
              "max.message.bytes", minimum=0),
    ConfigDef("min.insync.replicas", _int, "1",
              "Replicas that must have a write before acks=all is answered.",
              "min.insync.replicas", minimum=1),
    ConfigDef("unclean.leader.election.enable", _bool, "false",
              "Let an out-of-sync replica become leader (loses data).",
              "unclean.leader.election.enable"),
    ConfigDef("log.segment.bytes", _int, str(1 << 30), "Size at which a segment rolls.",
              "segment.bytes", minimum=1024),
    ConfigDef("log.roll.ms", _int, str(7 * DAY_MS), "Age at which a segment rolls.",
              "segment.ms", minimum=1),
    ConfigDef("log.retention.ms", _int, str(7 * DAY_MS),
              "Delete segments older than this (-1: keep forever).", "retention.ms", minimum=-1),
    ConfigDef("log.retention.bytes", _int, "-1",
              "Delete old segments while a partition is larger (-1: no limit).",
              "retention.bytes", minimum=-1),
    ConfigDef("log.retention.check.interval.ms", _int, "300000",
              "How often retention and time-based rolls are checked.", minimum=1),
    ConfigDef("log.index.interval.bytes", _int, "4096", "Bytes between offset-index entries.",
              "index.interval.bytes", minimum=0),
    ConfigDef("log.cleanup.policy", _choice("delete", "compact", "compact,delete"), "delete",
              "What retention does to old data.", "cleanup.policy"),
    ConfigDef("log.message.timestamp.type", _choice("CreateTime", "LogAppendTime"), "CreateTime",
              "Keep the producer's timestamps or stamp the broker's time.",
              "message.timestamp.type"),
    ConfigDef("compression.type", _choice("producer", "uncompressed", "gzip", "snappy", "lz4",
                                          "zstd"), "producer",
              "Only 'producer' (keep the client's codec) is implemented.", "compression.type"),
    ConfigDef("log.flush.policy", _choice("os", "ack"), "os",
              "ack: fsync before answering acks=all (group commit); os: leave it to the OS."),
    ConfigDef("log.cache.retain.bytes", _int, "-1",
              "oncelog's own: how much of each partition's newest log stays in the OS page "
              "cache as it is written; older bytes are written back and dropped from it, so "
              "writes reuse memory instead of growing the cache (-1: keep everything, as "
              "Kafka does). Consumers further behind read from disk.", minimum=-1),
    ConfigDef("replica.cache.retain.bytes", _int, str(64 * 1024 * 1024),
              "oncelog's own: log.cache.retain.bytes for the partitions this broker follows "
              "(a follower's copy is read by nobody until it leads; -1: keep everything, as "
              "Kafka does). Once it leads, log.cache.retain.bytes applies.", minimum=-1),
    ConfigDef("producer.id.expiration.ms", _int, str(DAY_MS),
              "Forget an idempotent producer's sequence state after this long idle.",
              minimum=1),
    ConfigDef("socket.request.max.bytes", _int, str(100 * 1024 * 1024),
              "Largest request frame; bigger frames close the connection.", minimum=1),
    # Connection and request limits (issue 14)
    ConfigDef("queued.max.request.bytes", _int, str(256 * 1024 * 1024),
              "Bytes of requests read but not yet answered, receive buffers grown for frames "
              "still arriving and responses not yet written, broker-wide; when full, the "
              "broker stops reading until memory frees (-1: no bound, Kafka's default).",
              minimum=-1),
    ConfigDef("max.connections", _int, "1000",
              "Open client connections; more are closed as soon as they are accepted.",
              minimum=1),
    ConfigDef("max.connections.per.ip", _int, "2147483647",
              "Open connections from one client address; more are closed when accepted.",
              minimum=1),
    ConfigDef("connections.max.idle.ms", _int, "600000",
              "Close a connection that has read nothing and has nothing to answer for this "
              "long.", minimum=1),
    ConfigDef("socket.request.read.timeout.ms", _int, "30000",
              "oncelog's own: close a connection whose request frame is still incomplete "
              "this long after its first byte arrived (slow-loris clients).", minimum=1),
    ConfigDef("connections.rejected.log.interval.ms", _int, "10000",
              "oncelog's own: rejected connections and unreadable requests are logged once "
              "per kind per client address per interval, with a count of the rest.",
              minimum=0),
    ConfigDef("fetch.max.bytes", _int, str(55 * 1024 * 1024),
              "Upper bound on a fetch response's size.", minimum=1024),
    ConfigDef("cluster.id", _str, "", "Cluster id (generated and kept in meta.properties)."),
    # Consumer groups (the group coordinator and __consumer_offsets)
    ConfigDef("group.initial.rebalance.delay.ms", _int, "3000",
              "How long a group starting from empty waits for more members before its first "
              "generation.", minimum=0),
    ConfigDef("group.min.session.timeout.ms", _int, "6000",
              "Smallest session.timeout.ms a member may ask for.", minimum=1),
    ConfigDef("group.max.session.timeout.ms", _int, "1800000",
              "Largest session.timeout.ms a member may ask for.", minimum=1),
    ConfigDef("offset.metadata.max.bytes", _int, "4096",
              "Longest metadata string an offset commit may carry.", minimum=0),
    ConfigDef("offsets.topic.num.partitions", _int, "50",
              "Partitions of __consumer_offsets when it is created.", minimum=1),
    ConfigDef("offsets.commit.timeout.ms", _int, "5000",
              "How long an offset commit waits for the ISR of its __consumer_offsets "
              "partition before failing with REQUEST_TIMED_OUT.", minimum=1),
    ConfigDef("offsets.topic.segment.bytes", _int, str(100 * 1024 * 1024),
              "Segment size of __consumer_offsets (compaction cleans sealed segments).",
              minimum=1024),
    ConfigDef("log.cleaner.enable", _bool, "true",
              "Compact logs whose cleanup.policy includes compact."),
    ConfigDef("log.cleaner.delete.retention.ms", _int, str(DAY_MS),
              "How long compaction keeps a tombstone (a null value), or a transaction "
              "marker whose records are gone, after its segment's newest record.",
              "delete.retention.ms", minimum=0),
    # Replication and the cluster (issue 11); without zookeeper.connect the broker is alone
    ConfigDef("zookeeper.connect", _str, "",
              "HOST:PORT[,HOST:PORT...][/chroot] of the ZooKeeper ensemble that forms the "
              "cluster; empty: a single broker with its metadata in the data directory."),
    ConfigDef("zookeeper.session.timeout.ms", _int, "18000",
              "How long ZooKeeper waits before declaring a silent broker dead (and how long "
              "this broker may lead without hearing from ZooKeeper).", minimum=1000),
    ConfigDef("zookeeper.connection.timeout.ms", _int, "18000",
              "How long to keep trying to reach ZooKeeper at start-up.", minimum=1),
    ConfigDef("replica.lag.time.max.ms", _int, "30000",
              "A follower that has not caught up for this long leaves the ISR.", minimum=1),
    ConfigDef("replica.fetch.max.bytes", _int, str(8 * 1024 * 1024),
              "Bytes a follower asks for per partition per fetch (Kafka's default is 1 MiB; "
              "oncelog's cost is per round, so fewer, larger rounds).", minimum=1024),
    ConfigDef("replica.fetch.response.max.bytes", _int, str(10 * 1024 * 1024),
              "Bytes a follower asks for per fetch response.", minimum=1024),
    ConfigDef("replica.fetch.wait.max.ms", _int, "500",
              "How long a follower's fetch waits at the leader for new data.", minimum=0),
    ConfigDef("replica.fetch.backoff.ms", _int, "1000",
              "How long a follower waits after a failed fetch before trying again.",
              minimum=0),
    ConfigDef("offsets.topic.replication.factor", _int, "3",
              "Replicas of __consumer_offsets (at most the live brokers when it is created).",
              minimum=1),
    ConfigDef("controlled.shutdown.enable", _bool, "true",
              "On SIGTERM, move leadership to other in-sync replicas before exiting."),
    # Transactions (issue 12): the transaction coordinator and __transaction_state
    ConfigDef("transaction.max.timeout.ms", _int, "900000",
              "Largest transaction.timeout.ms a producer may ask for "
              "(INVALID_TRANSACTION_TIMEOUT beyond).", minimum=1),
    ConfigDef("transactional.id.expiration.ms", _int, str(7 * DAY_MS),
              "Forget a transactional id with no transaction for this long.", minimum=1),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", _int, "10000",
              "How often the coordinator aborts transactions past their timeout.",
              minimum=1),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", _int, "3600000",
              "How often the coordinator removes expired transactional ids.", minimum=1),
    ConfigDef("transaction.state.log.num.partitions", _int, "50",
              "Partitions of __transaction_state when it is created.", minimum=1),
    ConfigDef("transaction.state.log.replication.factor", _int, "3",
              "Replicas of __transaction_state (at most the live brokers when it is "
              "created).", minimum=1),
    ConfigDef("transaction.state.log.min.isr", _int, "2",
              "min.insync.replicas of __transaction_state (at most its replicas).", minimum=1),
    ConfigDef("transaction.state.log.segment.bytes", _int, str(100 * 1024 * 1024),
              "Segment size of __transaction_state.", minimum=1024),
    ConfigDef("transaction.partition.verification.enable", _bool, "true",
              "Before a producer's first transactional batch in a partition, ask its "
              "transaction coordinator whether the partition is in its ongoing transaction "
              "(KIP-890): a late write cannot open a transaction nobody will end."),
)}

# Topic configs that have no broker-level counterpart.
TOPIC_ONLY_CONFIGS = {d.name: d for d in (
    ConfigDef("file.delete.delay.ms", _int, "60000", "Accepted for compatibility; not used."),
    ConfigDef("message.timestamp.difference.max.ms", _int, str(2**63 - 1),
              "Accepted for compatibility; not enforced."),
)}

TOPIC_CONFIGS = {d.topic_name: d for d in BROKER_CONFIGS.values() if d.topic_name}
TOPIC_CONFIGS.update(TOPIC_ONLY_CONFIGS)


def parse_value(definition: ConfigDef, raw: str, name: str | None = None) -> object:
    name = name or definition.name
    try:
        value = definition.parse(raw)
    except ValueError as error:
        raise ConfigError(f"{name}={raw!r} is invalid: {error}") from None
    if definition.minimum is not None and isinstance(value, int) and value < definition.minimum:
        raise ConfigError(f"{name}={raw!r} is below the minimum {definition.minimum}")
    return value


def read_properties(path: Path) -> dict[str, str]:
    """Read a server.properties-style file: name=value lines, # and ! comments."""
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        name, sep, value = line.partition("=")
        if not sep:
            name, sep, value = line.partition(":")
        if not sep:
            raise ConfigError(f"{path}:{number}: expected name=value, got {line!r}")
        values[name.strip()] = value.strip()
    return values


# Kafka's coarser spellings, translated to the canonical name.
_ALIASES = {
    "broker.id": ("node.id", 1),
    "log.dir": ("log.dirs", 1),
    "log.retention.minutes": ("log.retention.ms", 60_000),
    "log.retention.hours": ("log.retention.ms", 3_600_000),
    "log.roll.hours": ("log.roll.ms", 3_600_000),
}


class BrokerConfig:
    """The effective broker configuration: typed values plus which names were set explicitly."""

    def __init__(self, explicit: dict[str, str] | None = None) -> None:
        self.explicit: dict[str, str] = {}
        self.ignored: list[str] = []  # names Kafka knows but oncelog does not use
        # listener.name.<listener>.<config>: a config for one listener (listener lower-cased)
        self.per_listener: dict[str, dict[str, str]] = {}
        # listener.name.<listener>.<mechanism>.sasl.jaas.config: (listener, MECHANISM) -> login
        self.listener_jaas: dict[tuple[str, str], str] = {}
        # Aliases first, so the precise spelling (log.retention.ms) wins, as in Kafka.
        items = sorted((explicit or {}).items(), key=lambda item: item[0] not in _ALIASES)
        for name, raw in items:
            if name in _ALIASES:
                canonical, factor = _ALIASES[name]
                if factor != 1:
                    try:
                        value = _int(raw) * factor
                    except ValueError:
                        raise ConfigError(
                            f"{name}={raw!r} is invalid: expected an integer") from None
                    raw = str(max(value, -1))  # Kafka reads any negative retention as -1
                name = canonical
            if name.startswith(LISTENER_PREFIX) and self._per_listener(name, raw):
                continue
            if name not in BROKER_CONFIGS:
                if not is_kafka_broker_config(name):
                    raise ConfigError(f"unknown broker config {name!r}: neither oncelog's nor "
                                      f"Apache Kafka's{_suggestion(name, broker=True)}")
                # Kafka warns and carries on, so a stock server.properties still starts.
                self.ignored.append(name)
                continue
            parse_value(BROKER_CONFIGS[name], raw)
            self.explicit[name] = raw
        self._values = {name: parse_value(d, self.explicit.get(name, d.default))
                        for name, d in BROKER_CONFIGS.items()}

    def _per_listener(self, name: str, raw: str) -> bool:
        """Keep ``listener.name.<listener>.<config>`` when ``<config>`` is one of ours (its
        value checked); False for any other (Kafka's own per-listener settings: ignored)."""
        listener, _, config = name[len(LISTENER_PREFIX):].partition(".")
        mechanism, _, rest = config.partition(".")
        if listener and mechanism and rest == "sasl.jaas.config":  # Kafka's per mechanism
            self.listener_jaas[(listener.lower(), mechanism.upper())] = raw
            return True
        if config not in BROKER_CONFIGS or not listener:
            return False
        parse_value(BROKER_CONFIGS[config], raw, name)
        self.per_listener.setdefault(listener.lower(), {})[config] = raw
        return True

    def __getitem__(self, name: str) -> Any:  # int, str, bool, ... as the config's type says
        return self._values[name]

    def for_listener(self, listener: str, name: str) -> Any:
        """``name``'s value for one listener: ``listener.name.<listener>.<name>`` when set,
        else the broker's."""
        raw = self.per_listener.get(listener.lower(), {}).get(name)
        return self[name] if raw is None else parse_value(BROKER_CONFIGS[name], raw)

    def jaas_config(self, listener: str, mechanism: str) -> str:
        """The login for ``mechanism`` on ``listener``, as Kafka looks it up:
        ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, else ``sasl.jaas.config``
        (per listener, else the broker's)."""
        given = self.listener_jaas.get((listener.lower(), mechanism.upper()))
        return given if given is not None else str(self.for_listener(listener,
                                                                     "sasl.jaas.config"))

    def source(self, name: str) -> str:
        return "static" if name in self.explicit else "default"

    @property
    def data_dir(self) -> Path:
        return Path(self["log.dirs"]).expanduser() if self["log.dirs"] else default_data_dir()

    def topic_defaults(self) -> dict[str, str]:
        defaults = {d.topic_name: self.explicit.get(d.name, d.default)
                    for d in BROKER_CONFIGS.values() if d.topic_name}
        defaults.update({d.name: d.default for d in TOPIC_ONLY_CONFIGS.values()})
        return defaults


LISTENER_PREFIX = "listener.name."


def _suggestion(name: str, broker: bool) -> str:
    """'; did you mean X?' for the known name nearest ``name``: oncelog's own first (what
    the user most likely meant to change), else Kafka's."""
    ours = set(BROKER_CONFIGS) | set(_ALIASES) if broker else set(TOPIC_CONFIGS)
    kafka = KAFKA_BROKER_CONFIGS if broker else KAFKA_TOPIC_CONFIGS
    suggestion = closest(name, ours) or closest(name, kafka)
    return f"; did you mean {suggestion!r}?" if suggestion else ""


def validate_topic_configs(configs: dict[str, str]) -> dict[str, str]:
    """Check topic-level overrides; raise ConfigError naming the first bad one. Kafka's topic
    configs that oncelog does not use are dropped (and logged), as a broker config is."""
    used = {}
    for name, raw in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            if name in KAFKA_TOPIC_CONFIGS:
                log.warning("topic config %r is not used by oncelog; ignoring it", name)
                continue
            raise ConfigError(f"unknown topic config {name!r}{_suggestion(name, broker=False)}")
        parse_value(definition, raw, name)
        used[name] = raw
    return used
