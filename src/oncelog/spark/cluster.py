"""Driver-side lookups against the broker: which partitions, and where each one begins and ends.

One ``Cluster`` per reader, created lazily on the driver and never pickled (executors read
with their own clients, see ``ranges``). Offsets come from ListOffsets in one request per
call (``AdminClient.list_offsets``), with the query's isolation level, so ``latest`` is the
last stable offset under ``read_committed``. Topic lookups never create a topic.
"""

from __future__ import annotations

import logging
import time

from .errors import SourceError, SourceOptionError
from .offsets import Offsets, TopicPartition
from .options import SourceOptions

_TIMEOUT_S = 30.0   # at most; a shorter kafkaConsumer.pollTimeoutMs shortens it


def quiet_logger() -> logging.Logger:
    logger = logging.getLogger("oncelog.spark.librdkafka")
    logger.setLevel(logging.CRITICAL)
    return logger


def client_config(options: SourceOptions) -> dict:
    """The user's ``kafka.*`` options plus what the source needs of every client."""
    return {**options.client_config, "logger": quiet_logger(),
            "allow.auto.create.topics": "false"}


class Cluster:
    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._admin = None
        self._timeout = min(_TIMEOUT_S, options.poll_timeout_ms / 1000)

    def _client(self):
        if self._admin is None:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient
            config = {name: value for name, value in client_config(self._options).items()
                      if name not in ("isolation.level", "allow.auto.create.topics")}
            try:
                self._admin = AdminClient(config)
            except KafkaException as error:
                raise SourceOptionError(f"the kafka.* options are not accepted by the client: "
                                        f"{error.args[0].str()}") from None
        return self._admin

    def topics(self) -> dict[str, int]:
        """Every topic the broker has (internal ones excluded), with its partition count."""
        from confluent_kafka import KafkaException
        try:
            metadata = self._client().list_topics(timeout=self._timeout)
        except KafkaException as error:
            raise SourceError(f"cannot reach a broker at {self._options.bootstrap}: "
                              f"{error.args[0].str()}") from None
        return {name: len(topic.partitions) for name, topic in metadata.topics.items()
                if topic.error is None and not name.startswith("__")}

    def partitions(self) -> list[TopicPartition]:
        """The subscription's partitions as they are now, sorted."""
        topics = self.topics()
        subscription = self._options.subscription
        if subscription.kind == "assign":
            return [(t, p) for t, p in subscription.assigned
                    if t in topics and p < topics[t]]
        return sorted((topic, partition) for topic, count in topics.items()
                      if subscription.matches(topic) for partition in range(count))

    def missing(self) -> list[str]:
        """Named topics (or assigned partitions) that do not exist, as readable names."""
        topics = self.topics()
        subscription = self._options.subscription
        if subscription.kind == "assign":
            return [f"{t}-{p}" for t, p in subscription.assigned
                    if t not in topics or p >= topics[t]]
        return [t for t in subscription.named_topics() if t not in topics]

    def earliest(self, partitions: list[TopicPartition]) -> Offsets:
        from confluent_kafka.admin import OffsetSpec
        return self._list_offsets(partitions, OffsetSpec.earliest())

    def latest(self, partitions: list[TopicPartition]) -> Offsets:
        from confluent_kafka.admin import OffsetSpec
        return self._list_offsets(partitions, OffsetSpec.latest())

    def for_time(self, partitions: list[TopicPartition], millis: int) -> Offsets:
        """The first offset at or after ``millis`` per partition; -1 where no record is."""
        from confluent_kafka.admin import OffsetSpec
        return self._list_offsets(partitions, OffsetSpec.for_timestamp(millis))

    def _list_offsets(self, partitions: list[TopicPartition], spec) -> Offsets:
        if not partitions:
            return {}
        from confluent_kafka import IsolationLevel, KafkaException
        from confluent_kafka import TopicPartition as KafkaTopicPartition
        isolation = (IsolationLevel.READ_COMMITTED if self._options.read_committed
                     else IsolationLevel.READ_UNCOMMITTED)
        result: Offsets = {}
        pending = [KafkaTopicPartition(t, p) for t, p in partitions]
        deadline = time.monotonic() + self._timeout
        while pending:
            futures = self._client().list_offsets({tp: spec for tp in pending},
                                                  isolation_level=isolation,
                                                  request_timeout=self._timeout)
            pending = []
            for tp, future in futures.items():
                try:
                    result[(tp.topic, tp.partition)] = future.result().offset
                except KafkaException as error:
                    # retriable: a leader moving, or a new leader whose high watermark is
                    # still catching up (OFFSET_NOT_AVAILABLE); ask again until the timeout
                    if _retriable(error.args[0]) and time.monotonic() < deadline:
                        pending.append(tp)
                        continue
                    raise SourceError(f"cannot look up offsets of {tp.topic}-{tp.partition} "
                                      f"at {self._options.bootstrap}: "
                                      f"{error.args[0].str()}") from None
            if pending:
                time.sleep(0.1)
        return result


# Broker answers worth asking again for: a leader moving, or a new leader whose high
# watermark has not caught up yet (librdkafka does not flag every one as retriable).
_RETRIABLE_CODES = {"OFFSET_NOT_AVAILABLE", "LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION",
                    "NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH",
                    "REQUEST_TIMED_OUT"}


def _retriable(error) -> bool:
    return error.retriable() or error.name() in _RETRIABLE_CODES
