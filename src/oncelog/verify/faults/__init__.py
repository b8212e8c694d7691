"""The nemesis: faults a verify run injects on its seeded schedule.

Each fault has ``inject(scheduled)`` and ``heal()``, both returning a ``detail`` dict; the
``Nemesis`` runs a ``FaultSchedule``'s timeline and logs every step as a ``FaultEvent`` in
the run's history (the checker reports them; it never needs them to judge).

| fault | inject | heal |
|---|---|---|
| ``kill-broker`` (``KillBroker``) | ``kill -9`` of the broker the run started | restart it on the same port and data |
| ``kill-consumer`` (``KillDelivery``) | ``kill -9`` of the delivery process | restart it |
| ``kill-driver`` (``KillDelivery``) | ``kill -9`` of the Spark driver (its process group) | restart it from its checkpoint |
| ``drop-acks`` (``DropAcks``) | the producers' proxy drops a ``rate`` of Produce responses | stop dropping |
| ``kill-leader`` (``KillLeader``) | ``kill -9`` of the broker leading the most partitions of the run's topic | restart it |
| ``pause-broker`` (``PauseBroker``) | ``SIGSTOP`` of a seeded broker | ``SIGCONT`` |
| ``kill-executor`` (``KillExecutor``, ``--spark-master``) | ``kill -9`` of an executor JVM of the Spark copy job, one with tasks running | none: Spark replaces it; heal watches a new executor run tasks and a batch get written |

On a cluster (``--brokers`` 2 or more) ``kill-broker`` is ``KillClusterBroker``, a seeded
broker of the cluster; the cluster faults live in ``faults.cluster``, the network partitions
of an isolated cluster (``partition-leader``, ``isolate-zookeeper``, ``split``, ``cut-link``,
``slow-net``) in ``partitions``. The others: process kills in ``kill``, ``drop-acks`` in
``network``, ``kill-executor`` in ``executor``, and the player of the schedule in
``nemesis``.

Which moment a kill lands on is the delivery stage's business (``workloads.delivery``):
the consumer kills itself in its weakest window; the copy job is killed just after a batch
was written and before Spark recorded it.
"""

from .cluster import ClusterTarget, KillClusterBroker, KillLeader, PauseBroker
from .executor import KillExecutor
from .kill import KillBroker, KillDelivery
from .nemesis import Fault, Nemesis
from .network import DropAcks

__all__ = ["ClusterTarget", "DropAcks", "Fault", "KillBroker", "KillClusterBroker",
           "KillDelivery", "KillExecutor", "KillLeader", "Nemesis", "PauseBroker"]
