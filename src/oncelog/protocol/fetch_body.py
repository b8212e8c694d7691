"""A Fetch response body whose large record sets are not copied into it.

The codec encodes a response into one buffer, copying every partition's records in (and the
buffer out again): for a follower's or a consumer's megabyte of records that is two copies
of what the log just read, on the one thread that serves every client. Here each large
record set is swapped for a 16-byte marker, the small rest is encoded by the codec as usual,
and the body is returned as parts - the bytes around each marker, a length prefix written
for the real records, the records themselves - so the transport sends the log's bytes as
they are. A record set may also be any object with ``len()`` and ``read()`` (storage's
``FileRegion``, which the server sends from the file); with bytes only,
``b"".join(parts)`` equals what the codec would have encoded.

A marker is random per response; finding it anywhere but in its records field would need
128 random bits to collide with topic names or offsets, and each one must be found once,
in order, or the response is encoded the plain way.
"""

from __future__ import annotations

import itertools
import os
import struct
from typing import TYPE_CHECKING, Protocol, cast

from .varints import write_uvarint

if TYPE_CHECKING:
    from kafka.protocol.consumer import FetchResponse

    PartitionData = FetchResponse.FetchableTopicResponse.PartitionData


class RecordSource(Protocol):
    """Records sent from where they lie (storage's ``FileRegion``): their size, and their
    bytes for a response that must be encoded whole."""

    def __len__(self) -> int: ...

    def read(self) -> bytes: ...


# A part of an encoded response; a record set in a Fetch response is one of these too (the
# codec's type for it says bytes: only what the codec itself can encode).
Part = bytes | bytearray | memoryview | RecordSource

# Below this the copy costs less than the extra parts and writes.
SPLICE_MIN_BYTES = 64 * 1024
_MARKER_BYTES = 16
_INT32 = struct.Struct(">i")
_counter = itertools.count()


def records_of(partition: PartitionData) -> Part | None:
    """A partition's record set as the broker fills it (see ``Part``)."""
    return cast("Part | None", partition.records)


def _set_records(partition: PartitionData, records: Part) -> None:
    partition.records = cast(bytes, records)


def encode_fetch_body(response: FetchResponse, version: int, flexible: bool) -> list[Part]:
    """The encoded body of FetchResponse ``response`` as parts (see the module)."""
    large = [partition for topic in response.responses for partition in topic.partitions
             if len(records_of(partition) or b"") >= SPLICE_MIN_BYTES]
    if not large:
        return [response.encode(version=version)]
    records = [cast(Part, records_of(partition)) for partition in large]
    stem = os.urandom(_MARKER_BYTES - 8)
    markers = [stem + struct.pack(">Q", next(_counter)) for _ in large]
    try:
        for partition, marker in zip(large, markers):
            _set_records(partition, marker)
        body = bytes(response.encode(version=version))
    finally:
        for partition, data in zip(large, records):
            _set_records(partition, data)
    # compact bytes (flexible versions): uvarint(length + 1); otherwise int32 length
    prefix_size = len(write_uvarint(_MARKER_BYTES + 1)) if flexible else 4
    parts: list[Part] = []
    position = 0
    for marker, data in zip(markers, records):
        at = body.find(marker, position)
        if at < position + prefix_size:  # not where a records field can be: no splicing
            return [_encode_whole(response, large, records, version)]
        prefix = write_uvarint(len(data) + 1) if flexible else _INT32.pack(len(data))
        parts += [body[position:at - prefix_size] + prefix, data]
        position = at + _MARKER_BYTES
    parts.append(body[position:])
    return parts


def _encode_whole(response: FetchResponse, large: list[PartitionData], records: list[Part],
                  version: int) -> bytearray:
    """The codec's plain encoding; records that are not bytes (a storage ``FileRegion``,
    sent from its file when spliced) are read first."""
    try:
        for partition, data in zip(large, records):
            if not isinstance(data, (bytes, bytearray, memoryview)):
                partition.records = data.read()
        encoded: bytearray = response.encode(version=version)
        return encoded
    finally:
        for partition, data in zip(large, records):
            _set_records(partition, data)
