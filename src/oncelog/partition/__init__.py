"""Partition replicas and the rules of produce and fetch.

- ``partition`` — ``Partition``: one replica's log, offsets (LEO, HW, LSO), leader epoch,
  role and ISR, and its produce/fetch rules; ``AppendOrigin``, ``IsolationLevel``, the
  ``LeadershipLease`` a cluster broker holds.
- ``producer_state`` — idempotence and transactions per producer id (Kafka's
  ``ProducerStateManager``): epochs, the last five batches' sequences, open transactions.
- ``replicas`` — what a leader knows of its replicas: the ISR as ``CommittedIsr`` /
  ``PendingExpand`` / ``PendingShrink``, and each follower's progress.
- ``manager`` — ``PartitionManager``: the topics this broker knows and the replicas it
  hosts (Kafka's ``ReplicaManager`` and metadata cache).
- ``flusher`` — the group-commit ``Flusher`` (``log.flush.policy=ack``).
"""

from .flusher import Flusher
from .manager import PartitionManager, Topic
from .partition import (AppendOrigin, IsolationLevel, LeadershipLease, Partition,
                        TopicSettings)

__all__ = ["AppendOrigin", "Flusher", "IsolationLevel", "LeadershipLease", "Partition",
           "PartitionManager", "Topic", "TopicSettings"]
