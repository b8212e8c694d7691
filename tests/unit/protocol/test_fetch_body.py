"""A Fetch response body with large record sets spliced in, not copied (protocol.fetch_body)."""

from __future__ import annotations

import os

import pytest

from oncelog.broker.handlers import fetch
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.fetch_body import SPLICE_MIN_BYTES, encode_fetch_body
from oncelog.protocol.messages import FetchResponse, encode_response

T = FetchResponse.FetchableTopicResponse
P = T.PartitionData


def _response(records_by_partition: list[bytes | memoryview]) -> FetchResponse:
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        T(topic=f"topic-{index % 2}", partitions=[P(
            partition_index=index, error_code=0, high_watermark=10, last_stable_offset=10,
            log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
            records=records)])
        for index, records in enumerate(records_by_partition)])


@pytest.mark.parametrize("version", fetch.VERSIONS)
def test_spliced_parts_are_the_codecs_encoding(version):
    large = [os.urandom(SPLICE_MIN_BYTES), memoryview(os.urandom(3 * SPLICE_MIN_BYTES))[5:]]
    response = _response([large[0], b"small", b"", large[1]])
    flexible = FetchResponse.flexible_version_q(version)

    parts = encode_fetch_body(response, version, flexible)

    assert b"".join(parts) == bytes(response.encode(version=version))
    # the large record sets are sent as they are: the very objects, never copied
    assert [part for part in parts if any(part is data for data in large)] == large
    assert response.responses[0].partitions[0].records is large[0]  # put back after encoding


def test_a_framed_spliced_response_decodes_with_its_records():
    records = os.urandom(2 * SPLICE_MIN_BYTES)
    parts = encode_response(ApiKey.FETCH, 12, 77, _response([records]))
    frame = b"".join(bytes(part) for part in parts)

    assert len(parts) == 3 and parts[1] is records
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert int.from_bytes(frame[4:8], "big") == 77
    decoded = FetchResponse.decode(frame[9:], version=12)  # header v1: one tag byte
    assert bytes(decoded.responses[0].partitions[0].records) == records


def test_small_record_sets_are_encoded_the_plain_way():
    assert len(encode_fetch_body(_response([b"x" * (SPLICE_MIN_BYTES - 1)]), 11, False)) == 1
