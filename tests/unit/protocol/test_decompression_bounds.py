"""Decompression is bounded: a small batch crafted to expand enormously (a "decompression
bomb") is refused as CORRUPT_MESSAGE without the memory it asks for. The broker decompresses
stored batches only on rare paths (ListOffsets by timestamp), but those take client data."""

from __future__ import annotations

import cramjam
import pytest

from oncelog.protocol import records
from oncelog.protocol.errors import ErrorCode, KafkaError

TOO_BIG = records.MAX_DECOMPRESSED_BYTES + 1


@pytest.mark.parametrize("codec, compress", [
    (records.GZIP, cramjam.gzip.compress),
    (records.LZ4, cramjam.lz4.compress),
    (records.ZSTD, cramjam.zstd.compress),
    (records.SNAPPY, cramjam.snappy.compress_raw),
])
def test_a_batch_expanding_past_the_bound_is_corrupt(codec, compress):
    bomb = bytes(compress(b"\0" * TOO_BIG))
    assert len(bomb) < TOO_BIG // 20  # snappy expands ~21x at most; the others far more
    with pytest.raises(KafkaError) as raised:
        records.decompress(codec, bomb)
    assert raised.value.code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", [records.GZIP, records.SNAPPY, records.LZ4, records.ZSTD])
def test_highly_compressible_real_batches_still_decompress(codec):
    body = b'{"order": 1, "status": "shipped"}' * 200_000  # ~6.6 MB, compresses ~100x
    assert records.decompress(codec, records.compress(codec, body)) == body
