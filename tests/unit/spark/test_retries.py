"""The source's retries (issue 31): which broker errors are asked again, how many times, how
far apart, and the one sentence when it gives up. librdkafka's own error objects, no broker:
tests/cluster/test_spark_source_failover.py kills real leaders under a reading source."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from oncelog.spark.errors import SourceError
from oncelog.spark.options import parse_options
from oncelog.spark.retries import NO_OFFSET, Tries, is_retriable

WHAT = "cannot look up offsets of orders-1 at 127.0.0.1:9092"


@pytest.mark.parametrize("code", [
    KafkaError.NOT_LEADER_FOR_PARTITION,       # NOT_LEADER_OR_FOLLOWER
    KafkaError.FENCED_LEADER_EPOCH,            # the "Leader epoch is older than ..."
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.OFFSET_NOT_AVAILABLE,           # a new leader's high watermark catching up
    KafkaError.UNKNOWN_TOPIC_OR_PART,          # a new leader that has not applied it yet
    KafkaError._TRANSPORT,                     # a broker that went away
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
])
def test_a_leader_moving_or_a_broker_gone_is_retriable(code):
    assert is_retriable(KafkaError(code))


@pytest.mark.parametrize("code", [
    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError.UNSUPPORTED_VERSION, KafkaError.INVALID_REQUEST, KafkaError.UNKNOWN,
])
def test_other_errors_are_not(code):
    assert not is_retriable(KafkaError(code))


def test_no_leader_in_the_metadata_is_retriable():
    """librdkafka's admin ListOffsets when Metadata names leader -1 for the partition (an
    election under way, or a broker cut off from the cluster answering): CI, 2026-11-29, the
    Spark copy job gave up on it between two partitions of the leader."""
    assert is_retriable(KafkaError(KafkaError._NOENT,
                                   "Failed to query partition leaders: No leaders found"))


def test_a_fatal_error_is_never_retried():
    assert not is_retriable(KafkaError(KafkaError._TRANSPORT, fatal=True))


def test_no_offset_in_an_answer_is_retriable():
    assert is_retriable(NO_OFFSET)


class _Clock:
    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def test_num_retries_and_the_interval_are_honoured_then_one_sentence():
    clock = _Clock()
    tries = Tries(3, 250, sleep=clock.sleep)
    error = KafkaError(KafkaError.FENCED_LEADER_EPOCH)
    for _ in range(3):
        tries.failed(error, WHAT)               # waits, so the caller asks again
    assert clock.sleeps == [0.25, 0.25, 0.25]
    with pytest.raises(SourceError) as failure:
        tries.failed(error, WHAT)
    assert clock.sleeps == [0.25, 0.25, 0.25]   # no wait before giving up
    message = str(failure.value)
    assert message == (
        "cannot look up offsets of orders-1 at 127.0.0.1:9092: Broker: Leader epoch is older "
        "than broker epoch (FENCED_LEADER_EPOCH), still after 4 tries 250 ms apart on new "
        "clients (fetchOffset.numRetries=3, fetchOffset.retryIntervalMs=250; raise them to "
        "wait longer)")
    assert "\n" not in message


def test_zero_retries_fail_at_the_first_retriable_error():
    clock = _Clock()
    with pytest.raises(SourceError, match=r"still after 1 try 1000 ms apart"):
        Tries(0, 1000, sleep=clock.sleep).failed(KafkaError(KafkaError._TRANSPORT), WHAT)
    assert clock.sleeps == []


def test_a_non_retriable_error_fails_at_once():
    clock = _Clock()
    with pytest.raises(SourceError) as failure:
        Tries(3, 1000, sleep=clock.sleep).failed(
            KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), WHAT)
    assert clock.sleeps == []
    assert str(failure.value) == (
        "cannot look up offsets of orders-1 at 127.0.0.1:9092: Broker: Topic authorization "
        "failed (TOPIC_AUTHORIZATION_FAILED), which is not worth another try")


def test_progress_starts_the_count_again():
    clock = _Clock()
    tries = Tries(1, 10, sleep=clock.sleep)
    error = KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)
    tries.failed(error, WHAT)
    tries.progressed()                          # a read got records since
    tries.failed(error, WHAT)
    with pytest.raises(SourceError, match="still after 2 tries"):
        tries.failed(error, WHAT)
    assert clock.sleeps == [0.01, 0.01]


def test_the_options_reach_the_source_with_sparks_defaults():
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a"}
    defaults = parse_options(base, streaming=True)
    assert (defaults.fetch_offset_num_retries, defaults.fetch_offset_retry_interval_ms) == \
        (3, 1000)
    given = parse_options({**base, "fetchOffset.numRetries": "0",
                           "FETCHOFFSET.RETRYINTERVALMS": "20"}, streaming=True)
    assert (given.fetch_offset_num_retries, given.fetch_offset_retry_interval_ms) == (0, 20)
