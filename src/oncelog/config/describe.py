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
    BOOLEAN, STRING, INT, LONG = 1, 2, 3, 5


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str
    source: int
    config_type: int
    doc: str
    synonyms: tuple[tuple[str, str, int], ...] = ()  # (name, value, source), most specific first


def _config_type(definition: ConfigDef) -> int:
    if definition.parse is _bool:
        return ConfigType.BOOLEAN
    if definition.parse is _int:
        return ConfigType.LONG if definition.name.endswith((".ms", ".bytes")) else ConfigType.INT
    return ConfigType.STRING


def describe_broker_configs(config: BrokerConfig) -> list[ConfigEntry]:
    entries = []
    for name, definition in sorted(BROKER_CONFIGS.items()):
        raw = config.explicit.get(name, definition.default)
        source = (ConfigSource.STATIC_BROKER_CONFIG if name in config.explicit
                  else ConfigSource.DEFAULT_CONFIG)
        entries.append(ConfigEntry(name, raw, source, _config_type(definition), definition.doc,
                                   ((name, raw, source),)))
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
