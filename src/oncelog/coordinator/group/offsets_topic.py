"""``__consumer_offsets`` on this broker: the ``OffsetsLog`` the group coordinator writes to
(an ``InternalTopic``).

Created when the broker starts if missing, with ``offsets.topic.num.partitions`` partitions
(Kafka creates it on the first FindCoordinator; creating it up front means a coordinator is
there from the first request), ``cleanup.policy=compact`` and
``segment.bytes=offsets.topic.segment.bytes``. An existing topic keeps its partition count,
whatever the config says now: moving groups between partitions would lose them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...partition import PartitionManager
from ...protocol.errors import ErrorCode, KafkaError
from ..internal_topic import InternalTopic

if TYPE_CHECKING:
    from ...config import BrokerConfig
    from .coordinator import GroupCoordinator

OFFSETS_TOPIC = "__consumer_offsets"


class OffsetsTopic(InternalTopic):
    def __init__(self, partitions: PartitionManager, clock: Callable[[], int]) -> None:
        super().__init__(partitions, clock, OFFSETS_TOPIC)

    async def create_if_missing(self, config: BrokerConfig, live_brokers: int = 1) -> None:
        """Create the topic with ``offsets.topic.replication.factor`` replicas, or as many
        as there are live brokers if fewer (a single broker: one)."""
        await self._create(config["offsets.topic.num.partitions"],
                     config["offsets.topic.replication.factor"], live_brokers,
                     {"segment.bytes": str(config["offsets.topic.segment.bytes"])})

    async def wait_for_group_replication(self, coordinator: GroupCoordinator, group_id: str,
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
