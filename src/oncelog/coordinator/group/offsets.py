"""Offset commits, fetches and deletions, and group administration (list, describe,
delete): the group APIs that are not about membership, split out of ``coordinator.py`` by API.

``OffsetsAndAdministration`` is a part of ``GroupCoordinator`` (which inherits it): it uses
the coordinator's ``manager``, ``clock`` and membership checks, and keeps its rules —
synchronous methods, records emitted through ``manager.store`` and applied only once
appended (committed offsets are applied by ``replay``, the same code that loads them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from .manager import GROUP_WRITE_ERRORS, OFFSET_WRITE_ERRORS, GroupMetadataManager
from .params import CLASSIC_GROUP_TYPE, GroupConfig, GroupListing, TopicPartition
from .records import OffsetAndMetadata, group_metadata_key, offset_commit_key, offset_commit_value
from .state import (COMPLETING_REBALANCE, CONSUMER_PROTOCOL_TYPE, DEAD, EMPTY,
                    PREPARING_REBALANCE, STABLE, ClassicGroup, GroupSummary, Member)

log = logging.getLogger(__name__)

E = ErrorCode
UNKNOWN_MEMBER_ID = ""


class OffsetsAndAdministration:
    """Uses, from ``GroupCoordinator``: ``manager``, ``config``, ``clock``,
    ``_check_group_id``, ``_check_member`` and ``_schedule_heartbeat``."""

    manager: GroupMetadataManager
    config: GroupConfig
    clock: Callable[[], int]

    if TYPE_CHECKING:  # GroupCoordinator's, declared here for the type checker
        def _check_group_id(self, group_id: str | None, allow_empty: bool = False
                            ) -> ErrorCode: ...

        def _check_member(self, group: ClassicGroup, member_id: str,
                          group_instance_id: str | None, generation_id: int) -> ErrorCode: ...

        def _schedule_heartbeat(self, group: ClassicGroup, member: Member,
                                timeout_ms: int | None = None) -> None: ...

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata],
                       missing_group: ErrorCode = E.ILLEGAL_GENERATION
                       ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit: members commit with their generation; anyone may commit to a group
        without members with generation -1 and no member id (admin tools, manual
        assignment). A generation of a group that does not exist is ``missing_group``
        (OffsetCommit v9+: GROUP_ID_NOT_FOUND, as Kafka's OffsetMetadataManager answers).
        Metadata longer than ``offset.metadata.max.bytes`` is refused per partition. Each
        commit also counts as a heartbeat."""
        error = self._check_group_id(group_id, allow_empty=True)
        if error is not E.NONE:
            return {partition: error for partition in offsets}
        group = self.manager.get(group_id)
        if group is None:
            if generation_id >= 0:  # a member of a generation that is gone
                return {partition: missing_group for partition in offsets}
            group = self.manager.add(ClassicGroup(group_id,
                                                  current_state_timestamp_ms=self.clock()))
        error = self._check_offset_commit(group, member_id, group_instance_id, generation_id)
        if error is E.NONE and group.is_in(COMPLETING_REBALANCE):
            error = E.REBALANCE_IN_PROGRESS  # a member cannot have its assignment yet
        if error is not E.NONE:
            return {partition: error for partition in offsets}
        if group.is_in(STABLE, PREPARING_REBALANCE) and group.has(member_id):
            self._schedule_heartbeat(group, group.members[member_id])
        return self._store_offsets(group, offsets)

    def _check_offset_commit(self, group: ClassicGroup, member_id: str,
                             group_instance_id: str | None, generation_id: int) -> ErrorCode:
        if group.is_in(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            return self._check_member(group, member_id, group_instance_id, generation_id)
        if not group.is_in(EMPTY):
            return E.UNKNOWN_MEMBER_ID  # a group with members takes commits from them only
        return E.NONE

    def txn_offset_commit(self, group_id: str, producer_id: int, producer_epoch: int,
                          member_id: str, group_instance_id: str | None, generation_id: int,
                          offsets: dict[TopicPartition, OffsetAndMetadata]
                          ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: the offsets are written in the producer's transaction and stay
        pending (invisible to OffsetFetch) until its marker applies or drops them. The
        member checks are KIP-447's: a member id, instance id or generation, when given,
        must be the group's current ones; without them anyone may commit (a producer that
        is not a group member)."""
        error = self._check_group_id(group_id, allow_empty=True)
        if error is not E.NONE:
            return {partition: error for partition in offsets}
        group = self.manager.get(group_id)
        if group is None:
            group = self.manager.add(ClassicGroup(group_id,
                                                  current_state_timestamp_ms=self.clock()))
        error = self._check_txn_offset_commit(group, member_id, group_instance_id, generation_id)
        if error is not E.NONE:
            return {partition: error for partition in offsets}
        return self._store_offsets(group, offsets, producer=(producer_id, producer_epoch))

    def _check_txn_offset_commit(self, group: ClassicGroup, member_id: str,
                                 group_instance_id: str | None, generation_id: int
                                 ) -> ErrorCode:
        if group.is_in(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(group_instance_id, member_id):
            return E.FENCED_INSTANCE_ID
        if member_id != UNKNOWN_MEMBER_ID and not group.has(member_id):
            return E.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        return E.NONE

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was written to ``__consumer_offsets-partition``."""
        self.manager.complete_transaction(partition, producer_id, commit)

    def has_pending_offsets(self, group_id: str,
                            partitions: list[TopicPartition] | None) -> bool:
        return self.manager.has_pending(group_id, partitions)

    def _store_offsets(self, group: ClassicGroup, offsets: dict[TopicPartition,
                                                                OffsetAndMetadata],
                       producer: tuple[int, int] | None = None
                       ) -> dict[TopicPartition, ErrorCode]:
        now_ms = self.clock()
        results: dict[TopicPartition, ErrorCode] = {}
        records = []
        for (topic, partition), offset in offsets.items():
            if len(offset.metadata) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = E.OFFSET_METADATA_TOO_LARGE
                continue
            committed = OffsetAndMetadata(offset.offset, offset.leader_epoch, offset.metadata,
                                          now_ms)
            records.append((offset_commit_key(group.group_id, topic, partition),
                            offset_commit_value(committed)))
            results[(topic, partition)] = E.NONE
        if records and producer is not None:
            error = self.manager.store_transactional(group.group_id, records, *producer,
                                                     errors=OFFSET_WRITE_ERRORS)
            if error is not E.NONE:
                results = {p: (error if code is E.NONE else code) for p, code in results.items()}
        elif records:
            error = self.manager.store(group.group_id, records, replay=True,
                                       errors=OFFSET_WRITE_ERRORS)
            if error is not E.NONE:
                results = {p: (error if code is E.NONE else code) for p, code in results.items()}
        return results

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (None: nothing committed). ``partitions=None`` means every
        partition the group has an offset for."""
        error = self._check_group_id(group_id, allow_empty=True)
        if error is not E.NONE:
            return error, {}
        group = self.manager.get(group_id)
        if group is None or group.is_in(DEAD):
            return E.NONE, {partition: None for partition in partitions or []}
        if partitions is None:
            return E.NONE, dict(group.offsets)
        return E.NONE, {partition: group.offsets.get(partition) for partition in partitions}

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                       ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete (KIP-496): allowed in an EMPTY group, and in an active consumer group
        for topics none of its members subscribes to."""
        error = self._check_group_id(group_id, allow_empty=True)
        if error is not E.NONE:
            return error, {}
        group = self.manager.get(group_id)
        if group is None or group.is_in(DEAD):
            return E.GROUP_ID_NOT_FOUND, {}
        results: dict[TopicPartition, ErrorCode] = {}
        if group.is_in(EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = [p for p in partitions if not group.is_subscribed_to(p[0])]
            results = {p: E.GROUP_SUBSCRIBED_TO_TOPIC for p in partitions if p not in eligible}
        else:
            return E.NON_EMPTY_GROUP, {}
        records = [(offset_commit_key(group_id, topic, partition), None)
                   for topic, partition in eligible if (topic, partition) in group.offsets]
        error = E.NONE
        if records:
            error = self.manager.store(group_id, records, replay=True,
                                       errors=OFFSET_WRITE_ERRORS)
        results.update({partition: error for partition in eligible})
        return E.NONE, results

    # -- administration ---------------------------------------------------------------------------

    def list_groups(self, states: set[str] | None = None,
                    types: set[str] | None = None) -> list[GroupListing]:
        """Groups, optionally only those in ``states`` / of ``types`` (case-insensitive)."""
        states = {s.lower() for s in states} if states else None
        types = {t.lower() for t in types} if types else None
        if types is not None and CLASSIC_GROUP_TYPE not in types:
            return []
        return [GroupListing(g.group_id, g.protocol_type or "", g.state.value)
                for g in self.manager.groups.values()
                if self.manager.is_coordinator_for(g.group_id)
                and (states is None or g.state.value.lower() in states)]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary | None]:
        """(error, summary); a group that does not exist is (NONE, None)."""
        error = self._check_group_id(group_id, allow_empty=True)
        if error is not E.NONE:
            return error, None
        group = self.manager.get(group_id)
        return E.NONE, (group.summary() if group is not None else None)

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """DeleteGroups: only an EMPTY group goes, with its offsets (tombstones for each
        offset and for the group; replaying the group's tombstone removes it)."""
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            error = self._check_group_id(group_id, allow_empty=True)
            group = self.manager.get(group_id) if error is E.NONE else None
            if error is not E.NONE:
                results[group_id] = error
            elif group is None or group.is_in(DEAD):
                results[group_id] = E.GROUP_ID_NOT_FOUND
            elif not group.is_in(EMPTY):
                results[group_id] = E.NON_EMPTY_GROUP
            else:
                records = [(offset_commit_key(group_id, topic, partition), None)
                           for topic, partition in group.offsets]
                records.append((group_metadata_key(group_id), None))
                results[group_id] = self.manager.store(group_id, records, replay=True,
                                                       errors=GROUP_WRITE_ERRORS)
                if results[group_id] is E.NONE:
                    log.info("group %r deleted with %d committed offsets", group_id,
                             len(records) - 1)
        return results
