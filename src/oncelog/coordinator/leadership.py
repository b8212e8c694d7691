"""In a cluster, each coordinator serves the partitions of its topic this broker leads.

After every change of this broker's metadata (``membership`` calls ``follow``),
the group coordinator loads the ``__consumer_offsets`` partitions this broker now leads and
unloads the ones it stopped leading, and the transaction coordinator does the same with
``__transaction_state`` (Kafka's ``onLeadershipChange`` / ``onResignation``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..partition import PartitionManager
from .group import GroupCoordinator
from .group.offsets_topic import OFFSETS_TOPIC
from .transaction.coordinator import TransactionCoordinator
from .transaction.records import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)


class CoordinatorLeadership:
    def __init__(self, node_id: int, partitions: PartitionManager, groups: GroupCoordinator,
                 transactions: TransactionCoordinator) -> None:
        self.node_id = node_id
        self.partitions = partitions
        self.groups = groups
        self.transactions = transactions

    def follow(self) -> None:
        groups = self.groups
        topic = self.partitions.topics.get(OFFSETS_TOPIC)
        if topic is not None and not groups.manager.partition_count:
            groups.manager.partition_count = topic.partition_count
        self._follow(OFFSETS_TOPIC, "group", groups.manager.owned_partitions,
                     groups.load_partition, groups.unload_partition)
        transactions = self.transactions
        self._follow(TRANSACTION_STATE_TOPIC, "transaction", transactions.owned_partitions,
                     transactions.load_partition, transactions.unload_partition)

    def _follow(self, name: str, kind: str, owned: set[int], load: Callable[[int], None],
                unload: Callable[[int], None]) -> None:
        topic = self.partitions.topics.get(name)
        if topic is None:
            return
        for index, partition in topic.local.items():
            if partition.is_leader and index not in owned:
                load(index)
                log.info("broker %d: now %s coordinator for %s-%d", self.node_id, kind, name,
                         index)
            elif not partition.is_leader and index in owned:
                unload(index)
                log.info("broker %d: no longer %s coordinator for %s-%d", self.node_id, kind,
                         name, index)
