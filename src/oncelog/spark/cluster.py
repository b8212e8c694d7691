"""Driver-side lookups against the broker: which partitions, and where each one begins and ends.

One ``Cluster`` per reader, created lazily on the driver and never pickled (executors read
with their own clients, see ``ranges``). Offsets come from ListOffsets in one request per
call (``AdminClient.list_offsets``), with the query's isolation level, so ``latest`` is the
last stable offset under ``read_committed``. Topic lookups never create a topic.

A retriable answer (a leader moving, a broker gone: ``retries.py``) is asked again, for the
partitions that got one, on a new admin client - fresh metadata, so the new leader and its
epoch, as Spark's ``KafkaOffsetReaderAdmin`` resets its admin - ``fetchOffset.
retryIntervalMs`` later, at most ``fetchOffset.numRetries`` times. (Asking the same client
again does not do: librdkafka's admin client kept answering FENCED_LEADER_EPOCH for 30 s
after a leader was killed, issue 31.) One try waits at most ``_TRY_TIMEOUT_S`` for an
answer (less with a shorter ``kafkaConsumer.pollTimeoutMs``): a request to a killed leader
is answered only by that timeout, and a new client learns the new leader sooner.
"""

from __future__ import annotations

import logging

from .errors import SourceOptionError
from .offsets import Offsets, TopicPartition
from .options import SourceOptions
from .retries import NO_OFFSET, Tries, is_retriable

_TRY_TIMEOUT_S = 10.0   # at most; a shorter kafkaConsumer.pollTimeoutMs shortens it


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
        self._timeout = min(_TRY_TIMEOUT_S, options.poll_timeout_ms / 1000)

    def _tries(self) -> Tries:
        return Tries(self._options.fetch_offset_num_retries,
                     self._options.fetch_offset_retry_interval_ms)

    def _reset(self) -> None:
        """The next request goes through a new client, which reads metadata afresh."""
        self._admin = None

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
        tries = self._tries()
        while True:
            try:
                metadata = self._client().list_topics(timeout=self._timeout)
                break
            except KafkaException as error:
                tries.failed(error.args[0], f"cannot reach a broker at "
                                            f"{self._options.bootstrap}")
                self._reset()
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
        return self._list_offsets(partitions, OffsetSpec.earliest(), lowest=0)

    def latest(self, partitions: list[TopicPartition]) -> Offsets:
        from confluent_kafka.admin import OffsetSpec
        return self._list_offsets(partitions, OffsetSpec.latest(), lowest=0)

    def for_time(self, partitions: list[TopicPartition], millis: int) -> Offsets:
        """The first offset at or after ``millis`` per partition; -1 where no record is."""
        from confluent_kafka.admin import OffsetSpec
        return self._list_offsets(partitions, OffsetSpec.for_timestamp(millis), lowest=-1)

    def _list_offsets(self, partitions: list[TopicPartition], spec, *, lowest: int) -> Offsets:
        """``spec``'s offset of each partition; an answer below ``lowest`` is no answer (-1
        is a timestamp lookup's "no record at or after it"; librdkafka's -1001 is none)."""
        if not partitions:
            return {}
        from confluent_kafka import IsolationLevel, KafkaException
        from confluent_kafka import TopicPartition as KafkaTopicPartition
        isolation = (IsolationLevel.READ_COMMITTED if self._options.read_committed
                     else IsolationLevel.READ_UNCOMMITTED)
        result: Offsets = {}
        pending = [KafkaTopicPartition(t, p) for t, p in partitions]
        tries = self._tries()
        while True:
            failures: dict = {}
            try:
                futures = self._client().list_offsets({tp: spec for tp in pending},
                                                      isolation_level=isolation,
                                                      request_timeout=self._timeout)
            except KafkaException as error:   # the whole request: every partition failed
                futures = {}
                failures = {tp: error.args[0] for tp in pending}
            for tp, future in futures.items():
                try:
                    offset = future.result().offset
                except KafkaException as error:
                    failures[tp] = error.args[0]
                    continue
                if offset < lowest:
                    failures[tp] = NO_OFFSET
                else:
                    result[(tp.topic, tp.partition)] = offset
            if not failures:
                return result
            # one partition's error stands for the rest, in one sentence: a non-retriable
            # one if there is any (it fails the lookup at once), else the first
            tp, failure = min(failures.items(), key=lambda item: (
                is_retriable(item[1]), item[0].topic, item[0].partition))
            tries.failed(failure, f"cannot look up offsets of {tp.topic}-{tp.partition} at "
                                f"{self._options.bootstrap}")
            self._reset()
            pending = list(failures)

