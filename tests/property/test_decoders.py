"""Decoders never crash: random and mutated bytes give a KafkaError or a value, nothing else.

A decoder that raises anything else (struct.error, IndexError, UnicodeDecodeError...) turns a
client's bad bytes into an unexpected exception on the broker's read path.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oncelog.protocol import messages
from oncelog.protocol.batches import HEADER_SIZE, build_batch, validate_batch
from oncelog.protocol.errors import KafkaError
from oncelog.protocol.messages import decode_request, decode_request_header, is_flexible
from oncelog.protocol.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, decode_records, make_batch

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BATCHES = [
    make_batch([b"v1", None, b""], keys=[b"k", None, b"kk"], timestamps=[5, 3, 9]),
    make_batch([b"x" * 40, b"y"], codec=GZIP),
    make_batch([b"s" * 30], codec=SNAPPY),
    make_batch([b"l", b"m"], codec=LZ4),
    make_batch([b"z"], codec=ZSTD, producer_id=3, producer_epoch=0, base_sequence=0),
]


def _frame(api_key: int, version: int, request) -> bytes:
    header = struct.pack(">hhih", api_key, version, 7, 6) + b"client"
    if is_flexible(api_key, version):
        header += b"\x00"
    return header + request.encode(version=version)


def _valid_frames() -> list[bytes]:
    P = messages.ProduceRequest.TopicProduceData
    F = messages.FetchRequest.FetchTopic
    L = messages.ListOffsetsRequest.ListOffsetsTopic
    C = messages.CreateTopicsRequest.CreatableTopic
    D = messages.DescribeConfigsRequest.DescribeConfigsResource
    produce = messages.ProduceRequest(acks=-1, timeout_ms=100, transactional_id=None,
                                      topic_data=[P(name="t", partition_data=[
                                          P.PartitionProduceData(index=0, records=BATCHES[0])])])
    fetch = messages.FetchRequest(max_wait_ms=10, topics=[F(topic="t", partitions=[
        F.FetchPartition(partition=0, fetch_offset=3, partition_max_bytes=100)])])
    list_offsets = messages.ListOffsetsRequest(topics=[L(name="t", partitions=[
        L.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    metadata = messages.MetadataRequest(topics=[messages.MetadataRequest.MetadataRequestTopic(
        name="t")], allow_auto_topic_creation=True)
    create = messages.CreateTopicsRequest(timeout_ms=10, topics=[C(
        name="t", num_partitions=1, replication_factor=1, assignments=[],
        configs=[C.CreatableTopicConfig(name="retention.ms", value="1")])])
    describe = messages.DescribeConfigsRequest(resources=[D(
        resource_type=2, resource_name="t", configuration_keys=None)])
    api_versions = messages.ApiVersionsRequest(client_software_name="c",
                                               client_software_version="1")
    samples = [(0, produce, (3, 9, 11)), (1, fetch, (4, 11, 12)), (2, list_offsets, (1, 6, 8)),
               (3, metadata, (0, 9, 12)), (19, create, (2, 5, 7)), (32, describe, (1, 4)),
               (18, api_versions, (0, 3))]
    return [_frame(key, version, request) for key, request, versions in samples
            for version in versions]


FRAMES = _valid_frames()


@st.composite
def mutated(draw, originals: list[bytes]) -> bytes:
    """A valid message with bytes flipped, set to edge values, cut off or extended."""
    data = bytearray(draw(st.sampled_from(originals)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "truncate", "extend", "insert"]))
        if kind in ("flip", "set") and data:
            position = draw(st.integers(0, len(data) - 1))
            if kind == "flip":
                data[position] ^= 1 << draw(st.integers(0, 7))
            else:
                data[position] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
        elif kind == "truncate":
            del data[draw(st.integers(0, len(data))):]
        elif kind == "extend":
            data += draw(st.binary(min_size=1, max_size=16))
        elif kind == "insert":
            position = draw(st.integers(0, len(data)))
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
    return bytes(data)


def _decode_frame(frame: bytes) -> None:
    try:
        header = decode_request_header(frame)
    except KafkaError:
        return
    assert 0 <= header.body_offset <= len(frame)
    if not header.known_api:
        return
    try:
        decode_request(header, frame)
    except KafkaError:
        pass


def _decode_batch(batch: bytes) -> None:
    try:
        header = validate_batch(batch, 0, len(batch))
    except KafkaError:
        header = None
    try:
        records = decode_records(batch, header)
    except KafkaError:
        return
    if header is not None:
        assert len(records) == header.records_count


def test_the_valid_samples_decode():
    # Otherwise the mutations below would only ever start from garbage.
    for frame in FRAMES:
        header = decode_request_header(frame)
        assert decode_request(header, frame) is not None
    for batch in BATCHES:
        assert len(decode_records(batch, validate_batch(batch, 0, len(batch)))) >= 1


@FUZZ
@given(st.binary(max_size=200))
def test_request_header_and_body_on_random_bytes(frame):
    _decode_frame(frame)


@FUZZ
@given(api_key=st.sampled_from(sorted(messages.REQUESTS)), version=st.integers(-1, 20),
       body=st.binary(max_size=200))
def test_request_body_on_random_bytes_behind_a_valid_header(api_key, version, body):
    header = struct.pack(">hhih", api_key, version, 1, -1)
    if is_flexible(api_key, version):
        header += b"\x00"
    _decode_frame(header + body)


@FUZZ
@given(mutated(FRAMES))
def test_request_decoding_on_mutated_frames(frame):
    _decode_frame(frame)


@FUZZ
@given(st.binary(max_size=300))
def test_batch_decoding_on_random_bytes(data):
    _decode_batch(data)


@FUZZ
@given(st.binary(min_size=HEADER_SIZE - 12, max_size=HEADER_SIZE + 60))
def test_batch_decoding_on_random_bytes_behind_a_plausible_prefix(data):
    # base_offset 0, a batch_length that matches, magic 2: reaches the CRC and beyond.
    batch = bytearray(struct.pack(">qii", 0, len(data), -1) + data)
    batch[16] = 2
    _decode_batch(bytes(batch))


@FUZZ
@given(mutated(BATCHES))
def test_batch_decoding_on_mutated_batches(batch):
    _decode_batch(batch)


@FUZZ
@given(codec=st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]), count=st.integers(-2, 5),
       body=st.binary(max_size=120))
def test_records_decoding_on_random_bodies_with_a_valid_header(codec, count, body):
    # A correct header and CRC around garbage: the case validate_batch cannot catch.
    batch = build_batch(attributes=codec, body=body, records_count=count)
    _decode_batch(batch)


@pytest.mark.parametrize("size", range(HEADER_SIZE))
def test_records_decoding_on_every_short_prefix(size):
    _decode_batch(BATCHES[0][:size])
