"""ACLs (``authorizer.class.name``) observed through real clients: CreateAcls, DescribeAcls and
DeleteAcls through confluent-kafka's AdminClient; what each API needs, allowed and denied
(produce WRITE, consume READ on the topic and the group, a transactional producer without
WRITE on its transactional id, Metadata listing only what the principal may describe,
CreateTopics/DeleteTopics, DescribeConfigs); KIP-430's authorized operations with and without
an authorizer; ACLs kept across a restart.

The broker has one SASL_PLAINTEXT listener (users made by ``oncelog users add``): ``admin`` is
the super user, alice and bob are not.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer, TopicCollection,
                             TopicPartition)
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient, ConfigResource, NewTopic,
                                   ResourcePatternType, ResourceType)

from oncelog.broker.process import free_port

from .conftest import add_user

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture
def acl_broker(broker_factory, tmp_path):
    """A broker with ACLs on, super user ``admin``; users admin, alice, bob (SCRAM-SHA-256)."""
    data_dir = tmp_path / "acl" / "data"
    for user, password in PASSWORDS.items():
        add_user(data_dir, user, "SCRAM-SHA-256", password)
    port = free_port()
    settings = {"listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "authorizer.class.name": AUTHORIZER, "super.users": "User:admin"}
    return broker_factory(port=port, name="acl", settings=settings)


def _config(broker, user: str, **extra) -> dict:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
            "sasl.password": PASSWORDS[user], **extra}


def _allow(admin: AdminClient, user: str, operation: AclOperation,
           resource: ResourceType, name: str,
           pattern: ResourcePatternType = ResourcePatternType.LITERAL,
           permission: AclPermissionType = AclPermissionType.ALLOW) -> None:
    binding = AclBinding(resource, name, pattern, f"User:{user}", "*", operation, permission)
    admin.create_acls([binding])[binding].result(timeout=15)


def _create_topic(admin: AdminClient, name: str) -> None:
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=15)


def _produce_error(config: dict, topic: str, **extra) -> KafkaError | None:
    """Produce one record; the delivery error (None: acknowledged)."""
    producer = Producer({**config, "message.timeout.ms": 8000, **extra})
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda error, _m: errors.append(error))
    producer.flush(15)
    assert errors, "no delivery report"
    return errors[0]


def test_acls_are_created_listed_and_deleted_through_the_admin_client(acl_broker):
    admin = AdminClient(_config(acl_broker, "admin"))
    read = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice",
                      "*", AclOperation.READ, AclPermissionType.ALLOW)
    prefixed = AclBinding(ResourceType.GROUP, "app-", ResourcePatternType.PREFIXED,
                          "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    deny = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:bob",
                      "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY)
    # the CLUSTER resource (BROKER in librdkafka's names) is only ever named kafka-cluster
    wrong_cluster = AclBinding(ResourceType.BROKER, "my-cluster", ResourcePatternType.LITERAL,
                               "User:alice", "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    results = admin.create_acls([read, prefixed, deny, wrong_cluster])
    for binding in (read, prefixed, deny):
        assert results[binding].result(timeout=15) is None
    with pytest.raises(KafkaException) as refused:
        results[wrong_cluster].result(timeout=15)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST

    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert set(admin.describe_acls(every).result(timeout=15)) == {read, prefixed, deny}
    # MATCH: every pattern that applies to the group "app-billing"
    matching = AclBindingFilter(ResourceType.GROUP, "app-billing", ResourcePatternType.MATCH,
                                None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(matching).result(timeout=15) == [prefixed]

    # kept across a restart (the data directory's acls.json)
    acl_broker.restart()
    admin = AdminClient(_config(acl_broker, "admin"))
    assert set(admin.describe_acls(every).result(timeout=15)) == {read, prefixed, deny}

    bobs = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
                            AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([bobs])[bobs].result(timeout=15)
    assert deleted == [deny]
    assert set(admin.describe_acls(every).result(timeout=15)) == {read, prefixed}

    # ACLs are the cluster's to change: alice may not (ALTER/DESCRIBE on the cluster)
    alice = AdminClient(_config(acl_broker, "alice"))
    with pytest.raises(KafkaException) as denied:
        alice.create_acls([deny])[deny].result(timeout=15)
    assert denied.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # (librdkafka drops DescribeAcls' top-level error: kafka-python's client reports it)
    from kafka.admin import ACLFilter, ACLResourcePatternType, KafkaAdminClient
    from kafka.admin import ResourcePatternFilter
    from kafka.admin import ACLOperation as Operation
    from kafka.admin import ACLPermissionType as Permission
    from kafka.admin import ResourceType as Type
    from kafka.errors import ClusterAuthorizationFailedError
    client = KafkaAdminClient(bootstrap_servers=acl_broker.bootstrap,
                              security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                              sasl_plain_password=PASSWORDS["alice"])
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            client.describe_acls(ACLFilter(None, None, Operation.ANY, Permission.ANY,
                                           ResourcePatternFilter(Type.ANY, None,
                                                                 ACLResourcePatternType.ANY)))
    finally:
        client.close()


def test_produce_and_consume_need_write_read_and_the_group(acl_broker):
    admin = AdminClient(_config(acl_broker, "admin"))
    _create_topic(admin, "orders")
    _create_topic(admin, "secret")
    alice = _config(acl_broker, "alice")

    # nothing allowed yet: alice sees no topic, may not write
    listed = AdminClient(alice).list_topics(timeout=10)
    assert "orders" not in listed.topics and "secret" not in listed.topics
    assert _produce_error(alice, "orders").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    _allow(admin, "alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    assert _produce_error(alice, "orders") is None
    assert _produce_error(alice, "orders", **{"enable.idempotence": True}) is None
    # WRITE implies DESCRIBE: now alice sees orders, still not secret
    listed = AdminClient(alice).list_topics(timeout=10)
    assert "orders" in listed.topics and "secret" not in listed.topics

    # READ on the topic is not enough to consume in a group: the group needs READ too
    _allow(admin, "alice", AclOperation.READ, ResourceType.TOPIC, "orders")
    consumer = Consumer({**alice, "group.id": "billing", "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    error = _first_error(consumer)
    consumer.close()
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    _allow(admin, "alice", AclOperation.READ, ResourceType.GROUP, "bill",
           ResourcePatternType.PREFIXED)
    consumer = Consumer({**alice, "group.id": "billing", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    values = _consume(consumer, 2)
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition("orders", 0)], timeout=10)
    consumer.close()
    assert values == [b"v", b"v"] and committed[0].offset == 2

    # a DENY wins over every ALLOW: READ denied on orders, alice no longer reads it
    _allow(admin, "alice", AclOperation.READ, ResourceType.TOPIC, "ord",
           ResourcePatternType.PREFIXED, AclPermissionType.DENY)
    consumer = Consumer({**alice, "group.id": "billing-2", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("orders", 0, 0)])
    error = _first_error(consumer)
    consumer.close()
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # bob has nothing: every request he makes about a topic is refused
    bob = AdminClient(_config(acl_broker, "bob"))
    with pytest.raises(KafkaException) as refused:
        bob.create_topics([NewTopic("bobs", 1, 1)])["bobs"].result(timeout=15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as refused:
        bob.delete_topics(["orders"])["orders"].result(timeout=15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    resource = ConfigResource(ConfigResource.Type.TOPIC, "orders")
    with pytest.raises(KafkaException) as refused:
        bob.describe_configs([resource])[resource].result(timeout=15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "orders" in AdminClient(_config(acl_broker, "admin")).list_topics(timeout=10).topics


def test_a_transactional_producer_needs_write_on_its_transactional_id(acl_broker):
    admin = AdminClient(_config(acl_broker, "admin"))
    _create_topic(admin, "payments")
    _allow(admin, "alice", AclOperation.WRITE, ResourceType.TOPIC, "payments")
    alice = _config(acl_broker, "alice")

    producer = Producer({**alice, "transactional.id": "payments-1"})
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(15)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    _allow(admin, "alice", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "payments-1")
    producer = Producer({**alice, "transactional.id": "payments-1"})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce("payments", b"paid")
    producer.commit_transaction(15)


def test_authorized_operations_are_the_principals_and_all_without_an_authorizer(
        acl_broker, broker_factory):
    admin = AdminClient(_config(acl_broker, "admin"))
    _create_topic(admin, "orders")
    _allow(admin, "alice", AclOperation.READ, ResourceType.TOPIC, "orders")
    alice = AdminClient(_config(acl_broker, "alice"))
    topic = alice.describe_topics(TopicCollection(["orders"]),
                                  include_authorized_operations=True)["orders"].result(15)
    assert set(topic.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    cluster = alice.describe_cluster(include_authorized_operations=True).result(15)
    assert not cluster.authorized_operations
    cluster = admin.describe_cluster(include_authorized_operations=True).result(15)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE}

    # no authorizer: every operation (KIP-430, as Kafka), and the ACL APIs are disabled
    plain = broker_factory(name="plain")
    client = AdminClient({"bootstrap.servers": plain.bootstrap})
    _create_topic(client, "orders")
    topic = client.describe_topics(TopicCollection(["orders"]),
                                   include_authorized_operations=True)["orders"].result(15)
    assert len(topic.authorized_operations) == 8
    binding = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                         "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as disabled:
        client.create_acls([binding])[binding].result(timeout=15)
    assert disabled.value.args[0].code() == KafkaError.SECURITY_DISABLED


def _first_error(consumer: Consumer, timeout_s: float = 20) -> KafkaError | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is not None \
                and message.error().code() != KafkaError._PARTITION_EOF:
            return message.error()
    return None


def _consume(consumer: Consumer, count: int, timeout_s: float = 30) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    return values


def test_the_java_client_meets_kafkas_authorization_exceptions(acl_broker, java_probe):
    """kafka-clients (Java) as alice, allowed to write orders and nothing else: its send to
    orders is acknowledged; a send to secret, a transactional producer and a consumer group
    each fail with the exception Kafka's brokers make it throw."""
    admin = AdminClient(_config(acl_broker, "admin"))
    _create_topic(admin, "orders")
    _create_topic(admin, "secret")
    _allow(admin, "alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    _allow(admin, "alice", AclOperation.READ, ResourceType.TOPIC, "orders")
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="alice" password="{PASSWORDS["alice"]}";')
    config = ("security.protocol=SASL_PLAINTEXT sasl.mechanism=SCRAM-SHA-256 "
              f"sasl.jaas.config={jaas.replace(' ', '%20')}")
    run = java_probe.run(acl_broker.bootstrap,
                         f"producer name=p acks=all max.block.ms=10000 {config}",
                         "send producer=p topic=orders partition=0",
                         "send producer=p topic=secret partition=0",
                         f"producer name=t transactional.id=alices max.block.ms=10000 {config}",
                         f"consumer name=c topics=orders subscribe=true group.id=billing "
                         f"{config}",
                         "poll consumer=c count=1 timeout_ms=10000", check=False)
    sent = [e for e in run.events if e.get("event") == "sent"]
    assert [e["topic"] for e in sent] == ["orders"], run.explain()
    thrown = {e["step"]: " ".join([e["exception"], e["message"]])
              for e in run.events if e.get("event") == "error"}
    assert thrown == {
        "send": "TopicAuthorizationException Not authorized to access topics: [secret]",
        "producer": "TransactionalIdAuthorizationException Transactional Id authorization "
                    "failed.",
        "poll": "GroupAuthorizationException Not authorized to access group: billing"}, \
        run.explain()
