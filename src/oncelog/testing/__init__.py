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
- ``apache_kafka()`` / ``ApacheKafka`` (``oncelog.testing.apache_kafka``): a real Apache
  Kafka (KRaft, one node or N), from jars Maven fetches once, behind the same wire proxy;
  ``python -m oncelog.testing.fetch_apache_kafka`` fetches them ahead (``make setup`` does).
- ``cluster()``: ZooKeeper (one, or an ensemble) and N brokers (``oncelog.testing.cluster``).
- ``CertificateAuthority`` (``oncelog.testing.certificates``): a throwaway authority and the
  PEM files Kafka's ``ssl.*`` settings name, for tests of TLS listeners.
- ``local_spark_session()`` and ``SparkDriver`` (``oncelog.testing.spark``): a local
  SparkSession with the ``oncelog`` source, and a streaming job run as a process group.
- The pytest plugin (``oncelog.testing.plugin``, registered as ``oncelog`` through the
  ``pytest11`` entry point) gives the same as fixtures: ``oncelog_broker``,
  ``oncelog_topic``, ``oncelog_group``, ``oncelog_cluster``, ``oncelog_spark``,
  ``oncelog_apache_kafka`` and ``oncelog_any_broker`` (each test once per broker).

docs/testing.md has recipes.
"""

import importlib

# The pytest plugin lives in this package and is loaded by every pytest run where oncelog is
# installed, so importing the package must cost next to nothing: ``broker`` and ``cluster``
# and ``apache_kafka`` are light (the proxy, codecs and clients are imported when something
# starts) and bound here, so the functions - not the modules of the same name - are what the
# package exports (a submodule imported later would otherwise take the name);
# the other names are imported on first use (PEP 562).
from .apache_kafka import ApacheKafka, KafkaUnavailable, apache_kafka
from .broker import Broker, broker
from .cluster import Cluster, ClusterUnavailable, cluster

_EXPORTS = {
    "DeliveryError": "assertions", "assert_delivered": "assertions", "read_all": "assertions",
    "read_table": "assertions",
    "UnknownName": "wire", "WireFault": "wire", "WireFaults": "wire", "WireProxy": "wire",
    "proxy": "wire",
}

__all__ = ["ApacheKafka", "Broker", "Cluster", "ClusterUnavailable", "KafkaUnavailable",
           "apache_kafka", "broker", "cluster", *sorted(_EXPORTS)]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'oncelog.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
