"""oncelog in your own tests: a real broker, fault controls and delivery assertions.

    from oncelog.testing import broker

    with broker() as b:                       # a real broker process, ~1 s to start
        topic = b.topic("orders", partitions=3)
        b.fail_next("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
        run_my_producer(b.bootstrap, topic)   # sees the error twice, then succeeds
        b.kill(); b.restart()                 # kill -9, then back on the same port

- ``broker()`` / ``Broker``: a broker process and the ``WireProxy`` in front of it
  (``oncelog.testing.broker``); ``proxy(bootstrap)``: the same wire faults in front of any
  Kafka-compatible broker (``oncelog.testing.wire``).
- ``read_all`` and ``assert_delivered`` (``oncelog.testing.assertions``): the verifier's
  checker on a topic's contents, with its lost / duplicated / reordered report.
- ``cluster()``: ZooKeeper and N brokers (``oncelog.testing.cluster``).
- The pytest plugin (``oncelog.testing.plugin``, registered as ``oncelog`` through the
  ``pytest11`` entry point) gives the same as fixtures: ``oncelog_broker``,
  ``oncelog_topic``, ``oncelog_group``, ``oncelog_cluster``, ``oncelog_spark``.

docs/testing.md has recipes.
"""

from .assertions import DeliveryError, assert_delivered, read_all
from .broker import Broker, broker
from .cluster import Cluster, ClusterUnavailable, cluster
from .wire import UnknownName, WireFault, WireFaults, WireProxy, proxy

__all__ = ["Broker", "Cluster", "ClusterUnavailable", "DeliveryError", "UnknownName", "WireFault", "WireFaults", "WireProxy",
           "assert_delivered", "broker", "cluster", "proxy", "read_all"]
