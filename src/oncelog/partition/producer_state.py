"""Producer state of one partition: idempotence and transactions (Kafka's
ProducerStateManager, KIP-98/KIP-360).

Per producer id this partition keeps the producer epoch, the last five batches' sequence
ranges and offsets, the epoch of the coordinator that wrote its last transaction marker and,
while it has a transaction open here, that transaction's first offset
(``current_txn_first_offset``, Kafka's CurrentTxnFirstOffset). Before a client batch with a
producer id is appended, ``check`` decides:

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
  record, where only sequence 0 can be right;
- **a non-transactional batch while the producer has a transaction open here**:
  INVALID_TXN_STATE (Kafka's "Expected transactional write").

Transactions (KIP-98): the first transactional data batch of a producer with no transaction
open here opens one at its base offset; the producer's next control batch (a COMMIT or ABORT
marker, ``protocol.control_records``) closes it and yields a ``CompletedTxn`` - a marker for
a producer with no transaction open still does (Kafka does: the coordinator may retry), and
ends an empty transaction at the marker itself. ``check_marker`` refuses a marker from an
older producer epoch (INVALID_PRODUCER_EPOCH) or an older coordinator epoch
(TRANSACTION_COORDINATOR_FENCED) before it is written.

A completed transaction stays *unstable* until the high watermark passes its marker
(``on_high_watermark``): were the leader to fail before, a new leader without the marker
would still have it open. ``first_unstable_offset`` is the first offset of the earliest
open or unreplicated transaction (Kafka's firstUnstableOffset): the partition's last stable
offset is the HW capped by it.

``update`` records an appended batch; ``replay`` applies a batch read back from the log,
with no checks (restart, snapshots, followers). Entries whose last write is older than
``producer.id.expiration.ms`` are dropped by ``expire``, unless a transaction of theirs is
open (it would vanish from the last stable offset; the coordinator's timeout ends it).
All methods are synchronous; the partition calls ``check`` and ``update`` around its append
with no ``await`` in between, so two requests cannot interleave a check and an append.

Invariants: ``ongoing_transactions`` holds exactly the producers whose
``current_txn_first_offset`` is set, in increasing first offset; completed transactions
wait in marker order until the HW passes their marker.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..protocol.batches import BatchHeader
from ..protocol.control_records import Marker
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


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended on this partition (Kafka's CompletedTxn), with the last
    stable offset its aborted-transaction index entry records: the first offset of the
    earliest *other* transaction still open when the marker was written, else the offset
    after the marker (Kafka's ``lastStableOffset(completedTxn)``)."""
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool
    last_stable_offset: int


@dataclass
class ProducerEntry:
    producer_id: int
    producer_epoch: int = NO_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1  # max timestamp of its last batch
    last_update_ms: int = -1  # broker time of its last write (drives expiration)
    coordinator_epoch: int = -1  # of the coordinator that wrote its last marker here
    current_txn_first_offset: int | None = None  # its open transaction's first offset

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

    def to_json(self) -> dict[str, Any]:
        return {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "last_timestamp": self.last_timestamp, "last_update_ms": self.last_update_ms,
                "coordinator_epoch": self.coordinator_epoch,
                "current_txn_first_offset": self.current_txn_first_offset,
                "batches": [[b.first_sequence, b.last_sequence, b.first_offset, b.last_offset,
                             b.timestamp] for b in self.batches]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProducerEntry:
        """Reads both snapshot versions: version 1 had no transaction fields."""
        entry = cls(data["producer_id"], data["producer_epoch"],
                    last_timestamp=data["last_timestamp"], last_update_ms=data["last_update_ms"],
                    coordinator_epoch=data.get("coordinator_epoch", -1),
                    current_txn_first_offset=data.get("current_txn_first_offset"))
        entry.batches.extend(BatchMetadata(*b) for b in data["batches"])
        return entry


class ProducerStateManager:
    def __init__(self, partition_name: str) -> None:
        self.partition_name = partition_name
        self.producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction, in increasing first offset
        self._ongoing: dict[int, int] = {}
        # completed transactions whose marker the HW has not passed yet, in marker order
        self._unreplicated: deque[CompletedTxn] = deque()
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
            self._check_transactional(entry, header)
            return None
        duplicate = entry.find_duplicate(first, last)
        if duplicate is not None:
            return duplicate
        if entry.batches and not in_sequence(entry.last_sequence, first):
            raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             f"{self.partition_name}: producer {producer_id} epoch {epoch} sent "
                             f"sequence {first}; expected {entry.last_sequence + 1}")
        self._check_transactional(entry, header)
        return None

    def _check_transactional(self, entry: ProducerEntry, header: BatchHeader) -> None:
        if entry.current_txn_first_offset is not None and not header.is_transactional:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                             f"{self.partition_name}: producer {entry.producer_id} sent a "
                             "non-transactional batch while its transaction begun at offset "
                             f"{entry.current_txn_first_offset} is open")

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Validate a transaction marker before it is written (Kafka's
        ``appendEndTxnMarker`` checks). Raises KafkaError: INVALID_PRODUCER_EPOCH for an epoch
        older than the producer's here, TRANSACTION_COORDINATOR_FENCED for a coordinator
        epoch older than that of the last marker written for it."""
        if producer_id < 0 or producer_epoch < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"{self.partition_name}: a marker needs a producer id and epoch, "
                             f"not {producer_id} and {producer_epoch}")
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                             f"{self.partition_name}: marker for producer {producer_id} at epoch "
                             f"{producer_epoch}, older than its current epoch "
                             f"{entry.producer_epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                             f"{self.partition_name}: marker for producer {producer_id} from "
                             f"coordinator epoch {coordinator_epoch}; epoch "
                             f"{entry.coordinator_epoch} already wrote one")

    def update(self, header: BatchHeader, base_offset: int, now_ms: int,
               marker: Marker | None = None) -> CompletedTxn | None:
        """Record a batch that was just appended at ``base_offset`` (see ``replay``)."""
        return self.replay(header._replace(base_offset=base_offset), now_ms, marker)

    # -- rebuilding ------------------------------------------------------------------------

    def replay(self, header: BatchHeader, now_ms: int,
               marker: Marker | None = None) -> CompletedTxn | None:
        """Apply a batch from the log (no validation: it was validated when written).

        A control batch needs its decoded ``marker``; it returns the transaction it
        completed (None for a control batch without one: it is not a marker we know).
        Data batches return None."""
        if header.producer_id < 0:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id)
        if header.producer_epoch != entry.producer_epoch:
            entry.producer_epoch = header.producer_epoch
            entry.batches.clear()  # sequences restart with every epoch
        entry.last_timestamp = header.max_timestamp
        entry.last_update_ms = now_ms
        self.changed = True
        if header.is_control:
            return None if marker is None else self._complete(entry, header, marker)
        if header.base_sequence >= 0:
            entry.batches.append(BatchMetadata(
                header.base_sequence, last_sequence(header.base_sequence, header.last_offset_delta),
                header.base_offset, header.last_offset, header.max_timestamp))
        if header.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = header.base_offset
            self._ongoing[entry.producer_id] = header.base_offset
        return None

    def _complete(self, entry: ProducerEntry, header: BatchHeader,
                  marker: Marker) -> CompletedTxn:
        producer_id, marker_offset = entry.producer_id, header.base_offset
        first = entry.current_txn_first_offset
        stable = next((offset for pid, offset in self._ongoing.items() if pid != producer_id),
                      marker_offset + 1)
        completed = CompletedTxn(producer_id,
                                 marker_offset if first is None else first,
                                 marker_offset, not marker.commit, stable)
        entry.current_txn_first_offset = None
        entry.coordinator_epoch = marker.coordinator_epoch
        self._ongoing.pop(producer_id, None)
        self._unreplicated.append(completed)
        return completed

    # -- transactions ----------------------------------------------------------------------

    @property
    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each transaction open on this partition, earliest
        first (a copy)."""
        return dict(self._ongoing)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction that is open, or completed by a
        marker the HW has not passed yet; None when there is none."""
        first = next(iter(self._ongoing.values()), None)
        for completed in self._unreplicated:
            if first is None or completed.first_offset < first:
                first = completed.first_offset
        return first

    def on_high_watermark(self, high_watermark: int) -> None:
        """Transactions whose marker is below the HW are replicated: stable from now on."""
        unreplicated = self._unreplicated
        while unreplicated and unreplicated[0].last_offset < high_watermark:
            unreplicated.popleft()

    # -- upkeep ----------------------------------------------------------------------------

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for longer than ``producer.id.expiration.ms``, except those
        with a transaction open here."""
        expired = [pid for pid, entry in self.producers.items()
                   if now_ms - entry.last_update_ms > expiration_ms
                   and entry.current_txn_first_offset is None]
        for producer_id in expired:
            del self.producers[producer_id]
        if expired:
            self.changed = True
        return len(expired)

    def truncate(self) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self.changed = True

    def to_json(self) -> list[dict[str, Any]]:
        return [entry.to_json() for entry in self.producers.values()]

    def load_json(self, producers: list[dict[str, Any]]) -> None:
        self.producers = {p["producer_id"]: ProducerEntry.from_json(p) for p in producers}
        open_transactions = sorted((entry.current_txn_first_offset, pid)
                                   for pid, entry in self.producers.items()
                                   if entry.current_txn_first_offset is not None)
        self._ongoing = {pid: first for first, pid in open_transactions}
        self._unreplicated.clear()
        self.changed = False
