"""The cluster under one seed: pieces of the world, in memory, for deterministic simulations
of N brokers' real control-plane code on one injected clock (issue 30; FoundationDB's
simulator, Kafka's ``RaftEventSimulationTest``).

- ``zookeeper`` — ``MemoryZooKeeper``: one ZooKeeper 3.8 ensemble's state (znodes and their
  stats, zxids, sessions that expire, ephemeral nodes, one-shot watches, multi-op transactions),
  single-threaded, no I/O, no wall clock; watch events wait in per-session outboxes until the
  simulation delivers them.
- ``kazoo_client`` — ``MemoryKazooClient``: kazoo's own ``KazooClient`` with its connection
  replaced by a ``MemoryZooKeeper``, so code written against kazoo (``ZooKeeperMetadataStore``,
  kazoo's ``DataWatch``/``ChildrenWatch``) runs on it unchanged; callbacks run only when the
  simulation calls ``deliver_events()``.
- ``java_hash_set`` — ``JavaHashSet``: Java's HashSet iteration order, in which ZooKeeper lists
  children and deletes an ended session's ephemerals.

``tests/cluster/test_memory_zookeeper_differential.py`` replays the same random operations on a
real ZooKeeper 3.8 and on ``MemoryZooKeeper`` and fails on any difference.
"""

from .kazoo_client import MemoryKazooClient, SimulatedHandler
from .java_hash_set import JavaHashSet
from .zookeeper import MemoryZooKeeper

__all__ = ["MemoryZooKeeper", "MemoryKazooClient", "SimulatedHandler", "JavaHashSet"]
