"""The source's options, parsed and checked on the driver (no broker needed)."""

from __future__ import annotations

import pytest

from oncelog.spark.errors import SourceOptionError
from oncelog.spark.options import parse_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(streaming=True, **options):
    return parse_options({**BASE, **options}, streaming=streaming)


def test_sparks_option_names_are_case_insensitive_and_kafka_options_reach_the_client():
    options = parse(SUBSCRIBE="a, b", maxoffsetspertrigger="10", **{
        "kafka.security.protocol": "PLAINTEXT", "includeHeaders": "TRUE"})
    assert options.subscription.topics == ("a", "b")
    assert options.max_offsets_per_trigger == 10 and options.include_headers
    assert options.client_config["security.protocol"] == "PLAINTEXT"
    assert options.client_config["isolation.level"] == "read_committed"
    assert options.fail_on_data_loss


def test_defaults_differ_between_batch_and_streaming_as_in_spark():
    assert parse(streaming=True, subscribe="a").starting.kind == "latest"
    assert parse(streaming=False, subscribe="a").starting.kind == "earliest"
    assert parse(streaming=False, subscribe="a").ending.kind == "latest"


def test_offsets_json_and_assign():
    options = parse(assign='{"a": [1, 0]}', startingOffsets='{"a": {"0": -2, "1": 17}}')
    assert options.subscription.assigned == (("a", 0), ("a", 1))
    assert options.starting.offsets == {("a", 0): -2, ("a", 1): 17}
    pattern = parse(subscribePattern="orders-.*").subscription
    assert pattern.matches("orders-eu") and not pattern.matches("my-orders-eu")


@pytest.mark.parametrize("streaming, options, message", [
    (True, {"subscribe": "a", "endingOffsets": "latest"}, None),
    (True, {"subscribe": "a", "endingOffsets": '{"a": {"0": 5}}'}, "for batch queries only"),
    (False, {"subscribe": "a", "startingOffsets": "latest"}, "not allowed in a batch query"),
    (False, {"subscribe": "a", "endingOffsets": "earliest"}, "not allowed in a batch query"),
    (False, {"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, "may not use -2"),
    (True, {"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, "not a valid offset"),
    (True, {"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, "not a partition number"),
    (True, {"subscribe": "a", "startingOffsets": '{"a": [1]}'}, "needs an object"),
    (True, {"subscribe": "a", "startingOffsets": '["a"]'}, "must be earliest, latest or JSON"),
    (True, {"assign": '["a"]'}, "must be a JSON object"),
    (True, {"subscribe": "a", "startingTimestamp": "yesterday"}, "milliseconds since the epoch"),
    (True, {"subscribe": " , "}, "names no topic"),
    (True, {"assign": '{"a": [-1]}'}, "needs a list of partition numbers"),
    (True, {"assign": '{"a": []}'}, "names no partition"),
    (True, {"assign": '{"a": [0]}', "startingOffsets": '{"b": {"0": 1}}'}, "is not in assign"),
    (True, {"subscribe": "a", "failOnDataLoss": "yes"}, "must be true or false"),
    (True, {"subscribe": "a", "kafka.enable.auto.commit": "true"}, "checkpoint"),
    (True, {"subscribe": "a", "kafka.value.deserializer": "x"}, "always read as binary"),
    (True, {"subscribe": "a", "startingOffsetsByTimestampStrategy": "skip"}, "error or latest"),
    (True, {"subscribe": "a", "fetchOffset.numRetries": "three"},
     "fetchOffset.numRetries must be an integer, 0 or more, not 'three'"),
    (True, {"subscribe": "a", "fetchOffset.numRetries": "-1"}, "fetchOffset.numRetries must be"),
    (True, {"subscribe": "a", "fetchOffset.retryIntervalMs": "1.5"},
     "fetchOffset.retryIntervalMs must be an integer"),
    (True, {"subscribe": "a", "fetchOffset.retryIntervalMs": "-10"},
     "fetchOffset.retryIntervalMs must be"),
    (False, {"subscribe": "a", "fetchOffset.retryIntervalMs": "0"}, None),
])
def test_bad_options_are_one_sentence_naming_the_option(streaming, options, message):
    if message is None:
        parse(streaming, **options)
        return
    with pytest.raises(SourceOptionError, match=message) as raised:
        parse(streaming, **options)
    assert "\n" not in str(raised.value)
