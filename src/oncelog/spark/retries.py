"""Which broker answers the source asks again for, how often, and the sentence when it gives up.

A leader that moves (killed, paused past its session, a controlled shutdown) makes every
client see a few answers that only mean "ask again, somewhere else": NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH and UNKNOWN_LEADER_EPOCH (the client's leader epoch is behind or ahead of
the broker's), LEADER_NOT_AVAILABLE (no leader elected yet), OFFSET_NOT_AVAILABLE (a new
leader whose high watermark has not caught up, KIP-207), REQUEST_TIMED_OUT, and a broker
that went away (librdkafka's ``_TRANSPORT``, ``_TIMED_OUT``, ``_ALL_BROKERS_DOWN``), and
librdkafka's ``_NOENT`` "Failed to query partition leaders: No leaders found" (its admin
client's ListOffsets when Metadata names leader -1: an election under way, or a broker cut
off from the cluster answering, as Kafka's fenced brokers do, that it knows no leader). These
are ``RETRIABLE_CODES``, with whatever librdkafka flags retriable itself and Kafka's
retriable metadata errors (UNKNOWN_TOPIC_OR_PARTITION: a new leader that has not applied the
partition yet; KAFKA_STORAGE_ERROR). ``NO_OFFSET`` stands for a ListOffsets answer that
holds no offset and no error (librdkafka's -1001 after a killed leader's timeout).

Spark's Kafka source (``KafkaOffsetReaderAdmin.withRetries``) retries a failed offset lookup
``fetchOffset.numRetries`` times, ``fetchOffset.retryIntervalMs`` apart, each time on a new
admin client (``resetAdmin``): new metadata, so the new leader and its epoch. ``Tries`` does
the same for the driver's ListOffsets and Metadata (``cluster.py``) and an executor's fetch
(``ranges.py``): a retriable error waits the interval and lets the caller ask again on a new
client; a non-retriable one, or one more retriable error after ``fetchOffset.numRetries``
retries, raises ``SourceError`` with one sentence naming what was asked, the broker's error
and how many tries were made. Divergence, on purpose: a try here is the first ask plus
``numRetries`` retries (4 tries by default, as Spark's documentation words the option),
where Spark's code counts the first try among the ``numRetries``; and librdkafka retries
less inside one try than the Java client does, so the count matters more here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from .errors import SourceError

__all__ = ["NO_OFFSET", "RETRIABLE_CODES", "LocalError", "Tries", "is_retriable"]

log = logging.getLogger(__name__)

# librdkafka's names (KafkaError.name()): NOT_LEADER_FOR_PARTITION is its name for code 6
# (NOT_LEADER_OR_FOLLOWER in Kafka), UNKNOWN_TOPIC_OR_PART for code 3.
RETRIABLE_CODES = frozenset({
    "NOT_LEADER_FOR_PARTITION", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH",
    "LEADER_NOT_AVAILABLE", "OFFSET_NOT_AVAILABLE", "REQUEST_TIMED_OUT",
    "UNKNOWN_TOPIC_OR_PART", "KAFKA_STORAGE_ERROR", "BROKER_NOT_AVAILABLE",
    # a broker that went away, as librdkafka reports it locally
    "_TRANSPORT", "_TIMED_OUT", "_TIMED_OUT_QUEUE", "_ALL_BROKERS_DOWN", "_NODE_UPDATE",
    # no leader for the partition in the Metadata answer (LEADER_NOT_AVAILABLE, locally)
    "_NOENT",
})


class BrokerError(Protocol):
    """What ``Tries`` needs of a librdkafka error (``confluent_kafka.KafkaError``)."""

    def name(self) -> str: ...

    def str(self) -> str: ...

    def retriable(self) -> bool: ...

    def fatal(self) -> bool: ...


class LocalError:
    """A failure the source itself noticed, shaped like a librdkafka error."""

    def __init__(self, name: str, text: str, *, retriable: bool) -> None:
        self._name, self._text, self._retriable = name, text, retriable

    def name(self) -> str:
        return self._name

    def str(self) -> str:
        return self._text

    def retriable(self) -> bool:
        return self._retriable

    def fatal(self) -> bool:
        return False


# librdkafka 2.x answers a ListOffsets whose partition leader never replied (killed) with
# offset -1001 and no error once the request times out (seen with confluent-kafka 2.16).
NO_OFFSET = LocalError("NO_OFFSET", "the broker's answer held no offset (-1001)",
                       retriable=True)


def is_retriable(error: BrokerError) -> bool:
    """Worth asking again, on a new client: a leader moving or a broker gone."""
    if error.fatal():
        return False
    return error.retriable() or error.name() in RETRIABLE_CODES


class Tries:
    """The tries of one lookup or read: ``failed`` after each failure either waits the
    interval (the caller then asks again on a new client) or raises ``SourceError``;
    ``progressed`` starts the count again (a read that got records since its last failure)."""

    def __init__(self, num_retries: int, retry_interval_ms: int, *,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.num_retries = num_retries
        self.retry_interval_ms = retry_interval_ms
        self.retries = 0          # since the last progress
        self._sleep = sleep

    @property
    def tries(self) -> int:
        return self.retries + 1

    def failed(self, error: BrokerError, what: str) -> None:
        """``what`` failed with ``error`` (e.g. "cannot look up offsets of orders-1 at
        HOST:PORT"): wait, or raise when it is not retriable or the retries are spent."""
        reason = f"{what}: {error.str()} ({error.name()})"
        if not is_retriable(error):
            raise SourceError(f"{reason}, which is not worth another try")
        if self.retries >= self.num_retries:
            raise SourceError(
                f"{reason}, still after {self.tries} {'try' if self.tries == 1 else 'tries'} "
                f"{self.retry_interval_ms} ms apart on new clients (fetchOffset.numRetries="
                f"{self.num_retries}, fetchOffset.retryIntervalMs={self.retry_interval_ms}; "
                "raise them to wait longer)")
        self.retries += 1
        log.warning("%s, try %d of %d; trying again in %d ms on a new client", reason,
                    self.retries, self.num_retries + 1, self.retry_interval_ms)
        self._sleep(self.retry_interval_ms / 1000)

    def progressed(self) -> None:
        self.retries = 0
