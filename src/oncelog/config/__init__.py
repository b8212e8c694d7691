"""Broker and topic configuration under Kafka's names, below everything that reads it.

- ``definitions`` - every config oncelog uses with its type, default and bounds;
  ``BrokerConfig``, the effective broker configuration (defaults, a ``--config`` file read by
  ``read_properties``, ``--set`` flags, Kafka's aliases), its ``topic_defaults()``, and
  ``validate_topic_configs`` for a topic's overrides; ``ConfigError``, one clear sentence.
- ``kafka_config_names`` - Apache Kafka's own names, so an unused Kafka setting is told apart
  from a misspelt one.
- ``describe`` - each config with its source and synonyms, as DescribeConfigs and CreateTopics
  report them.

It imports nothing else of oncelog's, so ``partition``, ``replication``, the coordinators and
the broker all read the same ``BrokerConfig`` without importing each other.
"""

from .definitions import (BROKER_CONFIGS, DAY_MS, TOPIC_CONFIGS, TOPIC_ONLY_CONFIGS, BrokerConfig,
                          ConfigDef, ConfigError, default_data_dir, parse_value, read_properties,
                          validate_topic_configs)
from .describe import (ConfigEntry, ConfigSource, ConfigType, describe_broker_configs,
                       describe_topic_configs)

__all__ = ["BROKER_CONFIGS", "DAY_MS", "TOPIC_CONFIGS", "TOPIC_ONLY_CONFIGS", "BrokerConfig",
           "ConfigDef", "ConfigEntry", "ConfigError", "ConfigSource", "ConfigType",
           "default_data_dir", "describe_broker_configs", "describe_topic_configs",
           "parse_value", "read_properties", "validate_topic_configs"]
