"""Transaction markers: the control batches that end a transaction on a partition (KIP-98).

A marker is a record batch, in Kafka's exact format, with:

- attributes: the transactional and control bits set (0x30), no compression, CreateTime;
- the producer id and epoch of the transaction it ends, base sequence -1 (markers carry no
  sequence: they are not deduplicated by sequence, the coordinator's epoch fences them);
- one record, offset delta 0, timestamp delta 0, no headers, whose
  - key is ``version int16 (0) | type int16`` (Kafka's ``ControlRecordType``: 0 = ABORT,
    1 = COMMIT),
  - value is ``version int16 (0) | coordinator_epoch int32`` (Kafka's ``EndTransactionMarker``).

Readers accept a newer key or value version as Kafka does (the fields above come first; the
rest is ignored). Only the transaction coordinator writes markers, through
``Partition.write_txn_marker``; clients may not (a client's control batch is INVALID_RECORD).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .batches import CONTROL_FLAG, HEADER_SIZE, NO_SEQUENCE, TRANSACTIONAL_FLAG, BatchHeader
from .batches import build_batch, parse_header
from .errors import ErrorCode, KafkaError
from .records import decode_records, encode_record

ABORT, COMMIT = 0, 1
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
MARKER_ATTRIBUTES = TRANSACTIONAL_FLAG | CONTROL_FLAG

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class Marker(NamedTuple):
    """What a transaction marker says: unpacks as ``(commit, coordinator_epoch)``."""
    commit: bool
    coordinator_epoch: int


def encode_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                  timestamp_ms: int, base_offset: int = 0,
                  partition_leader_epoch: int = -1) -> bytes:
    """One marker batch (see the module docstring); the log patches its base offset and
    leader epoch on append."""
    key = _KEY.pack(CONTROL_KEY_VERSION, COMMIT if commit else ABORT)
    value = _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return build_batch(base_offset=base_offset, attributes=MARKER_ATTRIBUTES,
                       base_timestamp=timestamp_ms, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                       body=encode_record(0, 0, key, value), records_count=1,
                       partition_leader_epoch=partition_leader_epoch)


def decode_marker(batch: bytes | memoryview, header: BatchHeader | None = None) -> Marker:
    """Read the marker in one whole control batch. Raises KafkaError (CORRUPT_MESSAGE) for a
    batch that is not a control batch or whose control record is not ABORT or COMMIT."""
    if header is None:
        if len(batch) < HEADER_SIZE:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                             f"{len(batch)} bytes cannot hold a {HEADER_SIZE}-byte batch header")
        header = parse_header(batch)
    if not header.is_control:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"batch at offset {header.base_offset} is not a control batch")
    records = decode_records(bytes(batch[:header.size]), header)
    if not records:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"control batch at offset {header.base_offset} holds no record")
    key, value = records[0].key, records[0].value
    if key is None or len(key) < _KEY.size or value is None or len(value) < _VALUE.size:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"control record at offset {header.base_offset} is too short for a "
                         "transaction marker")
    key_version, record_type = _KEY.unpack_from(key)
    value_version, coordinator_epoch = _VALUE.unpack_from(value)
    if key_version < 0 or value_version < 0 or record_type not in (ABORT, COMMIT):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"control record at offset {header.base_offset} has key version "
                         f"{key_version}, type {record_type}, value version {value_version}: "
                         "not a transaction marker")
    return Marker(record_type == COMMIT, coordinator_epoch)
