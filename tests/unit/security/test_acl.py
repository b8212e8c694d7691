"""Kafka's ACL rules (``oncelog.security.acl``): super users, no-ACL default, DENY wins,
implied DESCRIBE and DESCRIBE_CONFIGS, wildcard principals, hosts and names, prefixes;
``authorize_any`` (Kafka's authorizeByResourceType); KIP-430 authorized operations; filters
(MATCH); the bindings CreateAcls refuses; denials logged once per interval."""

from __future__ import annotations

import logging

import pytest

from oncelog.security.acl import (AclBinding, AclEntry, AclFilter, AclOperation, AclPermission,
                                  AllowAll, Authorizer, PatternType, ResourcePattern,
                                  ResourceType, parse_super_users)

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermission.ALLOW, AclPermission.DENY
Op = AclOperation


def acl(resource_type, name, principal, operation, permission=ALLOW, pattern=LITERAL,
        host="*") -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AclEntry(principal, host, operation, permission))


def authorizer(*bindings, **kwargs) -> Authorizer:
    found = Authorizer(**kwargs)
    found.replace(bindings)
    return found


def test_without_acls_only_super_users_and_the_no_acl_default_allow():
    strict = authorizer(super_users={"User:admin"})
    assert strict.authorize("User:admin", "1.2.3.4", Op.DELETE, TOPIC, "t")
    assert not strict.authorize("User:alice", "1.2.3.4", Op.READ, TOPIC, "t")
    lenient = authorizer(allow_if_no_acl=True)
    assert lenient.authorize("User:alice", "1.2.3.4", Op.READ, TOPIC, "t")
    # an ACL on the resource, for anyone, ends the default for everyone
    lenient.replace([acl(TOPIC, "t", "User:bob", Op.READ)])
    assert not lenient.authorize("User:alice", "1.2.3.4", Op.READ, TOPIC, "t")
    assert lenient.authorize("User:alice", "1.2.3.4", Op.READ, TOPIC, "other")


def test_deny_wins_and_allows_imply_describe_but_denies_imply_nothing():
    rules = authorizer(acl(TOPIC, "t", "User:alice", Op.WRITE),
                       acl(TOPIC, "t", "User:alice", Op.ALTER_CONFIGS),
                       acl(TOPIC, "t", "User:alice", Op.READ, DENY))
    allowed = lambda op: rules.authorize("User:alice", "h", op, TOPIC, "t")  # noqa: E731
    assert allowed(Op.WRITE) and allowed(Op.DESCRIBE) and allowed(Op.DESCRIBE_CONFIGS)
    assert not allowed(Op.READ) and not allowed(Op.DELETE) and not allowed(Op.CREATE)
    rules.replace([acl(TOPIC, "t", "User:alice", Op.ALL),
                   acl(TOPIC, "t", "User:alice", Op.DESCRIBE, DENY)])
    assert allowed(Op.READ) and allowed(Op.DELETE) and not allowed(Op.DESCRIBE)
    rules.replace([acl(TOPIC, "t", "User:alice", Op.READ),
                   acl(TOPIC, "*", "User:*", Op.ALL, DENY)])
    assert not allowed(Op.READ)


def test_wildcards_prefixes_and_hosts():
    rules = authorizer(acl(TOPIC, "*", "User:*", Op.DESCRIBE),
                       acl(TOPIC, "orders-", "User:alice", Op.READ, pattern=PREFIXED),
                       acl(TOPIC, "orders-secret", "User:alice", Op.READ, DENY,
                           pattern=PREFIXED),
                       acl(GROUP, "g", "User:alice", Op.READ, host="10.0.0.1"))
    assert rules.authorize("User:bob", "h", Op.DESCRIBE, TOPIC, "anything")
    assert rules.authorize("User:alice", "h", Op.READ, TOPIC, "orders-eu")
    assert not rules.authorize("User:alice", "h", Op.READ, TOPIC, "orders-secret-2")
    assert not rules.authorize("User:alice", "h", Op.READ, TOPIC, "order")
    assert rules.authorize("User:alice", "10.0.0.1", Op.READ, GROUP, "g")
    assert not rules.authorize("User:alice", "10.0.0.2", Op.READ, GROUP, "g")
    # a literal ACL on "*" is not a prefix, and a prefix "*" is not a wildcard
    rules.replace([acl(TOPIC, "*", "User:alice", Op.READ, pattern=PREFIXED)])
    assert not rules.authorize("User:alice", "h", Op.READ, TOPIC, "orders")
    assert rules.authorize("User:alice", "h", Op.READ, TOPIC, "*topic")


def test_authorize_any_is_kafkas_authorize_by_resource_type():
    rules = authorizer(acl(TOPIC, "orders", "User:alice", Op.WRITE))
    assert rules.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    assert not rules.authorize_any("User:bob", "h", Op.WRITE, TOPIC)
    rules.replace([acl(TOPIC, "orders", "User:alice", Op.WRITE),
                   acl(TOPIC, "ord", "User:alice", Op.WRITE, DENY, pattern=PREFIXED)])
    assert not rules.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    rules.replace([acl(TOPIC, "pay", "User:alice", Op.WRITE, pattern=PREFIXED),
                   acl(TOPIC, "ord", "User:alice", Op.WRITE, DENY, pattern=PREFIXED)])
    assert rules.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    rules.replace([acl(TOPIC, "pay", "User:alice", Op.WRITE, pattern=PREFIXED),
                   acl(TOPIC, "*", "User:*", Op.WRITE, DENY)])
    assert not rules.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    assert authorizer(super_users={"User:bob"}).authorize_any("User:bob", "h", Op.WRITE, TOPIC)


def test_authorized_operations_are_those_allowed_among_the_types_own():
    rules = authorizer(acl(GROUP, "g", "User:alice", Op.READ))
    assert rules.authorized_operations("User:alice", "h", GROUP, "g") == {
        int(Op.READ), int(Op.DESCRIBE)}
    assert AllowAll().authorized_operations("User:x", "h", CLUSTER, "kafka-cluster") == {
        int(op) for op in (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                           Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE)}


def test_filters_match_as_kafkas_and_match_finds_every_pattern_that_applies():
    bindings = [acl(TOPIC, "orders", "User:alice", Op.READ),
                acl(TOPIC, "*", "User:bob", Op.WRITE),
                acl(TOPIC, "ord", "User:alice", Op.READ, pattern=PREFIXED),
                acl(GROUP, "orders", "User:alice", Op.READ)]
    rules = authorizer(*bindings)
    assert rules.bindings() == sorted(bindings)
    assert rules.bindings(AclFilter(TOPIC, "orders", PatternType.MATCH)) == sorted(bindings[:3])
    assert rules.bindings(AclFilter(TOPIC, "orders", PatternType.ANY)) == [bindings[0]]
    assert rules.bindings(AclFilter(principal="User:bob")) == [bindings[1]]
    assert rules.bindings(AclFilter(operation=Op.WRITE, permission=DENY)) == []


@pytest.mark.parametrize("binding, reason, whole_request", [
    (acl(ResourceType.ANY, "t", "User:a", Op.READ), "resourceType must not be ANY", True),
    (acl(TOPIC, "t", "User:a", Op.ANY), "operation must not be ANY", True),
    (acl(TOPIC, "t", "User:a", Op.READ, AclPermission.ANY), "permissionType must not be ANY",
     True),
    (acl(TOPIC, "t", "User:a", Op.READ, pattern=PatternType.MATCH),
     "patternType must not be MATCH", True),
    (acl(ResourceType.UNKNOWN, "t", "User:a", Op.READ), "unknown elements", False),
    (acl(TOPIC, "", "User:a", Op.READ), "Invalid empty resource name specified", False),
    (acl(CLUSTER, "mine", "User:a", Op.ALTER), "The only valid name for the CLUSTER", False),
    (acl(TOPIC, "t", "alice", Op.READ), "Could not parse principal", False),
])
def test_bindings_kafka_refuses(binding, reason, whole_request):
    """As Kafka 4.1 answers (tests/differential/conversations/authorizer): a filter's value
    fails the whole CreateAcls, the rest fail alone; "/" in a name and an empty host pass."""
    assert reason in (binding.invalid_reason() or "")
    assert (binding.filter_only() is not None) is whole_request


def test_a_slash_in_a_name_and_an_empty_host_are_kafkas_too():
    assert acl(GROUP, "team/app", "User:a", Op.READ, host="").invalid_reason() is None


def test_super_users_parse_and_a_denial_is_logged_once_per_interval(caplog):
    assert parse_super_users("User:admin; User:broker;") == {"User:admin", "User:broker"}
    with pytest.raises(ValueError, match="'admin' is not a principal"):
        parse_super_users("admin")
    now = [0.0]
    rules = Authorizer(log_interval_s=60, monotonic=lambda: now[0])
    with caplog.at_level(logging.INFO, "oncelog.authorizer"):
        for _ in range(5):
            rules.authorize("User:alice", "h", Op.READ, TOPIC, "t")
        rules.authorize("User:alice", "h", Op.READ, TOPIC, "t", log_denial=False)
        now[0] = 61
        rules.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    denials = [r.getMessage() for r in caplog.records]
    assert denials == ["Principal = User:alice is Denied Operation = Read from host = h on "
                       "resource = Topic:LITERAL:t"] * 2
