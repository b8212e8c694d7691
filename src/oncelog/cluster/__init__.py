"""Running a cluster on one machine: a real ZooKeeper (or an ensemble) and N brokers on loopback.

- ``zookeeper_process`` — ``ZooKeeperProcess``: a real Apache ZooKeeper as a child process,
  standalone or one node of an ensemble.
- ``zookeeper_ensemble`` — ``ZooKeeperEnsemble``: N such nodes (odd N) forming a quorum.
- ``local`` — ``LocalCluster``: ZooKeeper (one node or an ensemble) and N broker processes,
  each with its own data directory (``oncelog cluster start``, the cluster tests, ``oncelog
  verify --brokers``, the benchmarks), with kill/pause/resume/restart of one broker for
  fault injection.
- ``control`` — ``cluster.json`` and the request files that ``oncelog cluster start``
  leaves in its data directory, so ``cluster restart-broker N`` and a second ``cluster
  start`` on the folder can find and talk to the running cluster.
- ``isolation`` — ``IsolatedNetwork``: nodes in network namespaces on one bridge, and
  Jepsen's faults (isolate, split, cut, cut_from, slow) applied and healed on command, for
  tests under real network partitions (issue 31); ``delay_relay`` delays TCP for ``slow``.
- ``secure`` — ``oncelog cluster start --secure``'s files: a certificate authority, the
  brokers' certificate, SCRAM users (``admin``, ``broker``) and the client properties, for a
  cluster on SASL_SSL only (brokers authenticating to each other too).
- ``acks_table`` — ``oncelog cluster acks-table``: what each producer and broker setting
  keeps when leaders die, measured on a 3-broker cluster.
"""

from .zookeeper_ensemble import ZooKeeperEnsemble
from .zookeeper_process import (ZooKeeperNotInstalled, ZooKeeperProcess, ZooKeeperStartError,
                                four_letter_word)

__all__ = ["ZooKeeperEnsemble", "ZooKeeperNotInstalled", "ZooKeeperProcess",
           "ZooKeeperStartError", "four_letter_word"]
