"""Configs as DescribeConfigs (and CreateTopics v5+) report them: each value with its source
and, most specific first, the synonyms behind it (Kafka's ``ConfigHelper``)."""

from __future__ import annotations

from dataclasses import dataclass

from .definitions import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, ConfigDef, _bool, _int


class ConfigSource:
    """DescribeConfigs source ids (Kafka's DescribeConfigsResponse.ConfigSource)."""
    TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType:
    BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9


# Kafka's type where the rule of ``_config_type`` (".ms"/".bytes" are LONG) does not give it:
# Kafka declares these as they are listed (LogConfig, KafkaConfig, GroupCoordinatorConfig,
# TransactionStateManagerConfig; compared with Kafka 4.1's DescribeConfigs v3 by
# tests/differential).
KAFKA_TYPES = {
    **dict.fromkeys(("cleanup.policy", "log.cleanup.policy", "ssl.enabled.protocols"),
                    ConfigType.LIST),
    **dict.fromkeys(("offsets.topic.replication.factor",
                     "transaction.state.log.replication.factor"), ConfigType.SHORT),
    **dict.fromkeys((
        "index.interval.bytes", "max.message.bytes", "segment.bytes", "fetch.max.bytes",
        "group.initial.rebalance.delay.ms", "group.max.session.timeout.ms",
        "group.min.session.timeout.ms", "log.index.interval.bytes", "log.segment.bytes",
        "message.max.bytes", "offset.metadata.max.bytes", "offsets.commit.timeout.ms",
        "offsets.topic.segment.bytes", "producer.id.expiration.ms", "replica.fetch.backoff.ms",
        "replica.fetch.max.bytes", "replica.fetch.response.max.bytes",
        "replica.fetch.wait.max.ms", "socket.request.max.bytes",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "transaction.max.timeout.ms",
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "transaction.state.log.segment.bytes", "transactional.id.expiration.ms"),
        ConfigType.INT),
}


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    config_type: int
    doc: str
    # (name, value, source), most specific first
    synonyms: tuple[tuple[str, str | None, int], ...] = ()
    sensitive: bool = False  # its value and its synonyms' values are None


def _config_type(definition: ConfigDef) -> int:
    if definition.sensitive:
        return ConfigType.PASSWORD
    if definition.name in KAFKA_TYPES:
        return KAFKA_TYPES[definition.name]
    if definition.parse is _bool:
        return ConfigType.BOOLEAN
    if definition.parse is _int:
        return ConfigType.LONG if definition.name.endswith((".ms", ".bytes")) else ConfigType.INT
    return ConfigType.STRING


def describe_broker_configs(config: BrokerConfig) -> list[ConfigEntry]:
    entries = []
    for name, definition in sorted(BROKER_CONFIGS.items()):
        raw: str | None = config.explicit.get(name, definition.default)
        if definition.sensitive:
            raw = None  # as Kafka: a secret is never sent back
        source = (ConfigSource.STATIC_BROKER_CONFIG if name in config.explicit
                  else ConfigSource.DEFAULT_CONFIG)
        entries.append(ConfigEntry(name, raw, source, _config_type(definition), definition.doc,
                                   ((name, raw, source),), definition.sensitive))
    return entries


def describe_topic_configs(config: BrokerConfig, overrides: dict[str, str]) -> list[ConfigEntry]:
    """Each topic config with its effective value, its source and the synonyms behind it."""
    entries = []
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        synonyms = []
        if name in overrides:
            synonyms.append((name, overrides[name], ConfigSource.TOPIC_CONFIG))
        if definition.name in config.explicit:
            synonyms.append((definition.name, config.explicit[definition.name],
                             ConfigSource.STATIC_BROKER_CONFIG))
        synonyms.append((definition.name, definition.default, ConfigSource.DEFAULT_CONFIG))
        _, value, source = synonyms[0]
        entries.append(ConfigEntry(name, value, source, _config_type(definition),
                                   definition.doc, tuple(synonyms)))
    return entries
