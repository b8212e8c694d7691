"""``__consumer_offsets`` records in Kafka's formats, the group -> partition rule, the timer."""

from __future__ import annotations

import struct

import pytest

from oncelog.coordinator.group.records import (GroupMetadataKey, GroupMetadataValue,
                                               MemberRecord, OffsetAndMetadata, OffsetCommitKey,
                                               assigned_partitions, decode_group_metadata_value,
                                               decode_key, decode_offset_commit_value,
                                               group_metadata_key, group_metadata_value,
                                               offset_commit_key, offset_commit_value,
                                               partition_for, subscribed_topics)
from oncelog.coordinator.record_codec import java_string_hash
from oncelog.coordinator.timer import Timer
from oncelog.protocol.errors import KafkaError

from .harness import FakeClock, consumer_subscription


def test_offset_commit_key_and_value_are_kafkas_bytes():
    key = offset_commit_key("g", "t", 3)
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(key) == OffsetCommitKey("g", "t", 3)
    value = offset_commit_value(OffsetAndMetadata(42, 5, "meta", 1000))
    assert value == (b"\x00\x03" + struct.pack(">qi", 42, 5) + b"\x00\x04meta"
                     + struct.pack(">q", 1000))
    assert decode_offset_commit_value(value) == OffsetAndMetadata(42, 5, "meta", 1000)


def test_older_offset_commit_values_decode():
    v1 = b"\x00\x01" + struct.pack(">q", 7) + b"\x00\x00" + struct.pack(">qq", 10, 99)
    assert decode_offset_commit_value(v1) == OffsetAndMetadata(7, -1, "", 10)
    v4 = (b"\x00\x04" + struct.pack(">qi", 7, 2) + b"\x03ab" + struct.pack(">q", 10) + b"\x00")
    assert decode_offset_commit_value(v4) == OffsetAndMetadata(7, 2, "ab", 10)


def test_group_metadata_round_trips_with_members_and_nulls():
    value = GroupMetadataValue("consumer", 4, "range", "m1", 123, (
        MemberRecord("m1", "host-a", "client", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
        MemberRecord("m2", None, "client", "/127.0.0.2", 30000, 10000, b"", b"")))
    encoded = group_metadata_value(value)
    assert encoded[:2] == b"\x00\x03"
    assert decode_group_metadata_value(encoded) == value
    empty = GroupMetadataValue("consumer", 5, None, None, 124, ())
    assert decode_group_metadata_value(group_metadata_value(empty)) == empty
    assert decode_key(group_metadata_key("g")) == GroupMetadataKey("g")


def test_unknown_record_types_are_skipped_and_garbage_is_an_error():
    assert decode_key(b"\x00\x05\x00\x01g") is None  # a KIP-848 record type
    with pytest.raises(KafkaError):
        decode_offset_commit_value(b"\x00\x03\x00")
    with pytest.raises(KafkaError):
        decode_group_metadata_value(b"\x00\x09")


def test_partition_for_matches_kafkas_java_hash():
    assert java_string_hash("test") == 3556498  # "test".hashCode() in Java
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("test", 50) == 3556498 % 50
    assert java_string_hash("\u00e9\U0001f600") == ((0xE9 * 31 + 0xD83D) * 31 + 0xDE00)


def test_consumer_protocol_subscription_and_assignment():
    assert subscribed_topics(consumer_subscription("a", "b")) == {"a", "b"}
    assert subscribed_topics(b"\x00") is None
    assignment = struct.pack(">hi", 1, 1) + b"\x00\x01t" + struct.pack(">iii", 2, 0, 3)
    assert assigned_partitions(assignment) == {"t": [0, 3]}
    assert assigned_partitions(b"") == {}
    assert assigned_partitions(b"\x00\x00\x7f\xff\xff\xff") is None


def test_timer_runs_due_operations_in_deadline_order_and_replaces_by_key():
    clock = FakeClock(0)
    timer = Timer(clock)
    ran = []
    timer.schedule("a", 30, lambda: ran.append("a"))
    timer.schedule("b", 10, lambda: ran.append("b"))
    timer.schedule("c", 20, lambda: ran.append("c"))
    timer.schedule("b", 40, lambda: ran.append("b2"))  # replaces b
    timer.cancel("c")
    assert timer.next_deadline_ms() == 30
    clock.now_ms = 35
    assert timer.run_due() == 1 and ran == ["a"]
    clock.now_ms = 40
    timer.schedule("now", 0, lambda: ran.append("now"))
    assert timer.run_due() == 2 and ran == ["a", "b2", "now"]
    assert timer.next_deadline_ms() is None and len(timer) == 0


def test_a_failing_timer_operation_does_not_stop_the_others():
    clock = FakeClock(0)
    timer = Timer(clock)
    ran = []
    timer.schedule("bad", 0, lambda: 1 / 0)
    timer.schedule("good", 0, lambda: ran.append("good"))
    assert timer.run_due() == 2 and ran == ["good"]


def test_pushing_a_deadline_back_reuses_its_heap_item():
    """Each heartbeat pushes a session deadline back; the heap must not grow per heartbeat."""
    clock = FakeClock(0)
    timer = Timer(clock)
    ran = []
    for now in range(0, 10_000, 10):
        clock.now_ms = now
        timer.schedule("session", 100, lambda: ran.append(clock.now_ms))
        assert timer.run_due() == 0
    assert len(timer._heap) == 1 and timer.deadline_ms("session") == 10_090
    timer.schedule("session", 5, lambda: ran.append(("sooner", clock.now_ms)))  # brought forward
    clock.now_ms = 9_995
    assert timer.run_due() == 1 and ran == [("sooner", 9_995)]
    assert timer.next_deadline_ms() is None
