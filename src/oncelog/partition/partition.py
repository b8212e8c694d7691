"""One partition replica: its log, offsets, role, ISR, and the produce/fetch rules.

State owned here, changed only by this class's plain (non-async) methods:
- ``log`` (storage.Log): ``log_start_offset`` .. ``log_end_offset`` (LEO, next offset to assign);
- the role: ``leader_id`` (``replica_id`` when we lead; another broker, or -1 when the
  partition has no leader), ``leader_epoch`` (bumped by every election), ``replicas``;
- on the leader, ``isr_state`` (``replicas.CommittedIsr | PendingExpand | PendingShrink``) and
  each follower's progress (``FollowerState``);
- ``high_watermark`` (HW): consumers read below it. On the leader it is the smallest LEO over
  the (maximal) ISR, itself included, so a record below it is on every in-sync replica; on
  a follower it is the leader's HW as last fetched, capped by our own LEO. A single-replica
  partition is its own ISR, so every append moves its HW to the LEO at once;
- ``last_stable_offset`` (LSO, what ``read_committed`` consumers read below): the HW, capped
  by the first offset of the earliest transaction not yet stable - open, or ended by a
  marker the HW has not passed (Kafka's firstUnstableOffset), never below the log start;
- ``epoch_cache``: which leader epoch began at which offset (``storage.leader_epoch``);
- ``producer_state``: idempotence and transaction state per producer id
  (``producer_state.py``), snapshotted on clean shutdown, periodically and at every segment
  roll, rebuilt on open from the newest snapshot at or below the active segment's start plus
  a replay of the batches written after it - which also rebuilds the recovered segments'
  aborted-transaction indexes (``storage.txn_index``); a follower updates it from the
  replicated batches, so a retry sent to it after a failover is still recognised, and its
  transactions, LSO and aborted-transaction index match the leader's.

Invariants (asserted): log_start_offset <= last_stable_offset <= high_watermark <=
log_end_offset; the leader is in its ISR; the ISR is a subset of the replicas.

Transactions (KIP-98): transactional batches are appended like idempotent ones (same
checks); the first one of a producer opens a transaction here at its offset. Before that
first one, the transaction's coordinator must confirm that this partition is in the
producer's ongoing transaction (KIP-890, asked by the produce handler through
``coordinator.transaction.verification``): the producer's batches wait meanwhile, in the
order they came (``append_when_verified``), and are appended when the answer comes
(``verified``) - unless a marker for that producer was written here in between, which ended
the transaction the answer was about (Kafka's verification guard). The
transaction coordinator ends it with ``write_txn_marker``: a control batch (COMMIT or
ABORT) in Kafka's format; an ABORT adds an entry to the marker's segment's ``.txnindex``,
which ``aborted_transactions`` reads for ``read_committed`` fetches. Followers apply markers
from the replicated batches exactly as the leader did.

Every append takes one path (``_append``, Kafka's ``UnifiedLog.append``) whose
``AppendOrigin`` selects the validations: CLIENT (a producer's batch, ``append_records``),
COORDINATOR (a coordinator's records, ``append_records``, or a marker, ``write_txn_marker``)
or REPLICATION (the leader's batches on a follower, ``append_as_follower``); the state that
follows the log (epoch cache, producer state, ``.txnindex``, HW) is updated the same way
for all three, so a follower's state is the leader's.

Produce (``append_records``) and consumer fetches (``read``) are served only by the leader
(NOT_LEADER_OR_FOLLOWER otherwise). ``acks=all`` checks ``min.insync.replicas`` against the
committed ISR before appending (NOT_ENOUGH_REPLICAS), then waits in ``wait_for_acks`` until
the HW passes the batch (Kafka's delayed produce); if the ISR shrank below the minimum by
then, NOT_ENOUGH_REPLICAS_AFTER_APPEND. Followers append the leader's batches as they are
(``append_as_follower``) and truncate a divergent tail (``truncate_to``).

ISR changes are proposed here (``maybe_expand_isr`` on a follower's fetch, ``maybe_shrink_isr``
on a timer) and carried out by the owner of the metadata store, which calls
``complete_isr_change`` with what the compare-and-set stored (or None when it lost the race);
in between the ISR is pending, and no second change is proposed.

Validation on the client append path follows Kafka's LogValidator for magic-2 batches:
CRC and lengths (CORRUPT_MESSAGE), record counts (INVALID_RECORD), size against
``max.message.bytes`` (MESSAGE_TOO_LARGE). Bodies are never decompressed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from ..controller.store import NO_LEADER, PartitionState
from ..protocol import batches, control_records
from ..protocol.control_records import Marker
from ..protocol.errors import ErrorCode, KafkaError
from ..storage import AbortedTxn, AppendInfo, FileRegion, Log, LogConfig, OffsetAndTimestamp
from ..storage import files, producer_snapshots
from ..storage.leader_epoch import LeaderEpochCache
from .producer_state import BatchMetadata, CompletedTxn, ProducerStateManager
from .replicas import CommittedIsr, FollowerState, IsrState, PendingExpand, PendingShrink

log = logging.getLogger(__name__)


_NO_MARKERS: Mapping[int, Marker] = MappingProxyType({})  # a client's batch is never one


class AppendOrigin(Enum):
    """Who appends; selects the validations on the one append path (Kafka's AppendOrigin,
    ``Partition._append``; the checks are listed at ``Partition._validate``):

    - CLIENT: a producer's batch, on the leader (``append_records``): batch checks, no
      control batches, producer epochs and sequences checked and retries answered with
      their original offsets, LogAppendTime stamped; offsets and leader epoch assigned.
    - COORDINATOR: a coordinator's write, on the leader: its internal topic's records
      (``append_records``) or a transaction marker (``write_txn_marker``). Batch checks; no
      sequence checks and no deduplication; a marker passes ``check_marker`` (producer and
      coordinator epochs); offsets and leader epoch assigned.
    - REPLICATION: the leader's batches, on a follower (``append_as_follower``): CRCs
      checked, offsets and epochs kept, producer state updated without verification,
      markers included.
    """
    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class IsolationLevel(Enum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    @classmethod
    def from_wire(cls, value: int) -> IsolationLevel:
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
    def from_configs(cls, configs: dict[str, str]) -> TopicSettings:
        return cls(
            log_config=LogConfig(
                segment_bytes=int(configs["segment.bytes"]),
                segment_ms=int(configs["segment.ms"]),
                retention_ms=int(configs["retention.ms"]),
                retention_bytes=int(configs["retention.bytes"]),
                index_interval_bytes=int(configs["index.interval.bytes"]),
                compacted="compact" in configs.get("cleanup.policy", "delete").split(","),
            ),
            max_message_bytes=int(configs["max.message.bytes"]),
            log_append_time=configs["message.timestamp.type"] == "LogAppendTime",
            min_insync_replicas=int(configs["min.insync.replicas"]),
        )


class LeadershipLease:
    """How long this broker may act as a leader without word from the metadata store.

    In cluster mode the broker renews it each time the store confirms our session; it runs
    out ``duration_s`` after the last confirmation was *asked for*. ZooKeeper cannot have
    expired our session (and so let the controller elect someone else) before then, so a
    broker that was paused or cut off past it — SIGSTOP, a long GC-like stall, a network
    partition — refuses to produce or serve as leader the moment it runs again, before it
    has even heard that it was replaced: no split brain. A single broker's lease never ends.
    """

    def __init__(self, duration_s: float, monotonic: Callable[[], float] = time.monotonic,
                 granted: bool = False) -> None:
        self.duration_s = duration_s
        self._monotonic = monotonic
        self._until = monotonic() + duration_s if granted else 0.0
        self._held = granted  # once granted: a broker still starting has not lost it

    def valid(self) -> bool:
        return self._monotonic() < self._until

    def lapsed(self) -> bool:
        """Held once and run out since: the broker is cut off from the store (or its
        session ended), not merely starting."""
        return self._held and not self.valid()

    def renew(self, asked_at: float) -> None:
        self._until = max(self._until, asked_at + self.duration_s)
        self._held = True

    def revoke(self) -> None:
        self._until = 0.0


class _AlwaysValid:
    def valid(self) -> bool:
        return True


ALWAYS_VALID = _AlwaysValid()


class Partition:
    def __init__(self, topic: str, index: int, log: Log, settings: TopicSettings,
                 clock: Callable[[], int], replica_id: int = 1,
                 replicas: tuple[int, ...] | None = None,
                 lease: LeadershipLease | None = None) -> None:
        self.topic = topic
        self.topic_id = ""  # the store's id of the topic's incarnation (set by the manager)
        self.index = index
        self.log = log
        self.settings = settings
        self.clock = clock
        self.replica_id = replica_id
        self.replicas: tuple[int, ...] = tuple(replicas or (replica_id,))
        # Until the metadata store says otherwise, a single replica leads itself in epoch 0;
        # a replicated one knows no leader.
        single = self.replicas == (replica_id,)
        self.leader_id = replica_id if single else NO_LEADER
        self.leader_epoch = 0 if single else -1
        self.partition_state_version = -1
        # the store's version of the state's creation: an ISR change names the incarnation of
        # the topic it was read from, so it can never land in another one's state
        self.partition_state_created = -1
        # closed or deleted: its files are gone or going; whoever awaited something with
        # this replica in hand must drop it (a fetcher asking where to truncate, say)
        self.removed = False
        self.isr_state: IsrState = CommittedIsr((replica_id,) if single else ())
        self.followers: dict[int, FollowerState] = {}
        # Cluster mode: may we act as leader now (see LeadershipLease)? And who carries out
        # the ISR changes we propose while serving a follower's fetch.
        self.lease = lease or ALWAYS_VALID
        self.isr_listener: Callable[[Partition, PartitionState], None] | None = None
        # log.flush.policy=ack: asked for an fsync after every append, called back when it is
        # done; the high watermark then never passes what the leader has fsynced.
        self.flush_requester: Callable[[Log, Callable[[], None]], None] | None = None
        # How much of the log's newest bytes stay in the page cache while we lead, and while
        # we follow (log.cache.retain.bytes, replica.cache.retain.bytes; -1 all): a
        # follower's copy is read by nobody until it leads, so it need not fill the cache.
        self.leader_cache_retain_bytes = log.config.cache_retain_bytes
        self.follower_cache_retain_bytes = log.config.cache_retain_bytes
        self.epoch_cache = LeaderEpochCache(log.directory)
        # A single replica's log holds only acknowledged (or attempted) appends, so after a
        # restart its HW starts at the LEO. A replicated one starts from its checkpoint:
        # records past it may never have reached the ISR, and consumers must not see them.
        self.high_watermark = (log.log_end_offset if single
                               else _read_high_watermark(log))
        # waiting fetches, woken in the order they came (a set would wake them in the order
        # of their addresses: a simulated run would not replay)
        self._data_waiters: dict[asyncio.Future[None], None] = {}
        self._acks_waiters: list[tuple[int, asyncio.Future[ErrorCode]]] = []
        self.producer_state = ProducerStateManager(f"{topic}-{index}")
        # producer id -> its batches waiting for its coordinator's word (KIP-890)
        self._verifying: dict[int, _Verification] = {}
        self._load_producer_state(rebuild_txn_index_from=log.txn_index_rebuild_from)
        self._load_epoch_cache()
        log.on_roll = self._snapshot_at_roll
        self._check_invariants()

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
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is None:
            return self.high_watermark
        return min(self.high_watermark, max(first_unstable, self.log_start_offset))

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.replica_id

    @property
    def high_watermark_current(self) -> bool:
        """A new leader's HW may still be below what the previous leader had exposed (it
        catches up as followers fetch); until it reaches the start of our leader epoch it is
        not an offset to report (Kafka's KIP-207: ListOffsets gets OFFSET_NOT_AVAILABLE)."""
        entries = self.epoch_cache.entries
        return not entries or self.high_watermark >= entries[-1][1]

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR: what the metadata store holds."""
        return self.isr_state.committed

    def _check_invariants(self) -> None:
        assert self.log_start_offset <= self.high_watermark <= self.log_end_offset, (
            self, self.log_start_offset, self.high_watermark, self.log_end_offset)
        assert self.log_start_offset <= self.last_stable_offset <= self.high_watermark, (
            self, self.log_start_offset, self.last_stable_offset, self.high_watermark)
        assert not self.is_leader or self.replica_id in self.isr_state.maximal, (
            self, self.isr_state)
        assert set(self.isr_state.maximal) <= set(self.replicas), (self, self.isr_state,
                                                                   self.replicas)

    def check_leader(self) -> None:
        if self.is_leader and not self.lease.valid():
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"{self}: broker {self.replica_id} has not heard from the metadata "
                             "store within its session timeout; another broker may lead now")
        if not self.is_leader:
            leader = "no leader" if self.leader_id == NO_LEADER else f"leader {self.leader_id}"
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"{self}: broker {self.replica_id} is not the leader ({leader}, "
                             f"epoch {self.leader_epoch})")

    # -- appends: one path, the origin choosing the validations ---------------------------

    def append_records(self, records: bytes | bytearray | None,
                       origin: AppendOrigin = AppendOrigin.CLIENT,
                       required_acks: int = 1) -> AppendInfo:
        """Validate and append one batch as the leader: a producer's (``CLIENT``: one
        produce request's records for this partition) or a coordinator's write to its
        internal topic (``COORDINATOR``).

        A retried idempotent client batch (same producer, epoch and sequences as one of the
        last five) is not appended again: its original offsets are returned. ``required_acks
        =-1`` is refused with NOT_ENOUGH_REPLICAS while the ISR is below
        ``min.insync.replicas``. A transactional batch opens its producer's transaction here
        if none is open."""
        if origin is AppendOrigin.REPLICATION:
            raise ValueError(f"{self}: replicated batches are appended by append_as_follower")
        self.check_leader()
        if required_acks == -1:
            self._check_enough_replicas(ErrorCode.NOT_ENOUGH_REPLICAS)
        if not records:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"{self}: produce request without records")
        # A Produce request's records arrive as a bytearray of their own (protocol.messages):
        # patched and written in place, never copied again.
        buffer = records if type(records) is bytearray else bytearray(records)
        return self._append(buffer, origin)

    # -- KIP-890: a producer's first transactional batch waits for its coordinator ---------

    def needs_verification(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether a transactional batch of this producer must wait for its coordinator to
        confirm that this partition is in its ongoing transaction: unless a transaction of
        this producer and epoch is open here already, or while earlier batches of the
        producer wait for that answer (this one queues behind them)."""
        if producer_id in self._verifying:
            return True
        entry = self.producer_state.producers.get(producer_id)
        return (entry is None or entry.current_txn_first_offset is None
                or entry.producer_epoch != producer_epoch)

    def is_verifying(self, producer_id: int) -> bool:
        return producer_id in self._verifying

    def append_when_verified(self, records: bytearray, required_acks: int, producer_id: int
                             ) -> tuple[asyncio.Future[AppendInfo], bool]:
        """Queue a transactional batch until ``verified(producer_id, ...)``; returns the
        future of its append and whether it is the first one waiting (whose verification
        the caller starts)."""
        future: asyncio.Future[AppendInfo] = asyncio.get_running_loop().create_future()
        pending = self._verifying.get(producer_id)
        first = pending is None
        if pending is None:
            pending = self._verifying[producer_id] = _Verification()
        pending.batches.append((records, required_acks, future))
        return future, first

    def verified(self, producer_id: int, code: ErrorCode, message: str | None = None) -> None:
        """The coordinator's answer for ``producer_id``'s waiting batches: with NONE they
        are appended now, in the order they came (each may still fail as any append may);
        otherwise, or when a marker for the producer was written here meanwhile
        (INVALID_TXN_STATE: the transaction the answer was about has ended), none is."""
        pending = self._verifying.pop(producer_id, None)
        if pending is None:
            return
        if code is ErrorCode.NONE and pending.ended:
            code, message = ErrorCode.INVALID_TXN_STATE, (
                f"{self}: producer {producer_id}'s transaction ended while this partition was "
                "being verified as part of it")
        elif code is ErrorCode.NONE and self.removed:
            code, message = ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self}: no longer hosted here"
        for records, required_acks, future in pending.batches:
            if future.done():
                continue
            if code is not ErrorCode.NONE:
                future.set_exception(KafkaError(code, message or code.name))
                continue
            try:
                future.set_result(self.append_records(records, required_acks=required_acks))
            except KafkaError as error:
                future.set_exception(error)

    def write_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                         coordinator_epoch: int, *, required_acks: int = -1) -> AppendInfo:
        """End ``producer_id``'s transaction on this partition (leader only): append one
        COMMIT or ABORT control batch in Kafka's format (``protocol.control_records``),
        with origin ``COORDINATOR``.

        The transaction (from its first offset to the marker) is complete at once, and
        stable - no longer holding the LSO back - once the HW passes the marker; an ABORT
        is indexed in the ``.txnindex`` for ``read_committed`` fetches. A marker for a
        producer with no transaction open here is still written (the coordinator may
        retry; Kafka does the same) and ends an empty transaction.

        Raises KafkaError: NOT_LEADER_OR_FOLLOWER; INVALID_PRODUCER_EPOCH for an epoch
        older than the producer's here; TRANSACTION_COORDINATOR_FENCED for a coordinator
        epoch older than the last marker's; with ``required_acks=-1`` (WriteTxnMarkers
        appends as acks=all), NOT_ENOUGH_REPLICAS below ``min.insync.replicas``. The caller
        waits for replication with ``wait_for_acks(info.last_offset + 1)``."""
        self.check_leader()
        if required_acks == -1:
            self._check_enough_replicas(ErrorCode.NOT_ENOUGH_REPLICAS)
        now = self.clock()
        buffer = bytearray(control_records.encode_marker(producer_id, producer_epoch, commit,
                                                         coordinator_epoch, now))
        info = self._append(buffer, AppendOrigin.COORDINATOR, now)
        pending = self._verifying.get(producer_id)
        if pending is not None:  # Kafka's verification guard: the answer is about the past
            pending.ended = True
        log.debug("%s: %s marker for producer %d epoch %d at offset %d", self,
                  "COMMIT" if commit else "ABORT", producer_id, producer_epoch,
                  info.base_offset)
        return info

    def append_as_follower(self, records: batches.ReadableBuffer | None) -> AppendInfo | None:
        """Append the leader's batches as they are (its offsets and epochs), origin
        ``REPLICATION``: after checking their CRCs, record each newer epoch's start and apply
        the batches to producer state as the leader did - sequences, transactions opened,
        markers (an ABORT is indexed in our ``.txnindex`` too)."""
        if self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"{self}: a leader does not append replicated batches")
        if not records:
            return None
        # No copy: a follower's append changes nothing in the batches.
        return self._append(records, AppendOrigin.REPLICATION)

    def _append(self, buffer: batches.ReadableBuffer, origin: AppendOrigin,
                now: int | None = None) -> AppendInfo:
        """The one append path (Kafka's ``UnifiedLog.append``), for every origin:

        validate as the origin asks (``_validate``) -> log append (the leader's batches get
        offsets from our LEO and our leader epoch; a follower's keep the leader's) -> epoch
        cache (the epoch each batch is appended in: ours on the leader, the stamped one on a
        follower; a newer one starts at the batch) -> producer state per batch, markers
        included, an ABORT indexed in the ``.txnindex`` -> on the leader: wake waiting fetches,
        ask for the fsync (``log.flush.policy=ack``), advance the HW -> invariants.
        A client's retry of a batch already written returns its original offsets instead.
        ``now``: the broker's time for LogAppendTime and producer state, read when first needed
        (a plain batch needs neither)."""
        replication = origin is AppendOrigin.REPLICATION
        headers, markers, duplicate = self._validate(buffer, origin, now)
        if duplicate is not None:
            return AppendInfo(duplicate.first_offset, duplicate.last_offset, -1, -1)
        leader_epoch = None if replication else self.leader_epoch
        info = self.log.append(buffer, leader_epoch)
        next_offset = info.base_offset
        for position, header in headers:
            if leader_epoch is None:
                epoch, base_offset = header.partition_leader_epoch, header.base_offset
            else:  # the log gave it the next offset and our epoch
                epoch, base_offset = leader_epoch, next_offset
                next_offset += header.last_offset_delta + 1
            if epoch > self.epoch_cache.latest_epoch:
                self.epoch_cache.assign(epoch, base_offset)
            if header.has_producer_id:
                if header.base_offset != base_offset:
                    header = header._replace(base_offset=base_offset)
                if now is None:
                    now = self.clock()
                completed = self.producer_state.replay(header, now, markers.get(position))
                self._index_if_aborted(completed)
        if not replication:
            self._wake_fetchers()  # followers wait for new data, consumers for the HW
            if self.flush_requester is not None:
                self.flush_requester(self.log, self._maybe_advance_high_watermark)
            self._maybe_advance_high_watermark()
        self._check_invariants()
        return info

    def _validate(self, buffer: batches.ReadableBuffer, origin: AppendOrigin, now: int | None
                  ) -> tuple[list[tuple[int, batches.BatchHeader]], Mapping[int, Marker],
                             BatchMetadata | None]:
        """What each origin checks before an append (Kafka's ``analyzeAndValidateRecords``,
        ``LogValidator`` and ``analyzeAndValidateProducerState``). Returns the batches'
        (position, header), the marker of each control batch by position, and the batch a
        client's retry duplicates (nothing is appended then).

        Every origin: whole v2 batches, lengths, CRC, record counts (``validate_batch``).
        The leader's (CLIENT, COORDINATOR): at most ``max.message.bytes``, exactly one batch.
        CLIENT: no control batch; a transactional batch has a producer id; producer state
        checks epochs and sequences and finds retries (``ProducerStateManager.check``);
        LogAppendTime stamped. COORDINATOR: no sequence checks and no deduplication (its
        records carry no sequence); a control batch must be a marker, not fenced
        (``check_marker``), and is stamped with LogAppendTime like a client's batch.
        REPLICATION: nothing more - the leader checked; a control batch that is not a marker
        we know is appended all the same and ignored by producer state."""
        if origin is AppendOrigin.REPLICATION:
            headers = self._batch_headers(buffer)
            return headers, self._markers(buffer, headers, origin), None
        if len(buffer) > self.settings.max_message_bytes:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"{self}: {len(buffer)}-byte batch exceeds max.message.bytes="
                             f"{self.settings.max_message_bytes}")
        position, end = 0, len(buffer)
        header = batches.validate_batch(buffer, position, end)
        if header.size != end:
            # Kafka requires exactly one batch per partition in a magic-2 produce request.
            count = len(self._batch_headers(buffer))  # each checked first, as a follower's
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"{self}: {count} record batches in one produce request; "
                             "expected exactly one")
        headers = [(position, header)]
        markers: Mapping[int, Marker] = _NO_MARKERS
        if origin is AppendOrigin.CLIENT:
            duplicate = self._check_client_batch(header)
            if duplicate is not None:
                return headers, markers, duplicate
        else:
            markers = self._markers(buffer, headers, origin)
        if self.settings.log_append_time and (origin is AppendOrigin.CLIENT or markers):
            # Coordinators' data batches keep their CreateTime (this broker's clock already).
            assert isinstance(buffer, bytearray), type(buffer)
            batches.set_log_append_time(buffer, position, header.size,
                                        self.clock() if now is None else now)
            headers = [(position, batches.parse_header(buffer, position))]
        return headers, markers, None

    def _batch_headers(self, buffer: batches.ReadableBuffer
                       ) -> list[tuple[int, batches.BatchHeader]]:
        headers, position, end = [], 0, len(buffer)
        while position < end:
            header = batches.validate_batch(buffer, position, end)
            headers.append((position, header))
            position += header.size
        return headers

    def _markers(self, buffer: batches.ReadableBuffer,
                 headers: list[tuple[int, batches.BatchHeader]],
                 origin: AppendOrigin) -> dict[int, Marker]:
        """The transaction marker in each control batch, by position. A coordinator's must
        decode and pass ``check_marker`` (INVALID_PRODUCER_EPOCH,
        TRANSACTION_COORDINATOR_FENCED); a replicated one without a producer id, or that does
        not decode, is left out (producer state ignores it)."""
        markers = {}
        coordinator = origin is AppendOrigin.COORDINATOR
        for position, header in headers:
            if not header.is_control or not (coordinator or header.has_producer_id):
                continue
            # decode_marker copies the batch's bytes: a follower's records may be a view of
            # a buffer the fetcher reuses
            batch = memoryview(buffer)[position:position + header.size]
            if coordinator:
                marker = control_records.decode_marker(batch, header)
                self.producer_state.check_marker(header.producer_id, header.producer_epoch,
                                                 marker.coordinator_epoch)
                markers[position] = marker
            else:
                decoded = self._marker_of(header, batch)
                if decoded is not None:
                    markers[position] = decoded
        return markers

    def _index_if_aborted(self, completed: CompletedTxn | None) -> None:
        if completed is not None and completed.is_aborted:
            self.log.append_aborted_txn(_aborted_entry(completed))

    def _marker_of(self, header: batches.BatchHeader,
                   batch: bytes | memoryview | None) -> Marker | None:
        if not header.is_control or batch is None:
            return None
        try:
            return control_records.decode_marker(batch, header)
        except KafkaError as error:
            log.warning("%s: control batch at offset %d is not a transaction marker we know "
                        "(%s); producer state ignores it", self, header.base_offset,
                        error.message)
            return None

    def _check_enough_replicas(self, code: ErrorCode) -> None:
        in_sync, needed = len(self.isr), self.settings.min_insync_replicas
        if in_sync < needed:
            raise KafkaError(code, f"{self}: {in_sync} in-sync replicas {list(self.isr)}, "
                                   f"min.insync.replicas={needed}")

    def _check_client_batch(self, header: batches.BatchHeader) -> BatchMetadata | None:
        if header.is_control:
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"{self}: clients may not write control batches")
        if header.is_transactional and not header.has_producer_id:
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"{self}: a transactional batch needs a producer id")
        if not header.has_producer_id:
            return None
        return self.producer_state.check(header, partition_is_empty=self.log_end_offset == 0)

    def wait_for_acks(self, required_offset: int) -> asyncio.Future[ErrorCode]:
        """acks=all (Kafka's delayed produce): a future resolved with an ``ErrorCode`` once
        the HW reaches ``required_offset`` (NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when
        the ISR is below the minimum by then), or when leadership is lost
        (NOT_LEADER_OR_FOLLOWER). The caller bounds the wait with the request's timeout."""
        waiter = asyncio.get_running_loop().create_future()
        if self.high_watermark >= required_offset:
            waiter.set_result(self._acks_outcome())
        else:
            self._acks_waiters.append((required_offset, waiter))
        return waiter

    def _acks_outcome(self) -> ErrorCode:
        if len(self.isr) < self.settings.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def _complete_acks_waiters(self, lost_leadership: bool = False) -> None:
        if not self._acks_waiters:
            return
        waiting = []
        for required_offset, waiter in self._acks_waiters:
            if waiter.done():
                continue
            if lost_leadership:
                waiter.set_result(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif self.high_watermark >= required_offset:
                waiter.set_result(self._acks_outcome())
            else:
                waiting.append((required_offset, waiter))
        self._acks_waiters = waiting

    def check_leader_epoch(self, requested: int) -> None:
        """KIP-320: a client's view of the leader epoch must match ours (-1: not checked)."""
        if requested == -1 or requested == self.leader_epoch:
            return
        code = (ErrorCode.UNKNOWN_LEADER_EPOCH if requested > self.leader_epoch
                else ErrorCode.FENCED_LEADER_EPOCH)
        raise KafkaError(code, f"{self}: request leader epoch {requested}, ours "
                               f"{self.leader_epoch}")

    # -- the high watermark ----------------------------------------------------------------

    def _maybe_advance_high_watermark(self) -> None:
        """Leader: the HW is the smallest LEO over the maximal ISR; it never goes back."""
        if not self.is_leader:
            return
        new = (self.log.durable_end_offset if self.flush_requester is not None
               else self.log_end_offset)
        for replica in self.isr_state.maximal:
            if replica != self.replica_id:
                follower = self.followers.get(replica)
                new = min(new, follower.log_end_offset if follower else -1)
        if new > self.high_watermark:
            self._set_high_watermark(new)
            self._complete_acks_waiters()

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """Follower: the leader's HW from its fetch response, capped by our own LEO; only
        forward (Kafka's ``maybeUpdateHighWatermark``). A deposed leader that rejoins as a
        follower may have exposed a higher HW than its new leader knows yet (that leader's
        HW catches up once its followers fetch): what was committed stays committed
        (simulation seed 3377). Truncation, which never cuts committed records, caps the HW
        at the log end on its own."""
        new = max(min(leader_high_watermark, self.log_end_offset), self.log_start_offset)
        if new > self.high_watermark:
            self._set_high_watermark(new)

    def _set_high_watermark(self, high_watermark: int) -> None:
        """Every HW change comes here: transactions whose marker it passed become stable,
        so the LSO may move too, and waiting fetches are woken for either."""
        self.high_watermark = high_watermark
        self.producer_state.on_high_watermark(high_watermark)
        self._wake_fetchers()

    # -- fetch -----------------------------------------------------------------------------

    def fetch_bound(self, isolation: IsolationLevel) -> int:
        """The offset a consumer may read up to (exclusive)."""
        if isolation is IsolationLevel.READ_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark

    def read(self, offset: int, max_bytes: int, isolation: IsolationLevel,
             min_one_batch: bool, region_min_bytes: int | None = None
             ) -> bytes | memoryview | FileRegion:
        """A consumer's read (leader only): whole batches from ``offset`` below the HW or
        LSO; OFFSET_OUT_OF_RANGE outside [log start, LEO]. ``region_min_bytes``: see
        ``Log.read``."""
        self.check_leader()
        return self._read(offset, max_bytes, self.fetch_bound(isolation), min_one_batch,
                          region_min_bytes)

    def _read(self, offset: int, max_bytes: int, bound: int, min_one_batch: bool,
              region_min_bytes: int | None) -> bytes | memoryview | FileRegion:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"{self}: fetch offset {offset} outside [{self.log_start_offset}, "
                             f"{self.log_end_offset}]")
        if offset >= bound:
            return b""
        return self.log.read(offset, max_bytes, max_offset=bound, min_one_batch=min_one_batch,
                             region_min_bytes=region_min_bytes)

    def read_for_follower(self, replica_id: int, offset: int, max_bytes: int,
                          region_min_bytes: int | None = None
                          ) -> bytes | memoryview | FileRegion:
        """A follower's fetch (leader only): up to our LEO, not the HW. The fetch offset is
        the follower's LEO: it may advance the HW and bring the follower into the ISR."""
        self.check_leader()
        if replica_id not in self.replicas or replica_id == self.replica_id:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"{self}: broker {replica_id} is not a replica {list(self.replicas)}")
        records = self._read(offset, max_bytes, self.log_end_offset, True, region_min_bytes)
        self.record_follower_fetch(replica_id, offset)
        return records

    def record_follower_fetch(self, replica_id: int, fetch_offset: int) -> None:
        follower = self.followers.setdefault(replica_id, FollowerState(replica_id))
        follower.record_fetch(fetch_offset, self.log_end_offset, self.clock())
        proposed = self.maybe_expand_isr(replica_id)
        if proposed is not None and self.isr_listener is not None:
            self.isr_listener(self, proposed)
        self._maybe_advance_high_watermark()

    def aborted_transactions(self, fetch_offset: int,
                             upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction that overlaps
        [``fetch_offset``, ``upper_bound_offset``) - its abort marker at or after the fetch
        offset, its first offset before the bound - sorted by first offset, as a
        ``read_committed`` fetch response carries them. A bound past the data returned
        (the LSO) only adds entries a client ignores."""
        found = self.log.collect_aborted_transactions(fetch_offset, upper_bound_offset)
        return [(entry.producer_id, entry.first_offset)
                for entry in sorted(found, key=lambda e: (e.first_offset, e.producer_id))]

    def offset_for_timestamp(self, timestamp_ms: int) -> OffsetAndTimestamp | None:
        return self.log.offset_for_timestamp(timestamp_ms)

    def max_timestamp(self) -> OffsetAndTimestamp | None:
        return self.log.max_timestamp()

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= ``leader_epoch`` we know, where it
        ended in our log); (-1, -1) when unknown."""
        return self.epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)

    # -- leadership (applied from the metadata store) -------------------------------------

    def become_leader(self, state: PartitionState, replicas: tuple[int, ...]) -> bool:
        """Lead from ``state`` (whose leader is us). A new epoch starts at our LEO; followers
        in the ISR count as caught up now, as Kafka does, so none is dropped from it before it
        had a chance to fetch from us. Returns True when the epoch or role changed."""
        assert state.leader == self.replica_id, (self, state)
        changed = not self.is_leader or state.leader_epoch != self.leader_epoch
        self.replicas = tuple(replicas)
        self.leader_id = self.replica_id
        self.leader_epoch = state.leader_epoch
        self.partition_state_version = state.version
        self.partition_state_created = state.created_version
        self.isr_state = CommittedIsr(tuple(state.isr))
        self.log.keep_cached(self.leader_cache_retain_bytes)
        if changed:
            self.epoch_cache.assign(state.leader_epoch, self.log_end_offset)
            now = self.clock()
            self.followers = {r: FollowerState(r, last_caught_up_ms=now if r in state.isr else 0)
                              for r in self.replicas if r != self.replica_id}
            log.info("%s: leader in epoch %d from offset %d, ISR %s", self, self.leader_epoch,
                     self.log_end_offset, list(state.isr))
        self._maybe_advance_high_watermark()
        self._check_invariants()
        self._wake_fetchers()
        return changed

    def become_follower(self, state: PartitionState, replicas: tuple[int, ...]) -> bool:
        """Follow ``state.leader`` (or nobody, when the partition is offline). Waiting acks=all
        produces are answered NOT_LEADER_OR_FOLLOWER: their records may never be committed.
        Returns True when the leader or epoch changed (the fetcher must then re-check where
        our log diverges from the new leader's)."""
        changed = state.leader != self.leader_id or state.leader_epoch != self.leader_epoch
        was_leader = self.is_leader
        self.replicas = tuple(replicas)
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_state_version = state.version
        self.partition_state_created = state.created_version
        self.isr_state = CommittedIsr(tuple(state.isr))
        self.followers = {}
        self.log.keep_cached(self.follower_cache_retain_bytes)
        if changed:
            self._complete_acks_waiters(lost_leadership=True)
            self._wake_fetchers()
            log.info("%s: %s in epoch %d%s", self,
                     f"following {state.leader}" if state.has_leader else "offline (no leader)",
                     state.leader_epoch, " (was leader)" if was_leader else "")
        self._check_invariants()
        return changed

    def apply_state(self, state: PartitionState, replicas: tuple[int, ...]) -> bool:
        if state.leader == self.replica_id:
            return self.become_leader(state, replicas)
        return self.become_follower(state, replicas)

    # -- the ISR (leader) ------------------------------------------------------------------

    def maybe_expand_isr(self, replica_id: int) -> PartitionState | None:
        """A follower that caught up with the HW (and with our epoch's start) rejoins the
        ISR. Returns the proposed state when an expansion starts."""
        if not self.is_leader or self.isr_state.is_pending or replica_id in self.isr:
            return None
        follower = self.followers.get(replica_id)
        epoch_start = self.epoch_cache.entries[-1][1] if self.epoch_cache.entries else 0
        if (follower is None or follower.log_end_offset < self.high_watermark
                or follower.log_end_offset < epoch_start):
            return None
        self.isr_state = PendingExpand(self.isr, replica_id)
        return self._propose_isr(self.isr_state.maximal, f"broker {replica_id} caught up")

    def maybe_shrink_isr(self, lag_time_max_ms: int,
                         stalled_ms: int = 0) -> PartitionState | None:
        """Followers not caught up for ``replica.lag.time.max.ms`` leave the ISR; the
        ``stalled_ms`` this broker did not run since the last check are not counted against
        them (they could not fetch from it). Returns the proposed state when a shrink starts."""
        now = self.clock()
        if stalled_ms > 0:
            for follower in self.followers.values():
                follower.excuse(stalled_ms, now)
        if not self.is_leader or self.isr_state.is_pending:
            return None
        lagging = tuple(
            r for r in self.isr if r != self.replica_id
            and self.followers.get(r, FollowerState(r)).is_lagging(now, lag_time_max_ms))
        if not lagging:
            return None
        self.isr_state = PendingShrink(self.isr, lagging)
        remaining = tuple(r for r in self.isr if r not in lagging)
        return self._propose_isr(remaining, f"{list(lagging)} behind for more than "
                                            f"{lag_time_max_ms} ms")

    def _propose_isr(self, isr: tuple[int, ...], reason: str) -> PartitionState:
        log.info("%s: proposing ISR %s (was %s): %s", self, list(isr), list(self.isr), reason)
        return PartitionState(self.replica_id, self.leader_epoch, tuple(isr),
                              self.partition_state_version, self.partition_state_created)

    def complete_isr_change(self, stored: PartitionState | None) -> None:
        """The store's answer to a proposed ISR change: the state it now holds, or None when
        another writer got there first (the caller then re-reads and applies the state)."""
        if not self.isr_state.is_pending:
            return
        if stored is None or stored.leader_epoch != self.leader_epoch or not self.is_leader:
            self.isr_state = CommittedIsr(self.isr_state.committed)
            return
        self.isr_state = CommittedIsr(tuple(stored.isr))
        self.partition_state_version = stored.version
        self.partition_state_created = stored.created_version
        self._maybe_advance_high_watermark()
        self._complete_acks_waiters()
        self._check_invariants()

    # -- replication (follower) ------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop our divergent tail from ``offset`` on (found with OffsetForLeaderEpoch);
        producer state is rebuilt from what remains."""
        if offset >= self.log_end_offset:
            # Nothing to cut, but the epoch cache may still end in an epoch that began at our
            # log end: this broker led it and was deposed before appending anything. Left in
            # place, every OffsetForLeaderEpoch round asks about that epoch again and the
            # fetcher never settles (Kafka's UnifiedLog.truncateTo does the same).
            self.epoch_cache.truncate_from_end(self.log_end_offset)
            return
        log.info("%s: truncating from %d to %d (leader %d, epoch %d)", self,
                 self.log_end_offset, offset, self.leader_id, self.leader_epoch)
        self.log.truncate_to(offset)
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self.producer_state = ProducerStateManager(f"{self.topic}-{self.index}")
        self._load_producer_state()
        self._set_high_watermark(max(min(self.high_watermark, self.log_end_offset),
                                     self.log_start_offset))
        self._check_invariants()

    def reset_to(self, offset: int) -> None:
        """The leader's log starts past our end (retention): start again, empty, at
        ``offset`` (Kafka's ``truncateFullyAndStartAt``)."""
        log.info("%s: log end %d is before the leader's log start %d; starting over there",
                 self, self.log_end_offset, offset)
        self.log.reset_to(offset)
        self.epoch_cache.clear()
        self.producer_state = ProducerStateManager(f"{self.topic}-{self.index}")
        self._set_high_watermark(offset)
        self._check_invariants()

    # -- retention -------------------------------------------------------------------------

    def apply_retention(self) -> int:
        """Delete expired segments wholly below the HW (``Log.apply_retention``); the HW,
        LSO and epoch cache follow the new log start. Returns how many segments went."""
        deleted = self.log.apply_retention(self.high_watermark)
        if deleted:
            self._set_high_watermark(max(self.high_watermark, self.log_start_offset))
            self.epoch_cache.truncate_from_start(self.log_start_offset)
            self._check_invariants()
        return deleted

    # -- waiting fetches (the fetch purgatory) --------------------------------------------

    def add_data_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._data_waiters[waiter] = None

    def remove_data_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._data_waiters.pop(waiter, None)

    def _wake_fetchers(self) -> None:
        waiters, self._data_waiters = self._data_waiters, {}
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- persistence -----------------------------------------------------------------------

    def _load_producer_state(self, rebuild_txn_index_from: int | None = None) -> None:
        """Newest snapshot at or below where the replay must start, then the batches after it.

        On open, ``rebuild_txn_index_from`` is the log's ``txn_index_rebuild_from`` (the
        active segment's base offset, or an earlier rescanned segment's): the replay starts
        at or before it, the aborted transactions whose markers lie from there on become
        those segments' ``.txnindex`` files, and if no snapshot sat exactly there one is
        written as the replay passes it, so the next open replays from there. Otherwise
        (after truncation) it starts from the newest snapshot at or below the log end."""
        directory, end = self.log.directory, self.log.log_end_offset
        rebuild_from = rebuild_txn_index_from
        producer_snapshots.delete_above(directory, end)
        start = self.log.log_start_offset
        snapshot = producer_snapshots.load_latest(directory,
                                                  end if rebuild_from is None else rebuild_from)
        if snapshot is not None:
            offset, producers = snapshot
            self.producer_state.load_json(producers)
            start = max(start, offset)
        snapshot_at = rebuild_from if rebuild_from is not None and start < rebuild_from else None
        aborted: list[AbortedTxn] = []
        now = self.clock()
        for header, batch in self.log.replay_batches(start):
            if header.base_offset < start:
                continue
            if snapshot_at is not None and header.base_offset >= snapshot_at:
                self._write_snapshot(snapshot_at)
                snapshot_at = None
            if not header.has_producer_id:
                continue
            completed = self.producer_state.replay(header, now, self._marker_of(header, batch))
            if (completed is not None and completed.is_aborted and rebuild_from is not None
                    and completed.last_offset >= rebuild_from):
                aborted.append(_aborted_entry(completed))
        if snapshot_at is not None:
            self._write_snapshot(snapshot_at)  # nothing at or after it: the state is its
        if rebuild_from is not None:
            self.log.rebuild_txn_indexes(aborted)
        self.producer_state.on_high_watermark(self.high_watermark)

    def _write_snapshot(self, offset: int) -> bool:
        try:
            producer_snapshots.write_snapshot(self.log.directory, offset,
                                              self.producer_state.to_json())
        except OSError as error:  # a snapshot only saves replay time: carry on without it
            log.warning("%s: cannot write a producer snapshot at offset %d: %s", self, offset,
                        error)
            return False
        return True

    def _snapshot_at_roll(self, base_offset: int) -> None:
        """``Log.on_roll``: producer state now is what the batches below the new segment
        left (the batch that caused the roll is not applied yet)."""
        if self._write_snapshot(base_offset):
            producer_snapshots.delete_unneeded(self.log.directory, base_offset)

    def _load_epoch_cache(self) -> None:
        """Logs written before the checkpoint existed (or with an unreadable one) rebuild it
        from the epochs stamped in their batch headers."""
        cache = self.epoch_cache
        if cache.entries or self.log_end_offset == self.log_start_offset:
            if not cache.entries and self.is_leader:
                cache.assign(self.leader_epoch, self.log_end_offset)
            return
        for header in self.log.batch_headers(self.log_start_offset):
            if header.partition_leader_epoch > cache.latest_epoch:
                cache.assign(header.partition_leader_epoch, header.base_offset)

    def take_producer_snapshot(self) -> None:
        if not self.producer_state.changed:
            return
        producer_snapshots.write_snapshot(self.log.directory, self.log.log_end_offset,
                                          self.producer_state.to_json())
        producer_snapshots.delete_unneeded(self.log.directory,
                                           self.log.active_segment_base_offset)
        self.producer_state.changed = False

    def checkpoint_high_watermark(self) -> None:
        """Replicated partitions keep their HW across restarts (Kafka's
        replication-offset-checkpoint, one small file per partition here)."""
        if self.is_replicated:
            _write_high_watermark(self.log, self.high_watermark)

    @property
    def is_replicated(self) -> bool:
        return self.replicas != (self.replica_id,)

    def write_high_watermark_checkpoint(self, high_watermark: int) -> None:
        """Write a HW read earlier on the event loop (any thread; the checkpoint loop's)."""
        _write_high_watermark(self.log, high_watermark)

    def close(self) -> None:
        """Clean shutdown: flush to disk first, as Kafka does, and snapshot producer state."""
        self.removed = True
        self._wake_fetchers()
        self._complete_acks_waiters(lost_leadership=True)
        self.log.flush()
        self.take_producer_snapshot()
        self.checkpoint_high_watermark()
        self.log.close()

    def delete(self) -> None:
        """Topic deletion: wake waiting fetches (they will see the topic gone), remove files."""
        self.removed = True
        self._wake_fetchers()
        self._complete_acks_waiters(lost_leadership=True)
        self.log.delete()


@dataclass(slots=True)
class _Verification:
    """A producer's transactional batches waiting for its coordinator's word, in arrival
    order, each with its acks and the future of its append."""
    batches: list[tuple[bytearray, int, asyncio.Future[AppendInfo]]] = field(
        default_factory=list)
    ended: bool = False  # a marker for the producer was written here meanwhile


def _aborted_entry(completed: CompletedTxn) -> AbortedTxn:
    return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                      completed.last_stable_offset)


HIGH_WATERMARK_FILE = "high-watermark"


def _read_high_watermark(partition_log: Log) -> int:
    try:
        value = int((partition_log.directory / HIGH_WATERMARK_FILE).read_text())
    except (OSError, ValueError):
        value = 0
    return max(min(value, partition_log.log_end_offset), partition_log.log_start_offset)


def _write_high_watermark(partition_log: Log, high_watermark: int) -> None:
    files.replace(partition_log.directory / HIGH_WATERMARK_FILE, str(high_watermark))
