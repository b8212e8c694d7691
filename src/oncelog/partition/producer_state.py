"""Idempotent-producer state of one partition (Kafka's ProducerStateManager, KIP-98/KIP-360).

Per producer id this partition keeps the producer epoch and the last five batches' sequence
ranges and offsets. Before a client batch with a producer id is appended, ``check`` decides:

- **duplicate**: same epoch, and its (first, last) sequence equals one of the five retained
  batches - the batch was already written (its acknowledgement was lost). Nothing is
  appended; the producer gets success and the *original* offsets (Kafka answers NONE, not
  DUPLICATE_SEQUENCE_NUMBER);
- **stale epoch** (lower than the one seen): INVALID_PRODUCER_EPOCH;
- **new epoch** (higher): its first sequence must be 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
- **same epoch**: its first sequence must follow the last one (with wrap-around after
  2^31-1), else OUT_OF_ORDER_SEQUENCE_NUMBER;
- **unknown producer**: since KIP-360 any first sequence is accepted (the producer's state
  may have expired or been removed by retention), except on a partition that never held a
  record, where only sequence 0 can be right.

``update`` records an appended batch; ``replay`` applies a batch read back from the log,
with no checks (restart, snapshots). Entries whose last write is older than
``producer.id.expiration.ms`` are dropped by ``expire``. All methods are synchronous; the
partition calls ``check`` and ``update`` around its append with no ``await`` in between, so
two requests cannot interleave a check and an append.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..protocol.batches import BatchHeader
from ..protocol.errors import ErrorCode, KafkaError

NUM_BATCHES_TO_RETAIN = 5
MAX_SEQUENCE = 2**31 - 1
NO_EPOCH = -1
NO_SEQUENCE = -1


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """A batch's last sequence; sequences wrap from 2^31-1 to 0 (Kafka's DefaultRecordBatch)."""
    last = base_sequence + last_offset_delta
    return last - MAX_SEQUENCE - 1 if last > MAX_SEQUENCE else last


def in_sequence(last: int, next_first: int) -> bool:
    return next_first == last + 1 or (last == MAX_SEQUENCE and next_first == 0)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    producer_id: int
    producer_epoch: int = NO_EPOCH
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1  # max timestamp of its last batch
    last_update_ms: int = -1  # broker time of its last write (drives expiration)

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, first_sequence: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_seq:
                return batch
        return None

    def to_json(self) -> dict:
        return {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "last_timestamp": self.last_timestamp, "last_update_ms": self.last_update_ms,
                "batches": [[b.first_sequence, b.last_sequence, b.first_offset, b.last_offset,
                             b.timestamp] for b in self.batches]}

    @classmethod
    def from_json(cls, data: dict) -> "ProducerEntry":
        entry = cls(data["producer_id"], data["producer_epoch"],
                    last_timestamp=data["last_timestamp"], last_update_ms=data["last_update_ms"])
        entry.batches.extend(BatchMetadata(*b) for b in data["batches"])
        return entry


class ProducerStateManager:
    def __init__(self, partition_name: str) -> None:
        self.partition_name = partition_name
        self.producers: dict[int, ProducerEntry] = {}
        self.changed = False  # since the last snapshot

    # -- the client append path --------------------------------------------------------------

    def check(self, header: BatchHeader, partition_is_empty: bool) -> BatchMetadata | None:
        """Validate a client batch with a producer id; return the original batch if this one
        is a duplicate. Raises KafkaError for a stale epoch or a sequence out of order."""
        producer_id, epoch = header.producer_id, header.producer_epoch
        first = header.base_sequence
        if epoch < 0 or first < 0:
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"{self.partition_name}: producer {producer_id} sent epoch {epoch}, "
                             f"sequence {first}; both must be >= 0")
        last = last_sequence(first, header.last_offset_delta)
        entry = self.producers.get(producer_id)
        if entry is None:
            if partition_is_empty and first != 0:
                raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"{self.partition_name}: producer {producer_id} is new to a "
                                 f"partition that never held a record, so its first sequence "
                                 f"must be 0, not {first}")
            return None
        if epoch < entry.producer_epoch:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                             f"{self.partition_name}: producer {producer_id} epoch {epoch} is "
                             f"older than the current epoch {entry.producer_epoch}")
        if epoch > entry.producer_epoch:
            if first != 0:
                raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"{self.partition_name}: producer {producer_id} began epoch "
                                 f"{epoch} at sequence {first}; a new epoch starts at 0")
            return None
        duplicate = entry.find_duplicate(first, last)
        if duplicate is not None:
            return duplicate
        if entry.batches and not in_sequence(entry.last_sequence, first):
            raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             f"{self.partition_name}: producer {producer_id} epoch {epoch} sent "
                             f"sequence {first}; expected {entry.last_sequence + 1}")
        return None

    def update(self, header: BatchHeader, base_offset: int, now_ms: int) -> None:
        """Record a batch that was just appended at ``base_offset``."""
        self.replay(header._replace(base_offset=base_offset), now_ms)

    # -- rebuilding ------------------------------------------------------------------------

    def replay(self, header: BatchHeader, now_ms: int) -> None:
        """Apply a batch from the log (no validation: it was validated when written)."""
        if header.producer_id < 0:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id)
        if header.producer_epoch != entry.producer_epoch:
            entry.producer_epoch = header.producer_epoch
            entry.batches.clear()  # sequences restart with every epoch
        if header.base_sequence >= 0:
            entry.batches.append(BatchMetadata(
                header.base_sequence, last_sequence(header.base_sequence, header.last_offset_delta),
                header.base_offset, header.last_offset, header.max_timestamp))
        entry.last_timestamp = header.max_timestamp
        entry.last_update_ms = now_ms
        self.changed = True

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for longer than ``producer.id.expiration.ms``."""
        expired = [pid for pid, entry in self.producers.items()
                   if now_ms - entry.last_update_ms > expiration_ms]
        for producer_id in expired:
            del self.producers[producer_id]
        if expired:
            self.changed = True
        return len(expired)

    def truncate(self) -> None:
        self.producers.clear()
        self.changed = True

    def to_json(self) -> list[dict]:
        return [entry.to_json() for entry in self.producers.values()]

    def load_json(self, producers: list[dict]) -> None:
        self.producers = {p["producer_id"]: ProducerEntry.from_json(p) for p in producers}
        self.changed = False
