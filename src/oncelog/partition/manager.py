"""The topics this broker hosts and their partitions (Kafka's ReplicaManager, single node).

Owns: the name -> ``Topic`` map, the opening and closing of partition logs, topic creation,
deletion and partition growth. The durable list of topics lives in the metadata store
(``controller``); this class applies it to disk and memory.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Callable

from ..broker.config import BrokerConfig, ConfigError, validate_topic_configs
from ..controller.metadata_store import LocalMetadataStore, TopicRecord, new_topic_id
from ..protocol.errors import ErrorCode, KafkaError
from ..storage import Log
from ..storage.cleaner import LogCleaner
from .partition import Partition, TopicSettings

log = logging.getLogger(__name__)

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249


def check_topic_name(name: str | None) -> None:
    """Kafka's rules for topic names (Topic.validate)."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is not allowed")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name is {len(name)} characters; the limit is 249")
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name {name!r} has characters other than ASCII letters, digits, "
                         "'.', '_' and '-'")


@dataclass
class Topic:
    record: TopicRecord
    partitions: list[Partition] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


class PartitionManager:
    def __init__(self, config: BrokerConfig, store: LocalMetadataStore,
                 clock: Callable[[], int]) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.topics: dict[str, Topic] = {}
        self.cleaner = LogCleaner()

    def load(self) -> None:
        for record in self.store.load_topics().values():
            topic = Topic(record)
            settings = self.topic_settings(record)
            for index in range(record.partitions):
                topic.partitions.append(self._open_partition(record.name, index, settings))
            self.topics[record.name] = topic
        if self.topics:
            log.info("loaded %d topics, %d partitions", len(self.topics),
                     sum(len(t.partitions) for t in self.topics.values()))

    def effective_topic_configs(self, record: TopicRecord) -> dict[str, str]:
        configs = self.config.topic_defaults()
        configs.update(record.configs)
        return configs

    def topic_settings(self, record: TopicRecord) -> TopicSettings:
        return TopicSettings.from_configs(self.effective_topic_configs(record))

    def _open_partition(self, topic: str, index: int, settings: TopicSettings) -> Partition:
        directory = self.config.data_dir / f"{topic}-{index}"
        partition_log = Log.open(directory, settings.log_config, self.clock)
        return Partition(topic, index, partition_log, settings, self.clock)

    # -- lookups ---------------------------------------------------------------------------

    def get_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return topic

    def get_partition(self, topic_name: str, index: int) -> Partition:
        topic = self.get_topic(topic_name)
        if not 0 <= index < len(topic.partitions):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {topic_name!r} has no partition {index}")
        return topic.partitions[index]

    def all_partitions(self):
        for topic in self.topics.values():
            yield from topic.partitions

    # -- changes ---------------------------------------------------------------------------

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None, validate_only: bool = False) -> Topic | None:
        check_topic_name(name)
        if name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"number of partitions must be positive, got {num_partitions}")
        self._check_partition_limit(name, num_partitions)
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if replication_factor != 1:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"replication factor {replication_factor} is larger than the 1 "
                             "broker available")
        try:
            configs = validate_topic_configs(configs or {})
        except ConfigError as error:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(error)) from None
        if validate_only:
            return None
        record = TopicRecord(name, new_topic_id(), num_partitions, configs)
        topic = Topic(record)
        settings = self.topic_settings(record)
        topic.partitions = [self._open_partition(name, i, settings) for i in range(num_partitions)]
        self.topics[name] = topic
        self.store.save_topics({n: t.record for n, t in self.topics.items()})
        log.info("created topic %s with %d partitions%s", name, num_partitions,
                 f" and configs {configs}" if configs else "")
        return topic

    def _check_partition_limit(self, name: str, count: int) -> None:
        """A fuzzed or mistyped count (CreateTopics with 500,000 partitions) must not stall
        the broker while it opens that many logs on the event loop."""
        limit = self.config["max.partitions.per.topic"]
        if count > limit:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"topic {name!r}: {count} partitions exceeds "
                             f"max.partitions.per.topic={limit}")

    def delete_topic(self, name: str) -> Topic:
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        topic = self.get_topic(name)
        del self.topics[name]
        self.store.save_topics({n: t.record for n, t in self.topics.items()})
        for partition in topic.partitions:
            partition.delete()
        log.info("deleted topic %s", name)
        return topic

    def create_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        topic = self.get_topic(name)
        current = len(topic.partitions)
        if count <= current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"topic {name!r} has {current} partitions; the new count {count} "
                             "must be larger")
        self._check_partition_limit(name, count)
        if validate_only:
            return
        settings = self.topic_settings(topic.record)
        topic.partitions.extend(self._open_partition(name, i, settings)
                                for i in range(current, count))
        topic.record.partitions = count
        self.store.save_topics({n: t.record for n, t in self.topics.items()})
        log.info("topic %s grew from %d to %d partitions", name, current, count)

    def run_log_maintenance(self) -> None:
        """Time-based rolls, retention (``cleanup.policy`` delete), compaction (compact) and
        producer-state upkeep; called periodically."""
        for topic in list(self.topics.values()):
            configs = self.effective_topic_configs(topic.record)
            policies = set(configs["cleanup.policy"].split(","))
            for partition in list(topic.partitions):
                self._maintain_partition(partition, policies, configs)

    def _maintain_partition(self, partition: Partition, policies: set[str],
                            configs: dict[str, str]) -> None:
        partition.log.roll_if_due()
        if "compact" in policies and self.config["log.cleaner.enable"]:
            try:
                self.cleaner.maybe_clean(partition.log, self.clock(),
                                         int(configs["delete.retention.ms"]))
            except (OSError, KafkaError) as error:  # the log stays as it was; retry next time
                log.error("%s: compaction failed: %s", partition, error)
        if "delete" in policies:
            deleted = partition.log.apply_retention()
            if deleted:
                log.info("retention deleted %d segments of %s; log start offset is now %d",
                         deleted, partition, partition.log_start_offset)
                partition.high_watermark = max(partition.high_watermark,
                                               partition.log_start_offset)
        self._maintain_producer_state(partition)

    def _maintain_producer_state(self, partition) -> None:
        """Expire idle producers (``producer.id.expiration.ms``) and snapshot what changed,
        so a restart replays only the batches written since."""
        expired = partition.producer_state.expire(self.clock(),
                                                  self.config["producer.id.expiration.ms"])
        if expired:
            log.info("%s: %d idle producer ids expired", partition, expired)
        partition.take_producer_snapshot()

    def close(self) -> None:
        for partition in self.all_partitions():
            partition.close()
