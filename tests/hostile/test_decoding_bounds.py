"""Decoding one request is bounded in time and memory, whatever its counts and lengths say.

Each case is a small frame whose fields claim something huge; each must be refused with
INVALID_REQUEST in well under a second, before anything is allocated for the claim.
"""

from __future__ import annotations

import struct
import time
import tracemalloc

import pytest

from oncelog.protocol import messages
from oncelog.protocol.batches import build_batch, validate_batch
from oncelog.protocol.errors import ErrorCode, KafkaError
from oncelog.protocol.messages import (MAX_ELEMENTS, decode_request, decode_request_header)
from oncelog.protocol.records import make_batch


def frame(api_key: int, version: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, 1, -1)
    if messages.is_flexible(api_key, version):
        header += b"\x00"
    return header + body


def refused_quickly(data: bytes, seconds: float = 0.5) -> KafkaError:
    """Refused as INVALID_REQUEST within ``seconds`` of this process's CPU time (not wall
    time: the suite's other workers share the cores) and without allocating beyond a
    bound of the frame's size."""
    tracemalloc.start()
    started = time.process_time()
    try:
        with pytest.raises(KafkaError) as refused:
            decode_request(decode_request_header(data), data)
        elapsed = time.process_time() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < seconds, elapsed
    assert peak < 16 * len(data) + (1 << 20), peak
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    return refused.value


def test_every_served_decoder_is_generated_with_its_checks():
    """If a kafka-python upgrade changed the shape of the generated lines, the checks
    would silently vanish; this notices."""
    for cls in messages.REQUESTS.values():
        for version in range(cls.max_version + 1):
            messages.bounded_decoder(cls, version)
    ctx = messages._BoundedDecoderContext()
    ctx.lines.append("def _decode(data, pos, _budget):")
    messages.FetchRequest._struct.emit_decode_from(ctx, "obj", "    ", version=12,
                                                    compact=True, tagged=True)
    source = ctx.source()
    assert "_refuse('array of'" in source and "_refuse('length'" in source
    assert "varint longer than" in source and "_ViewReader(data, pos)" in source
    assert "_BytesIO" not in source


def test_an_array_count_beyond_the_frame():
    # Metadata v1: topics array claiming 2**31-1 entries, 6 bytes follow.
    error = refused_quickly(frame(3, 1, struct.pack(">i", 2**31 - 1) + b"\x00\x01a\x00"))
    assert "array of 2147483647" in error.message


def test_a_compact_array_count_beyond_the_frame():
    # Metadata v9 (flexible): a compact array of 2**28 topics.
    refused_quickly(frame(3, 9, b"\x81\x80\x80\x80\x01" + b"\x00" * 8))


def test_a_string_length_beyond_the_frame():
    # CreateTopics v0: one topic whose name claims 32767 bytes.
    refused_quickly(frame(19, 0, struct.pack(">ih", 1, 32767) + b"abc"))


def test_an_endless_varint_is_cut_at_ten_bytes():
    """A megabyte of continuation bytes: without the bound, each byte shifts a growing
    integer further, quadratic in the frame's size (hours for one frame)."""
    refused_quickly(frame(3, 9, b"\xff" * (1 << 20)), seconds=1.0)


def test_many_entries_of_one_byte_are_capped():
    """A frame of one-byte array entries becomes a Python object per byte; past
    MAX_ELEMENTS entries the request is refused instead of growing without bound."""
    count = MAX_ELEMENTS + 1
    # ListGroups v4 (flexible): states_filter is a compact array of compact strings, and
    # the empty string is one byte (0x01).
    body = _uvarint(count + 1) + b"\x01" * count + b"\x00"
    error = refused_quickly(frame(16, 4, body), seconds=5.0)
    assert f"more than {MAX_ELEMENTS} array entries" in error.message


def test_tagged_fields_are_not_copied_per_struct():
    """kafka-python reads tagged fields from a copy of the rest of the frame, once per
    struct that carries any: 100,000 structs with a tag in a 1.5 MB frame meant ~75 GB of
    copying. They are read from a view now. Timed in this process's CPU time: 0.9 s alone,
    and a CI run's wall clock, with two other workers on the two cores, once read 5.25 s."""
    entry = b"\x02\x00" + b"\x01" + b"\x05\x01\x00"  # name "\x00", tags: one field, tag 5, 0 bytes
    count = 100_000
    body = _uvarint(count + 1) + entry * count + b"\x01\x00"
    data = frame(3, 9, body)  # Metadata v9: topics are flexible structs with tagged fields
    started = time.process_time()
    try:
        decode_request(decode_request_header(data), data)
    except KafkaError:
        pass
    assert time.process_time() - started < 5.0


def test_valid_requests_still_decode():
    batch = make_batch([b"a", b"b"])
    P = messages.ProduceRequest.TopicProduceData
    request = messages.ProduceRequest(acks=-1, timeout_ms=100, transactional_id=None,
                                      topic_data=[P(name="t", partition_data=[
                                          P.PartitionProduceData(index=0, records=batch)])])
    for version in (3, 9, 11):
        data = frame(0, version, request.encode(version=version))
        decoded = decode_request(decode_request_header(data), data)
        assert decoded.topic_data[0].partition_data[0].records == batch


def test_a_batch_cannot_claim_more_records_than_its_bytes_hold():
    """An uncompressed record is at least 7 bytes, so a 70-byte body holds at most 10
    records; a batch claiming 2 billion would make the log's offsets jump by that much."""
    body = b"\x00" * 70
    for count in (11, 2**31 - 1):
        with pytest.raises(KafkaError) as refused:
            batch = build_batch(body=body, records_count=count)
            validate_batch(batch, 0, len(batch))
        assert refused.value.code == ErrorCode.INVALID_RECORD
    batch = make_batch([b""] * 10)
    assert validate_batch(batch, 0, len(batch)).records_count == 10


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@pytest.mark.parametrize("api_key,version,body", [
    (10, 4, b"\x00\x02\x00\x00"),  # FindCoordinator v4: key_type 0, coordinator_keys [null]
    (16, 4, b"\x02\x00\x00"),          # ListGroups v4: states_filter [null]
], ids=["find-coordinator-v4", "list-groups-v4"])
def test_a_null_inside_a_string_array_is_refused(api_key, version, body):
    """Found by fuzz/fuzz_broker.py: a null element of a []string array passed the decoder
    and reached the handler, which failed with AttributeError (UNKNOWN_SERVER_ERROR and a
    traceback per request). Kafka's schemas never allow such nulls; now INVALID_REQUEST."""
    data = frame(api_key, version, body)
    with pytest.raises(KafkaError) as refused:
        decode_request(decode_request_header(data), data)
    assert "holds a null" in refused.value.message
