"""RecordBatch v2 headers: parsing, validation, the in-place patches the broker makes."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from oncelog.protocol.batches import (CRC_START, HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH,
                                      TIMESTAMP_TYPE_FLAG, TRANSACTIONAL_FLAG, build_batch,
                                      crc32c, iter_headers, parse_header, peek_offset_and_size,
                                      set_base_offset, set_log_append_time,
                                      set_partition_leader_epoch, validate_batch)
from oncelog.protocol.errors import ErrorCode, KafkaError
from oncelog.protocol.records import decode_records, make_batch

BODY = b"\x01\x02\x03\x04\x05"


def sample(**overrides) -> bytes:
    fields = dict(base_offset=7, attributes=TRANSACTIONAL_FLAG | 2, base_timestamp=1_000,
                  max_timestamp=1_500, producer_id=42, producer_epoch=3, base_sequence=11,
                  body=BODY, records_count=3, partition_leader_epoch=5)
    fields.update(overrides)
    return build_batch(**fields)


def code_of(batch: bytes | bytearray, position: int = 0, end: int | None = None) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        validate_batch(batch, position, len(batch) if end is None else end)
    return raised.value.code


def resign(batch: bytearray) -> bytearray:
    """Recompute the CRC so that a test reaches the check after it."""
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[CRC_START:])))
    return batch


# -- layout -------------------------------------------------------------------------------------

def test_crc32c_is_castagnoli():
    # The standard check value of CRC-32C (RFC 3720), not zlib's CRC-32 (0xCBF43926).
    assert crc32c(b"123456789") == 0xE3069283


def test_header_constants_match_the_v2_layout():
    assert (HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, CRC_START) == (61, 12, 49, 21)


def test_header_round_trip():
    batch = sample()
    header = parse_header(batch)
    assert header.base_offset == 7
    assert header.batch_length == len(batch) - LOG_OVERHEAD == MIN_BATCH_LENGTH + len(BODY)
    assert header.partition_leader_epoch == 5
    assert header.magic == 2
    assert header.crc == crc32c(batch[CRC_START:])
    assert header.attributes == TRANSACTIONAL_FLAG | 2
    assert header.last_offset_delta == 2
    assert (header.base_timestamp, header.max_timestamp) == (1_000, 1_500)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 11)
    assert header.records_count == 3
    assert header.size == len(batch)
    assert (header.last_offset, header.next_offset) == (9, 10)
    assert header.compression == 2
    assert header.is_transactional and not header.is_control and header.has_producer_id
    assert batch[HEADER_SIZE:] == BODY
    assert validate_batch(batch, 0, len(batch)) == header


def test_max_timestamp_defaults_to_base_timestamp_and_no_producer():
    header = parse_header(build_batch(base_timestamp=99, body=BODY, records_count=1))
    assert header.max_timestamp == 99
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert not header.has_producer_id and not header.is_transactional


def test_peek_offset_and_size_reads_a_batch_at_a_position():
    batch = sample(base_offset=123)
    assert peek_offset_and_size(b"xx" + batch, 2) == (123, len(batch))


def test_parse_header_at_a_position():
    first, second = sample(base_offset=0), sample(base_offset=3)
    assert parse_header(first + second, len(first)).base_offset == 3


def test_a_batch_from_kafka_python_validates_and_ours_reads_back_in_kafka_python():
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=9, producer_epoch=1, base_sequence=4,
                                        batch_size=1 << 20)
    for offset, value in enumerate([b"a", b"bb", None]):
        builder.append(offset, timestamp=1_000 + offset, key=b"k", value=value, headers=[])
    theirs = bytes(builder.build())
    header = validate_batch(theirs, 0, len(theirs))
    assert (header.records_count, header.producer_id, header.base_sequence) == (3, 9, 4)
    assert [r.value for r in decode_records(theirs)] == [b"a", b"bb", None]

    ours = make_batch([b"x", b"y"], keys=[b"1", None], timestamps=[5, 3], producer_id=9,
                      producer_epoch=1, base_sequence=0)
    read = DefaultRecordBatch(bytearray(ours))
    assert read.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in read] == [
        (0, 5, b"1", b"x"), (1, 3, None, b"y")]


# -- patches that keep the CRC ------------------------------------------------------------------

def test_set_base_offset_leaves_crc_covered_bytes_alone():
    batch = bytearray(sample())
    covered = bytes(batch[CRC_START:])
    set_base_offset(batch, 0, 1 << 40)
    assert bytes(batch[CRC_START:]) == covered
    header = validate_batch(batch, 0, len(batch))
    assert header.base_offset == 1 << 40
    assert header.next_offset == (1 << 40) + 3


def test_set_partition_leader_epoch_leaves_crc_covered_bytes_alone():
    batch = bytearray(sample())
    covered = bytes(batch[CRC_START:])
    set_partition_leader_epoch(batch, 0, 77)
    assert bytes(batch[CRC_START:]) == covered
    header = validate_batch(batch, 0, len(batch))
    assert header.partition_leader_epoch == 77
    assert header.base_offset == 7  # the neighbouring field is untouched


def test_patches_at_a_position_touch_only_that_batch():
    first, second = sample(base_offset=0), sample(base_offset=0)
    buffer = bytearray(first + second)
    set_base_offset(buffer, len(first), 3)
    set_partition_leader_epoch(buffer, len(first), 9)
    assert bytes(buffer[:len(first)]) == first
    assert [(p, h.base_offset, h.partition_leader_epoch) for p, h in iter_headers(buffer)] == [
        (0, 0, 5), (len(first), 3, 9)]
    validate_batch(buffer, len(first), len(buffer))


def test_set_log_append_time_sets_the_flag_and_resigns():
    prefix = b"\xee" * 3  # a batch not at position 0
    buffer = bytearray(prefix + sample())
    old_crc = parse_header(buffer, 3).crc
    set_log_append_time(buffer, 3, len(buffer) - 3, 123_456_789)
    header = validate_batch(buffer, 3, len(buffer))  # would raise on a stale CRC
    assert header.attributes & TIMESTAMP_TYPE_FLAG
    assert header.attributes == TRANSACTIONAL_FLAG | 2 | TIMESTAMP_TYPE_FLAG  # others kept
    assert header.max_timestamp == 123_456_789
    assert header.base_timestamp == 1_000
    assert header.crc != old_crc
    assert bytes(buffer[:3]) == prefix
    assert DefaultRecordBatch(bytearray(buffer[3:])).validate_crc()


# -- rejection ----------------------------------------------------------------------------------

@pytest.mark.parametrize("offset", [CRC_START, 30, HEADER_SIZE, -1])
def test_a_flipped_bit_in_crc_covered_bytes_is_corrupt(offset):
    batch = bytearray(sample())
    batch[offset] ^= 0x10
    assert code_of(batch) == ErrorCode.CORRUPT_MESSAGE


def test_a_wrong_crc_field_is_corrupt():
    batch = bytearray(sample())
    batch[17] ^= 0xFF
    with pytest.raises(KafkaError, match="CRC"):
        validate_batch(batch, 0, len(batch))


def test_fewer_bytes_than_a_header_is_corrupt():
    batch = sample()
    assert code_of(batch[:HEADER_SIZE - 1]) == ErrorCode.CORRUPT_MESSAGE
    assert code_of(b"") == ErrorCode.CORRUPT_MESSAGE


def test_batch_length_beyond_the_buffer_is_corrupt():
    batch = sample()
    assert code_of(batch[:-1]) == ErrorCode.CORRUPT_MESSAGE
    # the same bytes, but the caller's end cuts the batch short
    assert code_of(batch + b"\x00" * 10, end=len(batch) - 1) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("batch_length", [MIN_BATCH_LENGTH - 1, 0, -1, -(1 << 31)])
def test_batch_length_below_the_header_is_corrupt(batch_length):
    batch = bytearray(sample())
    struct.pack_into(">i", batch, 8, batch_length)
    assert code_of(batch) == ErrorCode.CORRUPT_MESSAGE


def test_batch_length_shorter_than_the_bytes_sent_covers_only_its_own_bytes():
    # A client's records field may carry several batches: a length that stops early leaves
    # the rest to the next batch, and the CRC must then cover only this batch's bytes.
    batch = sample()
    validate_batch(batch + b"trailing", 0, len(batch) + 8)


@pytest.mark.parametrize("magic", [0, 1, 3, -1])
def test_other_magic_is_unsupported(magic):
    batch = bytearray(sample())
    batch[16] = magic & 0xFF
    assert code_of(batch) == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


@pytest.mark.parametrize("count", [0, -1, -(1 << 31)])
def test_zero_or_negative_record_count_is_invalid(count):
    batch = bytearray(sample())
    struct.pack_into(">i", batch, 57, count)       # records_count
    struct.pack_into(">i", batch, 23, max(count - 1, -(1 << 31)))  # last_offset_delta
    assert code_of(resign(batch)) == ErrorCode.INVALID_RECORD


def test_last_offset_delta_disagreeing_with_count_is_invalid():
    batch = bytearray(sample())
    struct.pack_into(">i", batch, 23, 5)  # three records claim a last offset delta of 5
    assert code_of(resign(batch)) == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_compression_is_unsupported(codec):
    batch = sample(attributes=codec)
    assert code_of(batch) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_known_compressions_validate(codec):
    batch = sample(attributes=codec, body=BODY * 5)  # uncompressed, 3 records need 21 bytes
    assert validate_batch(batch, 0, len(batch)).compression == codec


# -- iterating ----------------------------------------------------------------------------------

def test_iter_headers_yields_each_whole_batch_with_its_position():
    a, b, c = sample(base_offset=0), sample(base_offset=3, body=b"longer body"), sample(
        base_offset=6)
    buffer = a + b + c
    assert [(p, h.base_offset) for p, h in iter_headers(buffer)] == [
        (0, 0), (len(a), 3), (len(a) + len(b), 6)]
    assert [p for p, _ in iter_headers(buffer, len(a))] == [len(a), len(a) + len(b)]
    assert [p for p, _ in iter_headers(buffer, 0, len(a) + len(b))] == [0, len(a)]


@pytest.mark.parametrize("cut", [1, HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 2])
def test_iter_headers_stops_at_a_partial_trailing_batch(cut):
    a, b = sample(base_offset=0), sample(base_offset=3)
    buffer = a + b[:cut]
    assert [p for p, _ in iter_headers(buffer)] == [0]


def test_iter_headers_stops_at_a_nonsense_length():
    a = sample()
    junk = bytearray(sample())
    struct.pack_into(">i", junk, 8, 3)  # batch_length below the header: never loops forever
    assert [p for p, _ in iter_headers(a + junk)] == [0]
    assert list(iter_headers(b"")) == []
