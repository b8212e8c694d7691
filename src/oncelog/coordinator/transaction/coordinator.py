"""The transaction coordinator (Kafka's ``TransactionCoordinator`` and
``TransactionStateManager``): one per broker, coordinating the transactional ids whose
partition of ``__transaction_state`` this broker leads.

Owns: the state of every transactional id it coordinates (``metadata.TransactionMetadata``),
which partitions of ``__transaction_state`` it has loaded, and a lock per transactional id
(one request at a time per id: each change is written, and replicated, before the next one
is computed).

Writes follow "emit, then apply": a request computes the next snapshot with a function of
``metadata``, appends it to the id's partition, waits until the partition's high watermark
passes it (``transaction.state.log.min.isr``), and only then makes it the id's state; a write
that fails leaves the state as it was and answers the client with Kafka's code for it.

Completing a transaction: EndTxn writes PrepareCommit (or PrepareAbort) and is answered once
it is replicated - from then on the outcome is decided, as in Kafka. A task that keeps the
id's lock then writes a marker into every partition of the transaction
(``markers.TransactionMarkers``: locally or with WriteTxnMarkers to the partition's leader,
retried until each is written), then CompleteCommit (CompleteAbort), retried while this broker
coordinates the id. The id's next request waits for the lock meanwhile (where Kafka answers
CONCURRENT_TRANSACTIONS and the client backs off), so a producer's next transaction begins
once its last one's markers are in place. A transaction found in a Prepare state when a
partition is loaded (the previous coordinator died between the two records) is completed by
the loader, so a transaction that reached PrepareCommit always commits. Since every completion
holds the id's lock until done, a Prepare state seen by whoever holds the lock is abandoned
(its Complete record, or a fence's abort, failed to write): the id's next request finishes it
before its own work, and so does the periodic pass below when no client comes back.

Timers: every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` ongoing
transactions older than their timeout are aborted with a bumped epoch (the producer that
began one is fenced), and abandoned Prepare states completed, each id in a task of its own
(a marker that cannot be written yet holds up no other id); every
``transaction.remove.expired.transaction.cleanup.interval.ms`` ids at rest for
``transactional.id.expiration.ms`` are removed (Dead, then a tombstone).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from ...protocol.errors import ErrorCode, KafkaError
from ..record_codec import partition_for
from . import metadata as txn
from .metadata import TransactionMetadata
from .records import decode_key, decode_value, encode_key, encode_value
from .state import TransactionState
from .state_topic import TransactionStateTopic

if TYPE_CHECKING:
    from ...config import BrokerConfig
    from .markers import TransactionMarkers

log = logging.getLogger(__name__)

S = TransactionState
# Storage errors as the transaction APIs report them (Kafka's TransactionStateManager).
_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}
WRITE_TIMEOUT_MS = 5000
COMPLETE_RETRY_S = 0.1


class ProducerIds(Protocol):
    """Where producer ids come from (``controller.ProducerIdManager``): ``reserve`` may wait
    on the metadata store (COORDINATOR_NOT_AVAILABLE when it cannot be reached), then
    ``allocate`` hands out a reserved id without waiting."""

    async def reserve(self, count: int = 1) -> None: ...

    def allocate(self) -> int: ...


class TransactionCoordinator:
    def __init__(self, config: BrokerConfig, state_topic: TransactionStateTopic,
                 producer_ids: ProducerIds, markers: TransactionMarkers,
                 clock: Callable[[], int]) -> None:
        self.config = config
        self.state_topic = state_topic
        self.allocate_producer_id = producer_ids.allocate
        self.reserve_producer_id = producer_ids.reserve
        self.markers = markers
        self.clock = clock
        self.transactions: dict[str, TransactionMetadata] = {}
        self.owned_partitions: set[int] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._completions: set[asyncio.Task[None]] = set()

    # -- which ids are ours ------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        count = self.state_topic.partition_count
        return partition_for(transactional_id, count) if count else -1

    def is_coordinator_for(self, transactional_id: str) -> bool:
        index = self.partition_for(transactional_id)
        return index in self.owned_partitions and self.state_topic.may_lead(index)

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The leader epoch of the id's partition: markers carry it (Kafka's
        coordinatorEpoch), so a partition can tell a deposed coordinator's late marker."""
        return self.state_topic.partition(self.partition_for(transactional_id)).leader_epoch

    def load(self) -> None:
        """Load every partition of ``__transaction_state`` this broker leads and has not
        loaded yet (single broker)."""
        for index in range(self.state_topic.partition_count):
            if index not in self.owned_partitions and self.state_topic.may_lead(index):
                self.load_partition(index)

    def load_partition(self, index: int) -> None:
        """Rebuild the ids of partition ``index`` from its records (the last one per id wins;
        a tombstone removes the id); finish the transactions caught in a Prepare state."""
        found: dict[str, TransactionMetadata | None] = {}
        for entry in self.state_topic.read(index):
            if entry.key is None:
                continue  # no transaction ever writes here; nothing else lacks a key
            try:
                transactional_id = decode_key(entry.key)
                found[transactional_id] = (None if entry.value is None
                                           else decode_value(transactional_id, entry.value))
            except KafkaError as error:
                log.error("%s-%d: skipping a record that does not decode: %s",
                          self.state_topic.name, index, error.message)
        for transactional_id, meta in found.items():
            if meta is None or meta.state is S.DEAD:
                self.transactions.pop(transactional_id, None)
            else:
                self.transactions[transactional_id] = meta
        self.owned_partitions.add(index)
        loaded = [m for t, m in self.transactions.items() if self.partition_for(t) == index]
        if loaded:
            log.info("%s-%d loaded: %d transactional ids", self.state_topic.name, index,
                     len(loaded))
        for meta in loaded:
            if meta.state.is_preparing:
                self._spawn(self._resume(meta.transactional_id))

    def unload_partition(self, index: int) -> None:
        self.owned_partitions.discard(index)
        for transactional_id in [t for t in self.transactions if self.partition_for(t) == index]:
            del self.transactions[transactional_id]

    def close(self) -> None:
        """Stop completing transactions (the broker is stopping): each one left in its
        Prepare state is completed from that record by whoever coordinates the id next."""
        for task in list(self._completions):
            task.cancel()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coroutine)
        except RuntimeError:  # loaded before the event loop runs: run() picks them up
            coroutine.close()
            return
        self._completions.add(task)
        task.add_done_callback(self._completions.discard)

    # -- requests --------------------------------------------------------------------------

    def _check_coordinator(self, transactional_id: str | None) -> None:
        if not transactional_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "an empty transactional id")
        if not self.is_coordinator_for(transactional_id):
            raise KafkaError(ErrorCode.NOT_COORDINATOR,
                             f"this broker does not coordinate {transactional_id!r}")

    def _lock(self, transactional_id: str) -> asyncio.Lock:
        return self._locks.setdefault(transactional_id, asyncio.Lock())

    def _current(self, transactional_id: str) -> TransactionMetadata:
        meta = self.transactions.get(transactional_id)
        if meta is None:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                             f"{transactional_id!r} has no producer id: InitProducerId first")
        return meta

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> tuple[int, int]:
        """(producer id, epoch) for a producer instance of ``transactional_id``."""
        self._check_coordinator(transactional_id)
        txn.check_timeout(timeout_ms, self.config["transaction.max.timeout.ms"])
        async with self._lock(transactional_id):
            await self._finish_abandoned(transactional_id)
            # an id in hand before the state change below, which takes at most one and
            # must not wait half-way
            await self.reserve_producer_id()
            now = self.clock()
            meta = self.transactions.get(transactional_id)
            if meta is None:
                meta = txn.new_transactional_id(transactional_id, self.allocate_producer_id(),
                                                timeout_ms, now)
            else:
                meta = txn.init_producer_id(meta, timeout_ms, now, self.allocate_producer_id,
                                            expected)
            await self._write(meta)
            if meta.state is S.PREPARE_EPOCH_FENCE:
                # An instance left a transaction open: it is fenced now, and its transaction
                # is aborted before the new instance may begin (it retries meanwhile).
                await self._abort_and_complete(transactional_id)
                raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS,
                                 f"{transactional_id!r}: the previous instance's transaction "
                                 "was aborted; retry")
            return meta.producer_id, meta.producer_epoch

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: set[tuple[str, int]]) -> None:
        self._check_coordinator(transactional_id)
        async with self._lock(transactional_id):
            await self._finish_abandoned(transactional_id)
            meta = self._current(transactional_id)
            if partitions <= meta.partitions and meta.state is S.ONGOING:
                txn.check_producer(meta, producer_id, producer_epoch)
                return  # a retry: already in the transaction
            await self._write(txn.add_partitions(meta, producer_id, producer_epoch,
                                                 partitions, self.clock()))

    async def end_transaction(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, commit: bool) -> None:
        """Returns once PrepareCommit (PrepareAbort) is written and replicated: from then on
        the outcome is decided. The markers and the Complete record follow in a task that
        keeps the id's lock, so the id's next request waits for them."""
        self._check_coordinator(transactional_id)
        lock = self._lock(transactional_id)
        await lock.acquire()
        handed_over = False
        try:
            await self._finish_abandoned(transactional_id)
            meta = self._current(transactional_id)
            prepared = txn.end_transaction(meta, producer_id, producer_epoch, commit,
                                           self.clock())
            if prepared is meta:
                return  # a retry of an EndTxn already completed
            await self._write(prepared)
            self._spawn(self._complete_and_release(prepared, lock))
            handed_over = True
        finally:
            if not handed_over:
                lock.release()

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[tuple[str, int]]
                          ) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890's question, asked by a partition leader before it appends a producer's
        first transactional batch (AddPartitionsToTxn v4+ with ``verify_only``, or in
        process when this broker coordinates the id): is each partition in the id's ongoing
        transaction, begun by this producer and epoch? Kafka's answers, in its order:
        INVALID_REQUEST for an empty id, NOT_COORDINATOR, INVALID_PRODUCER_ID_MAPPING,
        PRODUCER_FENCED for another epoch, CONCURRENT_TRANSACTIONS while the transaction is
        being completed; then per partition NONE, or TRANSACTION_ABORTABLE when it is not in
        an ongoing transaction (a write that came late, after its transaction ended)."""
        wanted = list(partitions)

        def every(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return {partition: code for partition in wanted}

        if not transactional_id:
            return every(ErrorCode.INVALID_REQUEST)
        if not self.is_coordinator_for(transactional_id):
            return every(ErrorCode.NOT_COORDINATOR)
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return every(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != producer_epoch:
            return every(ErrorCode.PRODUCER_FENCED)
        if meta.state.is_preparing:
            return every(ErrorCode.CONCURRENT_TRANSACTIONS)
        ongoing = meta.state is S.ONGOING
        return {partition: (ErrorCode.NONE if ongoing and partition in meta.partitions
                            else ErrorCode.TRANSACTION_ABORTABLE)
                for partition in wanted}

    # -- completion ------------------------------------------------------------------------

    async def _complete(self, prepared: TransactionMetadata) -> None:
        """Markers into every partition of the transaction, then the Complete record."""
        await self._write_markers(prepared)
        await self._write(txn.complete(prepared, self.clock()))

    async def _write_markers(self, prepared: TransactionMetadata) -> None:
        transactional_id = prepared.transactional_id
        await self.markers.write_all(
            sorted(prepared.partitions), prepared.producer_id, prepared.producer_epoch,
            prepared.state is S.PREPARE_COMMIT, self.coordinator_epoch(transactional_id),
            still_ours=lambda: self.is_coordinator_for(transactional_id))

    async def _complete_and_release(self, prepared: TransactionMetadata,
                                    lock: asyncio.Lock) -> None:
        """Complete an answered EndTxn, then free the id. The markers are retried until
        written; so is the Complete record, while this broker coordinates the id (otherwise
        the new coordinator completes the transaction from its Prepare record)."""
        transactional_id = prepared.transactional_id
        try:
            await self._write_markers(prepared)
            while True:
                completed = txn.complete(prepared, self.clock())
                try:
                    await self._write(completed)
                    return
                except KafkaError as error:
                    if not self.is_coordinator_for(transactional_id):
                        raise
                    log.warning("writing %r's %s record: %s; retrying", transactional_id,
                                completed.state.display_name, error.message)
                    await asyncio.sleep(COMPLETE_RETRY_S)
        except KafkaError as error:
            log.info("%r's transaction was not completed here: %s", transactional_id,
                     error.message)
        finally:
            lock.release()

    async def _abort_and_complete(self, transactional_id: str) -> None:
        aborting = txn.abort_expired(self.transactions[transactional_id], self.clock())
        await self._write(aborting)
        await self._complete(aborting)

    async def _finish_abandoned(self, transactional_id: str) -> None:
        """Called holding the id's lock. Every completion holds that lock until it is done,
        so a Prepare state seen now has nobody finishing it: loaded from the log, or left
        when a Complete record (or a fence's abort) failed to write. Finish it, or raise the
        error that stops it (the client's retry, or the next periodic pass, tries again)."""
        meta = self.transactions.get(transactional_id)
        if meta is None or not meta.state.is_preparing:
            return
        log.info("completing %r's transaction left in %s", transactional_id,
                 meta.state.display_name)
        if meta.state is S.PREPARE_EPOCH_FENCE:
            await self._abort_and_complete(transactional_id)
        else:
            await self._complete(meta)

    async def _resume(self, transactional_id: str) -> None:
        try:
            async with self._lock(transactional_id):
                await self._finish_abandoned(transactional_id)
        except KafkaError as error:
            log.warning("completing %r's transaction failed: %s; trying again within %d ms",
                        transactional_id, error.message,
                        self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"])

    # -- writing ---------------------------------------------------------------------------

    async def _write(self, meta: TransactionMetadata) -> None:
        """Append ``meta`` to its partition, wait for the ISR, then make it the state."""
        transactional_id = meta.transactional_id
        index = self.partition_for(transactional_id)
        value = None if meta.state is S.DEAD else encode_value(meta)
        try:
            self.state_topic.append(index, [(encode_key(transactional_id), value)])
        except KafkaError as error:
            raise KafkaError(_WRITE_ERRORS.get(error.code, error.code), error.message) from None
        code = await self.state_topic.wait_for_replication(index, WRITE_TIMEOUT_MS)
        if code != ErrorCode.NONE:
            raise KafkaError(_WRITE_ERRORS.get(code, code),
                             f"{transactional_id!r}: writing its state failed ({code.name})")
        if not self.is_coordinator_for(transactional_id):
            raise KafkaError(ErrorCode.NOT_COORDINATOR,
                             f"this broker stopped coordinating {transactional_id!r}")
        if meta.state is S.DEAD:
            self.transactions.pop(transactional_id, None)
        else:
            self.transactions[transactional_id] = meta

    # -- timers ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Abort timed-out transactions, remove expired ids, finish what loading found."""
        self.finish_abandoned()  # what was loaded before the loop ran
        abort_every = self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        expire_every = self.config["transaction.remove.expired.transaction.cleanup.interval.ms"]
        next_expiry = self.clock() + expire_every
        while True:
            await asyncio.sleep(abort_every / 1000)
            self.abort_timed_out()
            self.finish_abandoned()
            if self.clock() >= next_expiry:
                next_expiry = self.clock() + expire_every
                await self.expire_transactional_ids()

    def abort_timed_out(self) -> None:
        """Start aborting every ongoing transaction older than its timeout, each in a task of
        its own: one whose marker cannot be written yet (a partition without a leader) holds
        up no other id's abort."""
        now = self.clock()
        for transactional_id in self._unattended(lambda meta: txn.has_timed_out(meta, now)):
            self._spawn(self._abort_if_timed_out(transactional_id))

    async def _abort_if_timed_out(self, transactional_id: str) -> None:
        try:
            async with self._lock(transactional_id):
                current = self.transactions.get(transactional_id)
                if current is not None and txn.has_timed_out(current, self.clock()):
                    log.info("aborting %r's transaction: older than its timeout of %d ms",
                             transactional_id, current.timeout_ms)
                    await self._abort_and_complete(transactional_id)
        except KafkaError as error:
            log.warning("aborting %r's timed-out transaction failed: %s", transactional_id,
                        error.message)

    def finish_abandoned(self) -> None:
        """Start completing the transactions left in a Prepare state that nobody is
        completing (their id's lock is free): a Complete record that failed to write stays
        that way no longer than one pass, even when no client comes back for the id. Each
        runs in a task of its own, so a marker that cannot be written yet holds up nothing
        else."""
        for transactional_id in self._unattended(lambda meta: meta.state.is_preparing):
            self._spawn(self._resume(transactional_id))

    def _unattended(self, wanted: Callable[[TransactionMetadata], bool]) -> list[str]:
        """The ids coordinated here whose state is ``wanted`` and whose lock is free (no
        request or completion is at work on them)."""
        return [transactional_id for transactional_id, meta in list(self.transactions.items())
                if wanted(meta) and not self._lock(transactional_id).locked()
                and self.is_coordinator_for(transactional_id)]

    async def expire_transactional_ids(self) -> None:
        now, keep_ms = self.clock(), self.config["transactional.id.expiration.ms"]
        for transactional_id, meta in list(self.transactions.items()):
            if (meta.state.is_at_rest and now - meta.last_update_ms >= keep_ms
                    and self.is_coordinator_for(transactional_id)):
                try:
                    async with self._lock(transactional_id):
                        current = self.transactions.get(transactional_id)
                        if current is not None and current.state.is_at_rest:
                            await self._write(txn.expire(current, self.clock()))
                            log.info("transactional id %r expired", transactional_id)
                except KafkaError as error:
                    log.warning("expiring %r failed: %s", transactional_id, error.message)

    # -- describing ------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata:
        self._check_coordinator(transactional_id)
        meta = self.transactions.get(transactional_id)
        if meta is None:
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
                             f"no transactional id {transactional_id!r} here")
        return meta

    def list(self, states: set[str] | None = None, producer_ids: set[int] | None = None,
             duration_filter_ms: int = -1) -> list[TransactionMetadata]:
        """Ids this broker coordinates, filtered as ListTransactions asks (KIP-664/994)."""
        now = self.clock()
        out = []
        for transactional_id, meta in sorted(self.transactions.items()):
            if not self.is_coordinator_for(transactional_id):
                continue
            if states and meta.state.display_name not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if duration_filter_ms >= 0 and (meta.state is not S.ONGOING
                                            or now - meta.start_ms < duration_filter_ms):
                continue
            out.append(meta)
        return out
