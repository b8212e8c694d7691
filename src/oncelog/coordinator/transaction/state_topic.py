"""``__transaction_state`` on this broker: where the transaction coordinator keeps its
records (an ``InternalTopic``).

Created, when missing, with ``transaction.state.log.num.partitions`` partitions,
``transaction.state.log.replication.factor`` replicas (at most the live brokers),
``min.insync.replicas`` from ``transaction.state.log.min.isr`` (at most the replicas),
``cleanup.policy=compact`` and ``segment.bytes=transaction.state.log.segment.bytes`` - on a
single broker at start-up, in a cluster on the first FindCoordinator for a transaction key,
as Kafka does. An existing topic keeps its partition count whatever the config says now:
moving transactional ids between partitions would lose them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...partition import PartitionManager
from ..internal_topic import InternalTopic
from .records import TRANSACTION_STATE_TOPIC

if TYPE_CHECKING:
    from ...config import BrokerConfig


class TransactionStateTopic(InternalTopic):
    def __init__(self, partitions: PartitionManager, clock: Callable[[], int]) -> None:
        super().__init__(partitions, clock, TRANSACTION_STATE_TOPIC)

    async def create_if_missing(self, config: BrokerConfig, live_brokers: int = 1) -> None:
        replicas = max(1, min(config["transaction.state.log.replication.factor"], live_brokers))
        await self._create(config["transaction.state.log.num.partitions"], replicas, live_brokers, {
            "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
            "min.insync.replicas": str(min(config["transaction.state.log.min.isr"], replicas)),
        })
