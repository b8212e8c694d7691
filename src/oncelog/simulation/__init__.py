"""The cluster under one seed: N brokers' real control-plane and replication code in one
process, on one virtual clock, over an in-memory ZooKeeper and a simulated network, driven by
one seed (issue 30; FoundationDB's simulator, Kafka's ``RaftEventSimulationTest``).
``python -m oncelog.simulation --seed N -v`` replays a seed.

- ``loop`` — ``SimulatedLoop``, an asyncio event loop on virtual time: timers cost no
  wall-clock time and every run of the same code makes the same calls in the same order.
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
- ``zookeeper_store`` — oncelog's ``ZooKeeperMetadataStore`` on a simulated broker, with
  pings, notifications, cut links and expired sessions when the simulation says.
- ``cluster`` — ``Simulation``: the brokers (``PartitionManager``, ``ClusterMembership``,
  ``ReplicaFetcher`` and the request handlers, as the broker wires them), the network, the
  schedule of client requests and faults drawn from the seed.
- ``invariants`` — what must hold after every step and at the end.
- ``__main__`` — ``python -m oncelog.simulation``: a range of seeds, or one replayed.

``tests/cluster/test_memory_zookeeper_differential.py`` replays the same random operations on a
real ZooKeeper 3.8 and on ``MemoryZooKeeper`` and fails on any difference;
``tests/simulation/test_seeds.py`` runs thousands of seeds.
"""

from .java_hash_set import JavaHashSet
from .kazoo_client import MemoryKazooClient, SimulatedHandler
from .zookeeper import MemoryZooKeeper

__all__ = ["MemoryZooKeeper", "MemoryKazooClient", "SimulatedHandler", "JavaHashSet"]
