"""One partition replica: its log, offsets, leader epoch, and the produce/fetch rules.

State owned here, changed only by this class's plain (non-async) methods:
- ``log`` (storage.Log): ``log_start_offset`` .. ``log_end_offset`` (LEO, next offset to assign);
- ``high_watermark`` (HW): consumers read below it; a single-replica partition's ISR is just
  the leader, so every append advances it to the LEO at once;
- ``last_stable_offset`` (LSO): equals the HW until transactions exist;
- ``leader_epoch``: 0 on a single node; bumped by the controller in cluster mode;
- ``producer_state``: idempotence state per producer id (``producer_state.py``), snapshotted
  on clean shutdown and periodically, rebuilt on open from the newest snapshot plus a replay
  of the batch headers written after it.

Invariants (asserted): log_start_offset <= high_watermark <= log_end_offset.

Validation on the client append path follows Kafka's LogValidator for magic-2 batches:
CRC and lengths (CORRUPT_MESSAGE), record counts (INVALID_RECORD), size against
``max.message.bytes`` (MESSAGE_TOO_LARGE). Bodies are never decompressed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import Enum
from typing import Callable

from ..protocol import batches
from ..protocol.errors import ErrorCode, KafkaError
from ..storage import AppendInfo, Log, LogConfig, OffsetAndTimestamp
from ..storage import producer_snapshots
from .producer_state import ProducerStateManager


class AppendOrigin(Enum):
    """Who appends; selects the validations (Kafka's AppendOrigin)."""
    CLIENT = "client"
    REPLICATION = "replication"
    COORDINATOR = "coordinator"


class IsolationLevel(Enum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    @classmethod
    def from_wire(cls, value: int) -> "IsolationLevel":
        try:
            return cls(value)
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"isolation level {value} is neither 0 nor 1") from None


@dataclass(frozen=True)
class TopicSettings:
    """The parsed, effective configs of one topic that partitions act on."""
    log_config: LogConfig
    max_message_bytes: int
    log_append_time: bool
    min_insync_replicas: int

    @classmethod
    def from_configs(cls, configs: dict[str, str]) -> "TopicSettings":
        return cls(
            log_config=LogConfig(
                segment_bytes=int(configs["segment.bytes"]),
                segment_ms=int(configs["segment.ms"]),
                retention_ms=int(configs["retention.ms"]),
                retention_bytes=int(configs["retention.bytes"]),
                index_interval_bytes=int(configs["index.interval.bytes"]),
            ),
            max_message_bytes=int(configs["max.message.bytes"]),
            log_append_time=configs["message.timestamp.type"] == "LogAppendTime",
            min_insync_replicas=int(configs["min.insync.replicas"]),
        )


class Partition:
    def __init__(self, topic: str, index: int, log: Log, settings: TopicSettings,
                 clock: Callable[[], int]) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.settings = settings
        self.clock = clock
        self.leader_epoch = 0
        self.isr = (0,)  # replica ids; a single node is its own ISR
        # Everything in a single replica's log was written by an acknowledged (or at least
        # attempted) append, so after a restart the HW starts at the LEO.
        self.high_watermark = log.log_end_offset
        self._data_waiters: set[asyncio.Future] = set()
        self.producer_state = ProducerStateManager(f"{topic}-{index}")
        self._load_producer_state()

    def __repr__(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark

    def _check_invariants(self) -> None:
        assert self.log_start_offset <= self.high_watermark <= self.log_end_offset, (
            self, self.log_start_offset, self.high_watermark, self.log_end_offset)

    # -- produce ---------------------------------------------------------------------------

    def append_records(self, records: bytes | None,
                       origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        """Validate and append one produce request's records for this partition.

        A retried idempotent batch (same producer, epoch and sequences as one of the last
        five) is not appended again: its original offsets are returned."""
        if not records:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"{self}: produce request without records")
        if len(records) > self.settings.max_message_bytes:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"{self}: {len(records)}-byte batch exceeds max.message.bytes="
                             f"{self.settings.max_message_bytes}")
        buffer = bytearray(records)
        headers = self._validate(buffer)
        (position, header), = headers
        if origin is AppendOrigin.CLIENT:
            duplicate = self._check_client_batch(header)
            if duplicate is not None:
                return AppendInfo(duplicate.first_offset, duplicate.last_offset, -1, -1)
            if self.settings.log_append_time:
                batches.set_log_append_time(buffer, position, header.size, self.clock())
        info = self.log.append(buffer, self.leader_epoch)
        if header.has_producer_id:
            self.producer_state.update(header, info.base_offset, self.clock())
        self.high_watermark = self.log.log_end_offset
        self._check_invariants()
        self._wake_fetchers()
        return info

    def _check_client_batch(self, header: batches.BatchHeader):
        if header.is_control:
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"{self}: clients may not write control batches")
        if header.is_transactional:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                             f"{self}: transactional batch from producer {header.producer_id}, "
                             "but transactions are not supported yet")
        if not header.has_producer_id:
            return None
        return self.producer_state.check(header, partition_is_empty=self.log_end_offset == 0)

    def _validate(self, buffer: bytearray) -> list[tuple[int, batches.BatchHeader]]:
        headers, position, end = [], 0, len(buffer)
        while position < end:
            header = batches.validate_batch(buffer, position, end)
            headers.append((position, header))
            position += header.size
        if len(headers) != 1:
            # Kafka requires exactly one batch per partition in a magic-2 produce request.
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"{self}: {len(headers)} record batches in one produce request; "
                             "expected exactly one")
        return headers

    def check_leader_epoch(self, requested: int) -> None:
        """KIP-320: a client's view of the leader epoch must match ours (-1: not checked)."""
        if requested == -1 or requested == self.leader_epoch:
            return
        code = (ErrorCode.UNKNOWN_LEADER_EPOCH if requested > self.leader_epoch
                else ErrorCode.FENCED_LEADER_EPOCH)
        raise KafkaError(code, f"{self}: request leader epoch {requested}, ours "
                               f"{self.leader_epoch}")

    # -- fetch -----------------------------------------------------------------------------

    def fetch_bound(self, isolation: IsolationLevel) -> int:
        """The offset a consumer may read up to (exclusive)."""
        if isolation is IsolationLevel.READ_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark

    def read(self, offset: int, max_bytes: int, isolation: IsolationLevel,
             min_one_batch: bool) -> bytes:
        """Whole batches from ``offset``; OFFSET_OUT_OF_RANGE outside [log start, LEO]."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"{self}: fetch offset {offset} outside [{self.log_start_offset}, "
                             f"{self.log_end_offset}]")
        bound = self.fetch_bound(isolation)
        if offset >= bound:
            return b""
        return self.log.read(offset, max_bytes, max_offset=bound, min_one_batch=min_one_batch)

    def offset_for_timestamp(self, timestamp_ms: int) -> OffsetAndTimestamp | None:
        return self.log.offset_for_timestamp(timestamp_ms)

    def max_timestamp(self) -> OffsetAndTimestamp | None:
        return self.log.max_timestamp()

    # -- waiting fetches (the fetch purgatory) --------------------------------------------

    def add_data_waiter(self, waiter: asyncio.Future) -> None:
        self._data_waiters.add(waiter)

    def remove_data_waiter(self, waiter: asyncio.Future) -> None:
        self._data_waiters.discard(waiter)

    def _wake_fetchers(self) -> None:
        waiters, self._data_waiters = self._data_waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- producer state persistence ---------------------------------------------------------

    def _load_producer_state(self) -> None:
        """Newest snapshot at or below the log end, then the batches written after it."""
        start = self.log.log_start_offset
        snapshot = producer_snapshots.load_latest(self.log.directory, self.log.log_end_offset)
        if snapshot is not None:
            offset, producers = snapshot
            self.producer_state.load_json(producers)
            start = max(start, offset)
        now = self.clock()
        for header in self.log.batch_headers(start):
            if header.has_producer_id and header.base_offset >= start:
                self.producer_state.replay(header, now)

    def take_producer_snapshot(self) -> None:
        if not self.producer_state.changed:
            return
        producer_snapshots.write_snapshot(self.log.directory, self.log.log_end_offset,
                                          self.producer_state.to_json())
        producer_snapshots.delete_older_than(self.log.directory, self.log.log_end_offset)
        self.producer_state.changed = False

    def close(self) -> None:
        """Clean shutdown: flush to disk first, as Kafka does, and snapshot producer state."""
        self._wake_fetchers()
        self.log.flush()
        self.take_producer_snapshot()
        self.log.close()

    def delete(self) -> None:
        """Topic deletion: wake waiting fetches (they will see the topic gone), remove files."""
        self._wake_fetchers()
        self.log.delete()
