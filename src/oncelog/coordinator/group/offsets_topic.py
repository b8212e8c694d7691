"""``__consumer_offsets`` on this broker: the ``OffsetsLog`` the group coordinator writes to.

Created when the broker starts if missing, with ``offsets.topic.num.partitions`` partitions
(Kafka creates it on the first FindCoordinator; creating it up front means a coordinator is
there from the first request), ``cleanup.policy=compact`` and
``segment.bytes=offsets.topic.segment.bytes``. An existing topic keeps its partition count,
whatever the config says now: moving groups between partitions would lose them.

Appends go through the partition's one append path with ``AppendOrigin.COORDINATOR`` (one
uncompressed batch per write, CreateTime now); reads walk whole batches below the high
watermark and decode their records. Control batches (transaction markers) are skipped.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterator, Sequence

from ...partition import AppendOrigin, Partition, PartitionManager
from ...protocol.batches import iter_headers
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.records import decode_records, make_batch

log = logging.getLogger(__name__)

_COMMIT_ERRORS = {  # Kafka's GroupMetadataManager.storeOffsets translation
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.NOT_ENOUGH_REPLICAS,
}

OFFSETS_TOPIC = "__consumer_offsets"
_READ_BYTES = 1 << 20


class OffsetsTopic:
    def __init__(self, partitions: PartitionManager, clock: Callable[[], int]) -> None:
        self.partitions = partitions
        self.clock = clock

    def create_if_missing(self, config, live_brokers: int = 1) -> None:
        """Create the topic with ``offsets.topic.replication.factor`` replicas, or as many
        as there are live brokers if fewer (a single broker: one)."""
        if OFFSETS_TOPIC in self.partitions.topics:
            return
        replication_factor = max(1, min(config["offsets.topic.replication.factor"], live_brokers))
        self.partitions.create_topic(OFFSETS_TOPIC, config["offsets.topic.num.partitions"],
                                     replication_factor, {
            "cleanup.policy": "compact",
            "segment.bytes": str(config["offsets.topic.segment.bytes"]),
            "compression.type": "producer",
        })

    @property
    def partition_count(self) -> int:
        topic = self.partitions.topics.get(OFFSETS_TOPIC)
        return topic.partition_count if topic is not None else 0

    def partition(self, index: int) -> Partition:
        return self.partitions.get_partition(OFFSETS_TOPIC, index)

    def append(self, index: int, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        batch = make_batch([value for _, value in records], keys=[key for key, _ in records],
                           timestamp_ms=self.clock())
        self.partition(index).append_records(batch, AppendOrigin.COORDINATOR)

    def may_lead(self, index: int) -> bool:
        try:
            self.partition(index).check_leader()
        except KafkaError:
            return False
        return True

    def read(self, index: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        partition = self.partition(index)
        # Up to the log end, as Kafka's loader does: a new leader's whole log is the truth
        # from now on, and its HW may still lag what the previous coordinator acknowledged.
        offset, end = partition.log_start_offset, partition.log_end_offset
        while offset < end:
            data = bytes(partition.log.read(offset, _READ_BYTES, max_offset=end))
            start = offset
            for position, header in iter_headers(data):
                if not header.is_control:
                    batch = data[position:position + header.size]
                    for record in decode_records(batch, header):
                        yield record.key, record.value
                offset = header.next_offset
            if offset <= start:  # nothing readable there: stop rather than spin
                log.error("%s-%d: no whole batch at offset %d; stopped reading", OFFSETS_TOPIC,
                          index, start)
                return

    async def wait_for_replication(self, index: int, timeout_ms: int) -> ErrorCode:
        """Wait until the partition's high watermark passes everything written so far (its
        log end now). Errors are the coordinator's (Kafka's offset-commit translation):
        NOT_COORDINATOR when leadership moved, REQUEST_TIMED_OUT when the ISR is slow,
        NOT_ENOUGH_REPLICAS when too few replicas are in sync."""
        partition = self.partition(index)
        waiter = partition.wait_for_acks(partition.log_end_offset)
        try:
            code = await asyncio.wait_for(waiter, timeout_ms / 1000)
        except asyncio.TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        return _COMMIT_ERRORS.get(code, code)

    async def wait_for_group_replication(self, coordinator, group_id: str,
                                         timeout_ms: int) -> ErrorCode:
        """``wait_for_replication`` for the group's partition; NONE when it has none here
        (the coordinator already answered NOT_COORDINATOR then)."""
        index = coordinator.partition_for(group_id)
        if index < 0 or not coordinator.is_coordinator_for(group_id):
            return ErrorCode.NONE
        try:
            code = await self.wait_for_replication(index, timeout_ms)
        except KafkaError:
            return ErrorCode.NOT_COORDINATOR
        # REQUEST_TIMED_OUT is not a JoinGroup/SyncGroup error clients retry on
        return ErrorCode.COORDINATOR_NOT_AVAILABLE if code == ErrorCode.REQUEST_TIMED_OUT else code

    async def wait_for_flush(self, index: int, flusher) -> None:
        """With ``log.flush.policy=ack``, what a commit wrote survives a power loss once
        this returns (the same group commit as acks=all produce requests)."""
        await flusher.wait_for_flush(self.partition(index).log)
