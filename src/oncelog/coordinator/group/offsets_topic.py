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

import logging
from typing import Callable, Iterator, Sequence

from ...partition import AppendOrigin, Partition, PartitionManager
from ...protocol.batches import iter_headers
from ...protocol.records import decode_records, make_batch

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_READ_BYTES = 1 << 20


class OffsetsTopic:
    def __init__(self, partitions: PartitionManager, clock: Callable[[], int]) -> None:
        self.partitions = partitions
        self.clock = clock

    def create_if_missing(self, config) -> None:
        if OFFSETS_TOPIC in self.partitions.topics:
            return
        self.partitions.create_topic(OFFSETS_TOPIC, config["offsets.topic.num.partitions"], 1, {
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

    def read(self, index: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        partition = self.partition(index)
        offset, end = partition.log_start_offset, partition.high_watermark
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

    async def wait_for_flush(self, index: int, flusher) -> None:
        """With ``log.flush.policy=ack``, what a commit wrote survives a power loss once
        this returns (the same group commit as acks=all produce requests)."""
        await flusher.wait_for_flush(self.partition(index).log)
