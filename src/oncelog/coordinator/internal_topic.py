"""A coordinator's internal topic on this broker (``__consumer_offsets``,
``__transaction_state``): created when missing, appended to by its coordinator, read back
when a partition is loaded, and waited on until what was written is replicated.

Appends go through the partition's one append path with ``AppendOrigin.COORDINATOR`` (one
uncompressed batch per write, CreateTime now; a transactional batch for the offsets a
transaction commits, TxnOffsetCommit); reads walk whole batches up to the log end and yield
each record as an ``Entry`` - with its producer when it was written in a transaction - and
each transaction marker as an ``Entry`` without key or value.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from ..partition import AppendOrigin, Partition, PartitionManager
from ..protocol.batches import TRANSACTIONAL_FLAG, iter_headers
from ..protocol.control_records import decode_marker
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import decode_records, make_batch
from ..storage import FileRegion

if TYPE_CHECKING:
    from ..partition.flusher import Flusher

log = logging.getLogger(__name__)

_COMMIT_ERRORS = {  # Kafka's GroupMetadataManager.storeOffsets translation
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.NOT_ENOUGH_REPLICAS,
}
_READ_BYTES = 1 << 20


class Entry(NamedTuple):
    """One record of an internal topic, or one transaction marker (key and value None)."""
    key: bytes | None
    value: bytes | None
    producer_id: int = -1  # the transaction's producer, for records written in one
    commit: bool | None = None  # a marker: True commits, False aborts; None: a record


class InternalTopic:
    def __init__(self, partitions: PartitionManager, clock: Callable[[], int], name: str) -> None:
        self.partitions = partitions
        self.clock = clock
        self.name = name

    async def _create(self, partition_count: int, replication_factor: int, live_brokers: int,
                      configs: dict[str, str]) -> None:
        """Create the topic if missing, with at most as many replicas as live brokers."""
        if self.name in self.partitions.topics:
            return
        replicas = max(1, min(replication_factor, live_brokers))
        await self.partitions.create_topic(self.name, partition_count, replicas,
                                           {"cleanup.policy": "compact",
                                            "compression.type": "producer", **configs})

    @property
    def partition_count(self) -> int:
        topic = self.partitions.topics.get(self.name)
        return topic.partition_count if topic is not None else 0

    def partition(self, index: int) -> Partition:
        return self.partitions.get_partition(self.name, index)

    def append(self, index: int, records: Sequence[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None = None) -> None:
        """One batch of ``records``; with ``producer`` (id, epoch) a transactional batch,
        pending until that producer's marker."""
        producer_id, producer_epoch = producer if producer is not None else (-1, -1)
        batch = make_batch([value for _, value in records], keys=[key for key, _ in records],
                           timestamp_ms=self.clock(), producer_id=producer_id,
                           producer_epoch=producer_epoch, base_sequence=-1,
                           attributes=0 if producer is None else TRANSACTIONAL_FLAG)
        self.partition(index).append_records(batch, AppendOrigin.COORDINATOR)

    def may_lead(self, index: int) -> bool:
        try:
            self.partition(index).check_leader()
        except KafkaError:
            return False
        return True

    def read(self, index: int) -> Iterator[Entry]:
        partition = self.partition(index)
        # Up to the log end, as Kafka's loader does: a new leader's whole log is the truth
        # from now on, and its HW may still lag what the previous coordinator acknowledged.
        offset, end = partition.log_start_offset, partition.log_end_offset
        while offset < end:
            chunk = partition.log.read(offset, _READ_BYTES, max_offset=end)
            assert not isinstance(chunk, FileRegion)  # a region only when asked for one
            data = bytes(chunk)
            start = offset
            for position, header in iter_headers(data):
                batch = data[position:position + header.size]
                if header.is_control:
                    try:
                        commit, _ = decode_marker(batch, header)
                    except KafkaError as error:
                        log.error("%s-%d: skipping a control batch at offset %d: %s",
                                  self.name, index, header.base_offset, error.message)
                    else:
                        yield Entry(None, None, header.producer_id, commit)
                else:
                    producer_id = header.producer_id if header.is_transactional else -1
                    for record in decode_records(batch, header):
                        yield Entry(record.key, record.value, producer_id)
                offset = header.next_offset
            if offset <= start:  # nothing readable there: stop rather than spin
                log.error("%s-%d: no whole batch at offset %d; stopped reading", self.name,
                          index, start)
                return

    async def wait_for_replication(self, index: int, timeout_ms: int) -> ErrorCode:
        """Wait until the partition's high watermark passes everything written so far (its
        log end now). Errors are the coordinator's (Kafka's offset-commit translation):
        NOT_COORDINATOR when leadership moved, REQUEST_TIMED_OUT when the ISR is slow,
        NOT_ENOUGH_REPLICAS when too few replicas are in sync."""
        partition = self.partition(index)
        waiter = partition.wait_for_acks(partition.log_end_offset)
        if waiter.done():  # the ISR has it already (a single replica): no turn of the loop
            return _COMMIT_ERRORS.get(waiter.result(), waiter.result())
        try:
            code = await asyncio.wait_for(waiter, timeout_ms / 1000)
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        return _COMMIT_ERRORS.get(code, code)

    async def wait_for_flush(self, index: int, flusher: Flusher) -> None:
        """With ``log.flush.policy=ack``, what was written survives a power loss once this
        returns (the same group commit as acks=all produce requests)."""
        await flusher.wait_for_flush(self.partition(index).log)
