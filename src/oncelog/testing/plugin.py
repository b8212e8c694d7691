"""The pytest plugin: oncelog's test kit as fixtures.

Registered through the ``pytest11`` entry point under the name ``oncelog``, so installing
oncelog is enough (``-p no:oncelog`` turns it off; with plugin autoloading disabled, load it
with ``-p oncelog.testing.plugin``). Importing it starts nothing: a broker starts the first
time a test asks for one.

Fixtures:

- ``oncelog_broker`` — a ``Broker`` (``oncelog.testing.broker``): one real broker process
  for the whole session, behind a fault proxy. After each test its wire faults are
  cleared, a paused broker resumed and a killed one restarted, so faults never leak into
  the next test.
  ``@pytest.mark.oncelog_broker(security="SASL_SSL")`` (``"SSL"``, ``"SASL_PLAINTEXT"``)
  gives the test the session's broker with that listener instead (one per protocol, started
  when first asked for): a CA of its own (``ca_file``), a SCRAM user (``username``,
  ``password``), ``client_config()`` for confluent-kafka, ``kafka_python_config()`` for
  kafka-python, ``command_config`` for the ``oncelog`` commands.
- ``oncelog_topic`` — a factory: ``oncelog_topic("orders", partitions=3)`` creates a topic
  with a unique name on ``oncelog_broker`` and returns the name.
- ``oncelog_group`` — a factory of unique consumer-group ids.
- ``oncelog_cluster`` — a ``Cluster`` (ZooKeeper and 3 brokers) for the test; fails with
  one line saying what to install when Java or ZooKeeper is missing. The
  ``oncelog_cluster`` marker shapes it with ``cluster()``'s arguments:
  ``@pytest.mark.oncelog_cluster(brokers=3, zookeepers=3, isolated=True, settings={...})``
  (``isolated=True``: every node in a network namespace of its own, for ``isolate``,
  ``split``, ``cut``, ``slow`` and ``heal``; root on Linux with ``ip`` and ``nft``).
- ``oncelog_spark`` — a local SparkSession (session-scoped) with the ``oncelog`` source.
- ``oncelog_apache_kafka`` — an ``ApacheKafka`` (``oncelog.testing.apache_kafka``): one real
  single-node Apache Kafka for the session, behind a fault proxy, reset after each test as
  ``oncelog_broker`` is; fails with one line when Java or Maven is missing.
- ``oncelog_any_broker`` — the same test once per broker: parametrised by
  ``oncelog_broker_kind`` (``"oncelog"``, ``"apache-kafka"``), it is ``oncelog_broker`` or
  ``oncelog_apache_kafka``. Both have ``bootstrap``, ``topic()``, ``group()``, ``read_all()``
  and the wire faults. As with anyio's ``anyio_backend``, a project chooses the brokers by
  overriding ``oncelog_broker_kind`` in its conftest.py with other ``params``.

Every process is stopped by pid in the fixture's finalizer, whatever the test did, and at
interpreter exit (``atexit``) if a run is interrupted before its finalizers.
"""

from __future__ import annotations

import pytest

# Nothing of the kit is imported here but inside the fixtures: this module is loaded by every
# pytest run in an environment where oncelog is installed.


@pytest.fixture(scope="session")
def oncelog_broker_session(tmp_path_factory):
    """The session's broker; tests use ``oncelog_broker``, which also resets it after them."""
    from .broker import Broker
    started = Broker(tmp_path_factory.mktemp("oncelog-broker")).start()
    try:
        yield started
    finally:
        started.close()


@pytest.fixture(scope="session")
def oncelog_secured_brokers(tmp_path_factory):
    """The session's secured brokers, one per security protocol a test's
    ``oncelog_broker`` marker asks for, started the first time one is asked for."""
    from .broker import Broker
    started = {}  # protocol -> its Broker

    def get(security: str) -> Broker:
        key = security.upper()
        if key not in started:
            broker = Broker(tmp_path_factory.mktemp(f"oncelog-broker-{key.lower()}"),
                            security=key)
            started[key] = broker.start()
        return started[key]

    try:
        yield get
    finally:
        for broker in started.values():
            broker.close()


@pytest.fixture
def oncelog_broker(request):
    """The session's broker; ``@pytest.mark.oncelog_broker(security="SASL_SSL")`` (or
    ``"SSL"``, ``"SASL_PLAINTEXT"``) makes it the session's broker with that listener."""
    marker = request.node.get_closest_marker("oncelog_broker")
    try:
        security = _broker_shape(*marker.args, **marker.kwargs) if marker else None
    except (TypeError, ValueError) as error:
        pytest.fail(f"@pytest.mark.oncelog_broker: {error}", pytrace=False)
    if security is None:
        broker = request.getfixturevalue("oncelog_broker_session")
    else:
        broker = request.getfixturevalue("oncelog_secured_brokers")(security)
    broker.reset()  # a previous test may have left it killed
    yield broker
    broker.reset()


def _broker_shape(security: str | None = None) -> str | None:
    from .broker import SECURITY_PROTOCOLS
    if security is None or security.upper() == "PLAINTEXT":
        return None
    if security.upper() not in SECURITY_PROTOCOLS:
        raise ValueError(f"security must be one of PLAINTEXT, {', '.join(SECURITY_PROTOCOLS)}, "
                         f"not {security!r}")
    return security


@pytest.fixture
def oncelog_topic(oncelog_broker, request):
    """``oncelog_topic(prefix=<test name>, partitions=1, config=None) -> name``."""
    default_prefix = _safe(request.node.name)

    def create(prefix: str | None = None, partitions: int = 1,
               config: dict[str, str] | None = None) -> str:
        return oncelog_broker.topic(prefix or default_prefix, partitions, config)

    return create


@pytest.fixture
def oncelog_group(request):
    """``oncelog_group(prefix=<test name>) -> a unique consumer group id``."""
    from .broker import unique_name
    default_prefix = _safe(request.node.name)
    return lambda prefix=None: unique_name(prefix or default_prefix)


CLUSTER_MARKER = ("oncelog_cluster(brokers=3, zookeepers=1, isolated=False, settings=None): "
                  "the shape of the test's oncelog_cluster fixture, as cluster() takes it")


BROKER_MARKER = ("oncelog_broker(security=None): the test's oncelog_broker listens with this "
                 "security protocol (SSL, SASL_SSL, SASL_PLAINTEXT); its client_config() "
                 "connects")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", CLUSTER_MARKER)
    config.addinivalue_line("markers", BROKER_MARKER)


def _cluster_shape(brokers: int = 3, zookeepers: int = 1, isolated: bool = False,
                   settings: dict[str, str] | None = None) -> dict:
    return {"brokers": brokers, "zookeepers": zookeepers, "isolated": isolated,
            "settings": settings}


@pytest.fixture
def oncelog_cluster(request, tmp_path_factory):
    """ZooKeeper and brokers for this test, 3 by default, shaped by the ``oncelog_cluster``
    marker (a cluster takes seconds to start, and its faults - killed brokers, elections,
    partitions - are hard to undo, so it is not shared)."""
    from .cluster import Cluster, ClusterUnavailable
    marker = request.node.get_closest_marker("oncelog_cluster")
    try:
        shape = _cluster_shape(*marker.args, **marker.kwargs) if marker else _cluster_shape()
    except TypeError as error:
        pytest.fail(f"@pytest.mark.oncelog_cluster: {error}", pytrace=False)
    started = Cluster(tmp_path_factory.mktemp("oncelog-cluster"), shape.pop("brokers"),
                      **shape)
    try:
        try:
            started.start()
        except ClusterUnavailable as error:
            pytest.fail(str(error), pytrace=False)
        yield started
    finally:
        started.close()


@pytest.fixture(scope="session")
def oncelog_apache_kafka_session(tmp_path_factory):
    """The session's Apache Kafka; tests use ``oncelog_apache_kafka``, which resets it."""
    from .apache_kafka import ApacheKafka, KafkaUnavailable
    started = ApacheKafka(tmp_path_factory.mktemp("oncelog-apache-kafka"))
    try:
        try:
            started.start()
        except KafkaUnavailable as error:
            pytest.fail(str(error), pytrace=False)
        yield started
    finally:
        started.close()


@pytest.fixture
def oncelog_apache_kafka(oncelog_apache_kafka_session):
    oncelog_apache_kafka_session.reset()
    yield oncelog_apache_kafka_session
    oncelog_apache_kafka_session.reset()


BROKER_KINDS = {"oncelog": "oncelog_broker", "apache-kafka": "oncelog_apache_kafka"}


@pytest.fixture(params=list(BROKER_KINDS))
def oncelog_broker_kind(request):
    """Which broker ``oncelog_any_broker`` is: override it (``params=["oncelog"]``) to choose."""
    return request.param


@pytest.fixture
def oncelog_any_broker(oncelog_broker_kind, request):
    """``oncelog_broker`` or ``oncelog_apache_kafka``, as ``oncelog_broker_kind`` says."""
    fixture = BROKER_KINDS.get(oncelog_broker_kind)
    if fixture is None:
        pytest.fail(f"oncelog_broker_kind is {oncelog_broker_kind!r}; it must be one of "
                    f"{', '.join(map(repr, BROKER_KINDS))}", pytrace=False)
    return request.getfixturevalue(fixture)


@pytest.fixture(scope="session")
def oncelog_spark():
    from .spark import SparkUnavailable, local_spark_session
    try:
        session = local_spark_session()
    except SparkUnavailable as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield session
    finally:
        session.stop()


def _safe(name: str) -> str:
    """A test name as a topic-name prefix: Kafka allows [a-zA-Z0-9._-], at most 249 chars."""
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in name)
    return cleaned.strip("-")[:80] or "test"
