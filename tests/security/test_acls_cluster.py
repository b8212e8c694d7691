"""ACLs on a cluster: kept in ZooKeeper (Kafka's ``/kafka-acl`` layout), changed by ``oncelog
acls --zookeeper`` and by an AdminClient on any broker, and applied by every broker. The
topic's two partitions are led by different brokers, so a producer that may write reaches both
and one that may not is refused by both."""

from __future__ import annotations

import subprocess
import sys
import time

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from oncelog.broker.process import free_port
from tests.cluster.helpers import FAST

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}


def _oncelog(*args: str, password: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oncelog", *args],
                          input=password and password + "\n", capture_output=True, text=True,
                          timeout=60)


def _config(bootstrap: str, user: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": PASSWORDS[user]}


def _delivery_codes(config: dict) -> list[int]:
    """One record to each partition of ``orders``: each delivery's error code (0: acked)."""
    producer = Producer({**config, "message.timeout.ms": 8000, "retries": 0})
    codes: dict[int, int] = {}
    for partition in (0, 1):
        producer.produce("orders", b"v", partition=partition, on_delivery=lambda error, m,
                         p=partition: codes.__setitem__(p, error.code() if error else 0))
    producer.flush(15)
    return [codes.get(0, -1), codes.get(1, -1)]


def _until(predicate, what: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def test_acls_changed_anywhere_apply_on_every_broker(broker_factory, zookeeper_connect):
    for user, password in PASSWORDS.items():
        added = _oncelog("users", "add", user, "--zookeeper", zookeeper_connect,
                         password=password)
        assert added.returncode == 0, added.stderr
    sasl = []
    for node_id in (1, 2):
        port, sasl_port = free_port(), free_port()
        broker_factory(port=port, name=f"b{node_id}", settings={
            **FAST, "zookeeper.connect": zookeeper_connect, "node.id": str(node_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            # the brokers reach each other over PLAINTEXT, as User:ANONYMOUS
            "super.users": "User:admin;User:ANONYMOUS"})
        sasl.append(f"127.0.0.1:{sasl_port}")
    bootstrap = ",".join(sasl)
    admin = AdminClient(_config(sasl[0], "admin"))
    admin.create_topics([NewTopic("orders", 2, replica_assignment=[[1], [2]])])["orders"].result(15)
    alice = _config(bootstrap, "alice")
    denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _delivery_codes(alice) == [denied, denied]

    add = _oncelog("acls", "add", "--allow-principal", "User:alice", "--producer", "--topic",
                   "orders", "--zookeeper", zookeeper_connect)
    assert add.returncode == 0, add.stderr
    assert "Topic\torders\tliteral\tUser:alice\t*\tWrite\tAllow" in add.stdout
    _until(lambda: _delivery_codes(alice) == [0, 0], "both brokers applying the new ACL")
    listed = _oncelog("acls", "list", "--topic", "orders", "--zookeeper", zookeeper_connect)
    assert listed.returncode == 0 and listed.stdout.count("User:alice") == 3, listed

    # a DENY made through broker 2's AdminClient: broker 1 applies it too
    deny = AclBinding(ResourceType.TOPIC, "ord", ResourcePatternType.PREFIXED, "User:alice",
                      "*", AclOperation.WRITE, AclPermissionType.DENY)
    second = AdminClient(_config(sasl[1], "admin"))  # alive until its future is done
    second.create_acls([deny])[deny].result(15)
    _until(lambda: _delivery_codes(alice) == [denied, denied], "both brokers applying the DENY")

    removed = _oncelog("acls", "remove", "--deny-principal", "User:alice", "--operation",
                       "write", "--topic", "ord", "--resource-pattern-type", "prefixed",
                       "--zookeeper", zookeeper_connect)
    assert removed.returncode == 0, removed.stderr
    _until(lambda: _delivery_codes(alice) == [0, 0], "both brokers dropping the DENY")
    again = _oncelog("acls", "remove", "--deny-principal", "User:alice", "--operation",
                     "write", "--topic", "ord", "--zookeeper", zookeeper_connect)
    assert again.returncode == 1 and again.stderr.strip() == "oncelog: no such ACL"


def test_acls_written_by_one_store_are_read_and_announced_to_another(zookeeper_connect):
    """The stores themselves: Kafka's layout, a name with "/" (a group may have one) kept
    under a %-quoted node, the change announced to the other store's watch."""
    from oncelog.controller.store import MetadataChange
    from oncelog.controller.zookeeper_store import ZooKeeperMetadataStore
    from oncelog.security.acl import (AclBinding, AclEntry, AclOperation, AclPermission,
                                      PatternType, ResourcePattern, ResourceType)
    writer = ZooKeeperMetadataStore(zookeeper_connect, session_timeout_ms=2000).connect()
    reader = ZooKeeperMetadataStore(zookeeper_connect, session_timeout_ms=2000).connect()
    try:
        events: list = []
        reader.watch(events.append)
        reader.watch_acls()
        pattern = ResourcePattern(ResourceType.GROUP, "team/app", PatternType.PREFIXED)
        entry = AclEntry("User:alice", "*", AclOperation.READ, AclPermission.ALLOW)
        writer.update_acls(pattern, lambda current: current | {entry})
        _until(lambda: any(e.change is MetadataChange.ACLS for e in events), "the ACLS event")
        assert AclBinding(pattern, entry) in reader.acls()
        assert writer.client.exists("/kafka-acl-extended/prefixed/Group/team%2Fapp")
        events.clear()
        writer.update_acls(pattern, lambda current: current - {entry})
        _until(lambda: any(e.change is MetadataChange.ACLS for e in events), "the ACLS event")
        assert AclBinding(pattern, entry) not in reader.acls()
    finally:
        writer.close()
        reader.close()
