"""Transaction markers: Kafka's control-batch layout, checked byte by byte and against
kafka-python's independent decoder, and refused when they are not markers."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch

from oncelog.protocol.batches import (CONTROL_FLAG, HEADER_SIZE, TRANSACTIONAL_FLAG,
                                      build_batch, parse_header, validate_batch)
from oncelog.protocol.control_records import (ABORT, COMMIT, Marker, decode_marker,
                                              encode_marker)
from oncelog.protocol.errors import ErrorCode, KafkaError
from oncelog.protocol.records import decode_records, encode_record, make_batch


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_marker_is_a_control_batch_in_kafkas_layout(commit):
    batch = encode_marker(producer_id=4321, producer_epoch=7, commit=commit,
                          coordinator_epoch=9, timestamp_ms=1_700_000_000_000)
    header = validate_batch(batch, 0, len(batch))  # CRC and lengths right
    assert header.attributes == TRANSACTIONAL_FLAG | CONTROL_FLAG == 0x30
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4321, 7, -1)
    assert (header.records_count, header.last_offset_delta) == (1, 0)
    assert header.base_timestamp == header.max_timestamp == 1_700_000_000_000
    record, = decode_records(batch, header)
    # key: int16 version 0, int16 type; value: int16 version 0, int32 coordinator epoch
    assert record.key == struct.pack(">hh", 0, COMMIT if commit else ABORT)
    assert record.value == struct.pack(">hi", 0, 9)
    assert record.headers == [] and record.offset == 0
    assert decode_marker(batch) == Marker(commit, 9)
    assert decode_marker(batch, header) == (commit, 9)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_kafka_python_reads_our_marker(commit):
    batch = DefaultRecordBatch(encode_marker(11, 0, commit, 3, 5))
    assert batch.is_control_batch and batch.is_transactional
    record, = list(batch)
    assert (record.commit, record.abort, record.version) == (commit, not commit, 0)


def test_a_newer_marker_version_is_read_for_the_fields_it_shares():
    body = encode_record(0, 0, struct.pack(">hh", 1, COMMIT), struct.pack(">hi", 1, 12) + b"xx")
    batch = build_batch(attributes=0x30, producer_id=1, producer_epoch=0, body=body,
                        records_count=1)
    assert decode_marker(batch) == Marker(True, 12)


@pytest.mark.parametrize("key,value", [
    (struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 1)),  # another control type (KRaft's)
    (b"\x00", struct.pack(">hi", 0, 1)),  # key too short
    (struct.pack(">hh", 0, 1), None),  # no value
    (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1)),  # negative version
], ids=["leader-change", "short-key", "null-value", "negative-version"])
def test_a_control_batch_that_is_not_a_marker_is_corrupt(key, value):
    batch = build_batch(attributes=0x30, producer_id=1, producer_epoch=0,
                        body=encode_record(0, 0, key, value), records_count=1)
    with pytest.raises(KafkaError) as raised:
        decode_marker(batch)
    assert raised.value.code == ErrorCode.CORRUPT_MESSAGE


def test_a_data_batch_is_not_a_marker():
    with pytest.raises(KafkaError) as raised:
        decode_marker(make_batch([b"x"], producer_id=1, producer_epoch=0, base_sequence=0,
                                 attributes=TRANSACTIONAL_FLAG))
    assert raised.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError):
        decode_marker(b"\x00" * (HEADER_SIZE - 1))


def test_the_log_patches_what_the_crc_does_not_cover():
    batch = bytearray(encode_marker(1, 2, True, 3, 4, base_offset=0))
    batch[0:8] = struct.pack(">q", 99)
    assert parse_header(batch).base_offset == 99
    validate_batch(batch, 0, len(batch))
    assert decode_marker(batch) == (True, 3)
