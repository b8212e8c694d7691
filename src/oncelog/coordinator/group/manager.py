"""The groups a coordinator holds and their records in ``__consumer_offsets`` (Kafka's
``GroupMetadataManager``).

Owns: the group map (group id -> ``ClassicGroup``, committed offsets included) and which
partitions of ``__consumer_offsets`` this broker coordinates. Writes follow "emit records,
then apply": ``store`` appends a batch to the group's partition and only when the append
worked applies it with ``replay`` — the function that also rebuilds every group when a
partition is loaded at start-up. Offset commits and tombstones are replayed this way; a
classic group's GroupMetadata value is not (``replay=False``): its live state — held JoinGroup
and SyncGroup responses, deadlines — exists only in memory and was already changed by the
coordinator, and the record serves restarts only (Kafka's new coordinator does the same for
classic groups: ``CoordinatorResult(..., replayRecords=false)``).

Storage errors are translated for clients, in the visible tables below (Kafka's
``storeGroup``/``storeOffsets``).

Loading tolerates a record it cannot read: it is logged and skipped, so one bad record does
not take every group of the partition down with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from ...protocol.errors import ErrorCode, KafkaError
from ..internal_topic import Entry
from .records import (GroupMetadataKey, OffsetAndMetadata, OffsetCommitKey,
                      decode_group_metadata_value, decode_key, decode_offset_commit_value,
                      partition_for)
from .state import DEAD, ClassicGroup

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]  # (key, value); a None value is a tombstone

E = ErrorCode
# Storage errors as SyncGroup / JoinGroup / DeleteGroups report them (Kafka's storeGroup).
GROUP_WRITE_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.REBALANCE_IN_PROGRESS,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.INVALID_FETCH_SIZE: E.UNKNOWN_SERVER_ERROR,
}
# The same for OffsetCommit (Kafka's storeOffsets).
OFFSET_WRITE_ERRORS = GROUP_WRITE_ERRORS | {
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.MESSAGE_TOO_LARGE: E.INVALID_COMMIT_OFFSET_SIZE,
    E.RECORD_LIST_TOO_LARGE: E.INVALID_COMMIT_OFFSET_SIZE,
    E.INVALID_FETCH_SIZE: E.INVALID_COMMIT_OFFSET_SIZE,
}


class OffsetsLog(Protocol):
    """Where a coordinator's records live: the partitions of ``__consumer_offsets``."""

    @property
    def partition_count(self) -> int: ...

    def append(self, partition: int, records: Sequence[Record],
               producer: tuple[int, int] | None = None) -> None:
        """Append the records as one batch (transactional with ``producer`` = (id, epoch));
        raise KafkaError when that fails."""

    def read(self, partition: int) -> Iterable[Entry]:
        """Every record and transaction marker of the partition, in offset order."""

    def may_lead(self, partition: int) -> bool:
        """Whether this broker may act for the partition now: its leader, with a leadership
        lease that has not run out (a broker paused past its ZooKeeper session must not
        answer for groups another broker coordinates by now)."""


class GroupMetadataManager:
    def __init__(self, offsets_log: OffsetsLog, clock: Callable[[], int]) -> None:
        self.offsets_log = offsets_log
        self.clock = clock
        self.groups: dict[str, ClassicGroup] = {}
        # Offsets written by transactions still open (TxnOffsetCommit): producer id ->
        # (group, partition) -> offset. Applied by the producer's commit marker, dropped by
        # its abort marker; never visible to OffsetFetch before (Kafka's
        # pendingTransactionalOffsetCommits).
        self.pending: dict[int, dict[tuple[str, tuple[str, int]], OffsetAndMetadata]] = {}
        self.owned_partitions: set[int] = set()
        # Fixed when loading starts, as Kafka's groupMetadataTopicPartitionCount: partitions
        # added to __consumer_offsets later would move groups away from their records.
        self.partition_count = 0

    def partition_for(self, group_id: str) -> int:
        """The group's partition of __consumer_offsets; -1 before any is loaded."""
        if not self.partition_count:
            return -1
        return partition_for(group_id, self.partition_count)

    def is_coordinator_for(self, group_id: str) -> bool:
        partition = self.partition_for(group_id)
        return partition in self.owned_partitions and self.offsets_log.may_lead(partition)

    # -- the group map ----------------------------------------------------------------------

    def get(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def add(self, group: ClassicGroup) -> ClassicGroup:
        return self.groups.setdefault(group.group_id, group)

    # -- emit, then apply --------------------------------------------------------------------

    def store(self, group_id: str, records: Sequence[Record], *, replay: bool,
              errors: dict[ErrorCode, ErrorCode]) -> ErrorCode:
        """Append ``records`` to the group's partition; apply them only once appended."""
        partition = self.partition_for(group_id)
        try:
            self.offsets_log.append(partition, records)
        except KafkaError as error:
            log.warning("group %r: writing %d records to __consumer_offsets-%d failed: %s",
                        group_id, len(records), partition, error)
            return errors.get(error.code, error.code)
        if replay:
            for key, value in records:
                self.replay(key, value)
        return ErrorCode.NONE

    def store_transactional(self, group_id: str, records: Sequence[Record], producer_id: int,
                            producer_epoch: int, errors: dict[ErrorCode, ErrorCode]) -> ErrorCode:
        """Append a transaction's offset records; they stay pending until its marker."""
        partition = self.partition_for(group_id)
        try:
            self.offsets_log.append(partition, records, (producer_id, producer_epoch))
        except KafkaError as error:
            log.warning("group %r: writing %d transactional offsets to __consumer_offsets-%d "
                        "failed: %s", group_id, len(records), partition, error)
            return errors.get(error.code, error.code)
        for key, value in records:
            self._replay_pending(producer_id, key, value)
        return ErrorCode.NONE

    def _replay_pending(self, producer_id: int, key: bytes, value: bytes | None) -> None:
        parsed = decode_key(key)
        if isinstance(parsed, OffsetCommitKey) and value is not None:
            self.pending.setdefault(producer_id, {})[
                (parsed.group_id, (parsed.topic, parsed.partition))] = \
                decode_offset_commit_value(value)

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """The producer's marker reached ``partition``: apply (commit) or drop (abort) the
        offsets its transaction wrote for the groups of that partition."""
        entries = self.pending.get(producer_id)
        if not entries:
            return
        for (group_id, topic_partition), offset in list(entries.items()):
            if self.partition_for(group_id) != partition:
                continue
            del entries[(group_id, topic_partition)]
            if commit:
                group = self.groups.get(group_id) or self.add(ClassicGroup(group_id))
                group.offsets[topic_partition] = offset
        if not entries:
            del self.pending[producer_id]

    def has_pending(self, group_id: str, partitions: Iterable[tuple[str, int]] | None) -> bool:
        """Whether an open transaction holds offsets of the group (for ``partitions``, or
        any): OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT then."""
        wanted = None if partitions is None else set(partitions)
        return any(group == group_id and (wanted is None or tp in wanted)
                   for entries in self.pending.values() for group, tp in entries)

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of ``__consumer_offsets`` (at load, and after each append)."""
        parsed = decode_key(key)
        if isinstance(parsed, OffsetCommitKey):
            self._replay_offset(parsed, value)
        elif isinstance(parsed, GroupMetadataKey):
            self._replay_group(parsed.group_id, value)

    def _replay_offset(self, key: OffsetCommitKey, value: bytes | None) -> None:
        group = self.groups.get(key.group_id)
        partition = (key.topic, key.partition)
        if value is None:
            if group is not None:
                group.offsets.pop(partition, None)
            return
        if group is None:  # offsets committed without group management (generation -1)
            group = self.add(ClassicGroup(key.group_id))
        group.offsets[partition] = decode_offset_commit_value(value)

    def _replay_group(self, group_id: str, value: bytes | None) -> None:
        previous = self.groups.get(group_id)
        if value is None:
            if previous is not None:
                previous.transition_to(DEAD, self.clock())
                del self.groups[group_id]
            return
        offsets = previous.offsets if previous is not None else {}
        self.groups[group_id] = ClassicGroup.from_record(
            group_id, decode_group_metadata_value(value), offsets)

    # -- loading ------------------------------------------------------------------------------

    def load_partition(self, partition: int) -> list[ClassicGroup]:
        """Replay a partition from its first record; return the groups it holds."""
        if not self.partition_count:
            self.partition_count = self.offsets_log.partition_count
        count = skipped = 0
        for entry in self.offsets_log.read(partition):
            count += 1
            if entry.commit is not None:
                self.complete_transaction(partition, entry.producer_id, entry.commit)
                continue
            if entry.key is None:
                skipped += 1
                continue
            try:
                if entry.producer_id >= 0:
                    self._replay_pending(entry.producer_id, entry.key, entry.value)
                else:
                    self.replay(entry.key, entry.value)
            except KafkaError as error:
                skipped += 1
                log.error("__consumer_offsets-%d: skipping an unreadable record: %s",
                          partition, error)
        self.owned_partitions.add(partition)
        groups = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]
        if count:
            log.info("__consumer_offsets-%d: loaded %d groups from %d records%s", partition,
                     len(groups), count, f" ({skipped} skipped)" if skipped else "")
        return groups

    def unload_partition(self, partition: int) -> list[ClassicGroup]:
        """Stop coordinating a partition's groups (Kafka's ``removeGroupsForPartition``)."""
        self.owned_partitions.discard(partition)
        groups = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]
        for group in groups:
            del self.groups[group.group_id]
        for producer_id, entries in list(self.pending.items()):
            for group_id, topic_partition in [k for k in entries
                                              if self.partition_for(k[0]) == partition]:
                del entries[(group_id, topic_partition)]
            if not entries:
                del self.pending[producer_id]
        return groups
