"""Records inside a v2 batch: the varint codec, the five codecs, and corrupt bodies."""

from __future__ import annotations

import struct

import cramjam
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from oncelog.protocol.batches import (HEADER_SIZE, build_batch, parse_header, set_base_offset,
                                      validate_batch)
from oncelog.protocol.errors import ErrorCode, KafkaError
from oncelog.protocol.records import (GZIP, LZ4, NONE, SNAPPY, ZSTD, Record, compress,
                                      decode_records, decompress, encode_record, make_batch)

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def corrupt_code(batch: bytes) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        decode_records(batch)
    return raised.value.code


# -- golden bytes -------------------------------------------------------------------------------

def test_encode_record_golden_bytes():
    # length 7 | attributes 0 | ts delta 0 | offset delta 0 | key null (-1) | value "v" | 0 headers
    assert encode_record(0, 0, None, b"v") == b"\x0e\x00\x00\x00\x01\x02v\x00"


def test_encode_record_zigzag_varints():
    record = encode_record(64, -1, b"", None, [("h", b"x")])
    # ts delta -1 -> 01, offset delta 64 -> 80 01, empty key -> 00, null value -> 01,
    # one header (02): name "h" (02 68), value "x" (02 78)
    assert record == b"\x16\x00\x01\x80\x01\x00\x01\x02\x02h\x02x"


# -- round trips --------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_make_batch_round_trip(codec):
    values = [b"first", None, b"", b"x" * 3000]
    keys = [b"k1", b"k2", None, b""]
    timestamps = [1_700_000_000_500, 1_700_000_000_100, 1_700_000_000_900, 1_700_000_000_100]
    batch = make_batch(values, keys=keys, timestamps=timestamps, codec=codec)
    header = validate_batch(batch, 0, len(batch))
    assert header.compression == codec
    assert (header.base_timestamp, header.max_timestamp) == (1_700_000_000_100,
                                                             1_700_000_000_900)
    assert header.records_count == 4
    if codec != NONE:
        assert len(batch) < HEADER_SIZE + 3000  # the body really is compressed
    assert decode_records(batch) == [
        Record(offset, ts, key, value, [])
        for offset, (key, value, ts) in enumerate(zip(keys, values, timestamps))]


@pytest.mark.parametrize("codec", CODECS)
def test_records_with_headers_round_trip(codec):
    rows = [(b"a", b"1", 50, [("trace", b"abc"), ("empty", b""), ("null", None)]),
            (None, None, 10, []),
            (b"c", b"3", 30, [("unicode-\u00e9", b"\xff\x00")])]
    body = b"".join(encode_record(i, ts - 10, key, value, headers)
                    for i, (key, value, ts, headers) in enumerate(rows))
    batch = build_batch(attributes=codec, base_timestamp=10, max_timestamp=50,
                        body=compress(codec, body), records_count=len(rows))
    assert decode_records(batch) == [Record(i, ts, key, value, headers)
                                     for i, (key, value, ts, headers) in enumerate(rows)]


def test_offsets_follow_a_patched_base_offset():
    batch = bytearray(make_batch([b"a", b"b", b"c"], timestamp_ms=5))
    set_base_offset(batch, 0, 1000)
    assert [(r.offset, r.timestamp) for r in decode_records(bytes(batch))] == [
        (1000, 5), (1001, 5), (1002, 5)]


def test_decode_records_uses_the_given_header_and_ignores_trailing_bytes():
    batch = make_batch([b"a", b"b"], timestamp_ms=7)
    header = parse_header(batch)
    records = decode_records(batch + make_batch([b"next"]), header)
    assert [r.value for r in records] == [b"a", b"b"]


def test_producer_fields_and_attributes_reach_the_header():
    batch = make_batch([b"a"], producer_id=5, producer_epoch=2, base_sequence=17,
                       attributes=0x10, codec=GZIP)
    header = parse_header(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 2, 17)
    assert header.is_transactional and header.compression == GZIP


def test_gzip_batches_interoperate_with_kafka_python():
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=GZIP, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=20, key=None, value=b"v0", headers=[("h", b"1")])
    builder.append(1, timestamp=10, key=b"k", value=None, headers=[])
    theirs = bytes(builder.build())
    assert decode_records(theirs) == [Record(0, 20, None, b"v0", [("h", b"1")]),
                                      Record(1, 10, b"k", None, [])]

    ours = make_batch([b"x", None], keys=[None, b"y"], timestamps=[9, 4], codec=GZIP)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in DefaultRecordBatch(ours)] == [
        (0, 9, None, b"x"), (1, 4, b"y", None)]


# -- compression --------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_compress_decompress_round_trip(codec):
    data = bytes(range(256)) * 20
    assert decompress(codec, compress(codec, data)) == data


def test_snappy_is_raw_not_framed():
    data = b"snappy " * 50
    assert compress(SNAPPY, data) == bytes(cramjam.snappy.compress_raw(data))


def test_xerial_framed_snappy_decompresses():
    blocks = [b"hello " * 40, b"world " * 40, b"!"]
    framed = XERIAL_HEADER + b"".join(
        struct.pack(">i", len(raw)) + raw
        for raw in (bytes(cramjam.snappy.compress_raw(block)) for block in blocks))
    assert decompress(SNAPPY, framed) == b"".join(blocks)


def test_xerial_framed_snappy_batch_decodes():
    # Java clients using snappy-java's stream format send exactly this inside a batch.
    body = b"".join(encode_record(i, 0, None, value) for i, value in enumerate([b"a", b"b"]))
    raw = bytes(cramjam.snappy.compress_raw(body))
    framed = XERIAL_HEADER + struct.pack(">i", len(raw)) + raw
    batch = build_batch(attributes=SNAPPY, body=framed, records_count=2)
    assert [r.value for r in decode_records(batch)] == [b"a", b"b"]


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_compressed_body_is_corrupt(codec):
    with pytest.raises(KafkaError) as raised:
        decompress(codec, b"definitely not compressed")
    assert raised.value.code == ErrorCode.CORRUPT_MESSAGE


def test_truncated_xerial_block_is_corrupt():
    raw = bytes(cramjam.snappy.compress_raw(b"hello " * 40))
    framed = XERIAL_HEADER + struct.pack(">i", len(raw)) + raw[:-5]
    with pytest.raises(KafkaError) as raised:
        decompress(SNAPPY, framed)
    assert raised.value.code == ErrorCode.CORRUPT_MESSAGE


def test_unknown_codec():
    with pytest.raises(KafkaError) as raised:
        decompress(5, b"")
    assert raised.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    with pytest.raises(ValueError):
        compress(6, b"")


# -- corrupt record bodies ----------------------------------------------------------------------

def _batch_around(body: bytes, count: int, codec: int = NONE) -> bytes:
    # A correct header and CRC around a broken body: validate_batch passes, records do not.
    batch = build_batch(attributes=codec, body=compress(codec, body), records_count=count)
    validate_batch(batch, 0, len(batch))
    return batch


@pytest.mark.parametrize("cut", [1, 3, 6])
def test_truncated_record_body_is_corrupt(cut):
    body = encode_record(0, 0, b"key", b"value") + encode_record(1, 0, None, b"more")
    assert corrupt_code(_batch_around(body[:-cut], 2)) == ErrorCode.CORRUPT_MESSAGE


def test_truncated_compressed_record_body_is_corrupt():
    body = encode_record(0, 0, b"key", b"value" * 10)
    assert corrupt_code(_batch_around(body[:-4], 1, GZIP)) == ErrorCode.CORRUPT_MESSAGE


def test_fewer_records_than_counted_is_corrupt():
    # Compressed: uncompressed, validate_batch already refuses 2 records in 8 bytes.
    assert corrupt_code(_batch_around(encode_record(0, 0, None, b"v"), 2, GZIP)) == (
        ErrorCode.CORRUPT_MESSAGE)


def test_record_length_disagreeing_with_its_fields_is_corrupt():
    record = bytearray(encode_record(0, 0, None, b"v"))
    record[0] += 2  # claims two more bytes than its fields use
    assert corrupt_code(_batch_around(bytes(record) + b"\x00\x00", 1)) == (
        ErrorCode.CORRUPT_MESSAGE)


def test_negative_record_length_is_corrupt():
    assert corrupt_code(_batch_around(b"\x01" + b"\x00" * 8, 1)) == ErrorCode.CORRUPT_MESSAGE


def test_field_running_past_the_record_is_corrupt():
    # value length 100 in a body of a few bytes
    body = b"\x0c\x00\x00\x00\x01\xc8\x01v\x00"
    assert corrupt_code(_batch_around(body, 1)) == ErrorCode.CORRUPT_MESSAGE


def test_overlong_varint_is_corrupt():
    assert corrupt_code(_batch_around(b"\xff" * 11, 1)) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("size", [0, 12, HEADER_SIZE - 1])
def test_fewer_bytes_than_a_header_is_corrupt(size):
    """Regression: decode_records without a header parsed one from the bytes given, and fewer
    than 61 bytes raised struct.error instead of a KafkaError (found by
    tests/property/test_decoders.py). It now answers CORRUPT_MESSAGE like validate_batch."""
    assert corrupt_code(make_batch([b"v"])[:size]) == ErrorCode.CORRUPT_MESSAGE
