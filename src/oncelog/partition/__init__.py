"""Partition replicas: one replica's state and rules (``Partition``), the topics that hold
them (``PartitionManager``), and the group-commit ``Flusher``."""

from .flusher import Flusher
from .manager import PartitionManager, Topic
from .partition import (AppendOrigin, IsolationLevel, LeadershipLease, Partition,
                        TopicSettings)

__all__ = ["AppendOrigin", "Flusher", "IsolationLevel", "LeadershipLease", "Partition",
           "PartitionManager", "Topic", "TopicSettings"]
