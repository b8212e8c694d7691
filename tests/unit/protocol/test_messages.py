"""Request and response codecs: every API we serve, at every version we advertise.

Requests are built with kafka-python's classes (what a client sends) behind a hand-built
header; responses come from each handler's ``error_response`` and are read back with
kafka-python's response class at the same version.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from kafka.protocol.api_header import RequestHeader as KafkaPythonRequestHeader
from kafka.protocol.api_message import ApiMessage

from oncelog.broker.dispatch import HANDLERS
from oncelog.broker.handlers import api_versions, fetch
from oncelog.protocol import messages
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.errors import ErrorCode, KafkaError
from oncelog.protocol.messages import (REQUESTS, RESPONSES, FetchResponse, decode_request,
                                       decode_request_header, encode_response, is_flexible)
from oncelog.protocol.records import make_batch

CLIENT_ID = "rdkafka-\u00e9"  # non-ASCII: the length is in bytes
BATCH = make_batch([b"v1", b"v2"], keys=[b"k", None], timestamp_ms=1_000)
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def header_bytes(api_key: int, version: int, correlation_id: int = 0x01020304,
                 client_id: str | None = CLIENT_ID) -> bytes:
    """Request header v1 (v2 adds an empty tagged-field count), built by hand."""
    raw = None if client_id is None else client_id.encode()
    out = struct.pack(">hhi", api_key, version, correlation_id)
    out += struct.pack(">h", -1) if raw is None else struct.pack(">h", len(raw)) + raw
    if is_flexible(api_key, version):
        out += b"\x00"
    return out


# -- sample requests: (request, check(decoded, version)) ----------------------------------------

def _produce(v):
    R = messages.ProduceRequest
    T = R.TopicProduceData
    request = R(transactional_id="txn-1", acks=-1, timeout_ms=1500, topic_data=[
        T(name="orders", partition_data=[T.PartitionProduceData(index=2, records=BATCH),
                                         T.PartitionProduceData(index=0, records=None)])])

    def check(d):
        assert (d.acks, d.timeout_ms, d.transactional_id) == (-1, 1500, "txn-1")
        [topic] = d.topic_data
        assert topic.name == "orders"
        assert [p.index for p in topic.partition_data] == [2, 0]
        assert bytes(topic.partition_data[0].records) == BATCH
        assert topic.partition_data[1].records is None
    return request, check


TOPIC_ID = uuid.UUID("7f0e0a5c-7c55-4f0e-9d5b-3f1c3c2f4a11")


def _fetch(v):
    R = messages.FetchRequest
    T = R.FetchTopic
    request = R(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
                isolation_level=1, session_id=0, session_epoch=-1, rack_id="rack-a",
                forgotten_topics_data=[], topics=[T(topic="orders", topic_id=TOPIC_ID, partitions=[
                    T.FetchPartition(partition=2, current_leader_epoch=4, fetch_offset=99,
                                     last_fetched_epoch=3, log_start_offset=-1,
                                     partition_max_bytes=65536)])])

    def check(d):
        assert (d.max_wait_ms, d.min_bytes, d.max_bytes, d.isolation_level) == (
            500, 1, 1 << 20, 1)
        [topic] = d.topics
        [p] = topic.partitions
        # v13 (KIP-516) names the topic by id, not by name
        named = (topic.topic_id if v >= 13 else topic.topic)
        assert (named, p.partition, p.fetch_offset, p.partition_max_bytes) == (
            TOPIC_ID if v >= 13 else "orders", 2, 99, 65536)
        assert p.current_leader_epoch == (4 if v >= 9 else -1)
        assert p.last_fetched_epoch == (3 if v >= 12 else -1)
        assert d.rack_id == ("rack-a" if v >= 11 else "")
    return request, check


def _list_offsets(v):
    R = messages.ListOffsetsRequest
    T = R.ListOffsetsTopic
    request = R(replica_id=-1, isolation_level=1, topics=[T(name="orders", partitions=[
        T.ListOffsetsPartition(partition_index=2, current_leader_epoch=4, timestamp=-2),
        T.ListOffsetsPartition(partition_index=3, current_leader_epoch=4,
                               timestamp=1_700_000_000_000)])])

    def check(d):
        [topic] = d.topics
        assert topic.name == "orders"
        assert [(p.partition_index, p.timestamp) for p in topic.partitions] == [
            (2, -2), (3, 1_700_000_000_000)]
        assert topic.partitions[0].current_leader_epoch == (4 if v >= 4 else -1)
        assert d.isolation_level == (1 if v >= 2 else 0)
    return request, check


def _metadata(v):
    R = messages.MetadataRequest
    request = R(topics=[R.MetadataRequestTopic(name="orders"),
                        R.MetadataRequestTopic(name="logs")],
                allow_auto_topic_creation=False, include_topic_authorized_operations=True)

    def check(d):
        assert [t.name for t in d.topics] == ["orders", "logs"]
        assert d.allow_auto_topic_creation is (False if v >= 4 else True)
        assert d.include_topic_authorized_operations is (v >= 8)
    return request, check


def _api_versions(v):
    R = messages.ApiVersionsRequest
    request = R(client_software_name="oncelog-tests", client_software_version="1.2.3")

    def check(d):
        assert (d.client_software_name, d.client_software_version) == (
            ("oncelog-tests", "1.2.3") if v >= 3 else ("", ""))
    return request, check


def _create_topics(v):
    R = messages.CreateTopicsRequest
    T = R.CreatableTopic
    request = R(timeout_ms=5000, validate_only=True, topics=[
        T(name="orders", num_partitions=3, replication_factor=1, assignments=[],
          configs=[T.CreatableTopicConfig(name="retention.ms", value="1000"),
                   T.CreatableTopicConfig(name="cleanup.policy", value=None)]),
        T(name="logs", num_partitions=-1, replication_factor=-1,
          assignments=[T.CreatableReplicaAssignment(partition_index=0, broker_ids=[1])],
          configs=[])])

    def check(d):
        assert (d.timeout_ms, d.validate_only) == (5000, True)
        orders, logs = d.topics
        assert (orders.name, orders.num_partitions, orders.replication_factor) == (
            "orders", 3, 1)
        assert [(c.name, c.value) for c in orders.configs] == [
            ("retention.ms", "1000"), ("cleanup.policy", None)]
        assert (logs.name, logs.num_partitions) == ("logs", -1)
        assert [(a.partition_index, a.broker_ids) for a in logs.assignments] == [(0, [1])]
    return request, check


def _delete_topics(v):
    R = messages.DeleteTopicsRequest
    if v >= 6:
        request = R(timeout_ms=3000, topics=[R.DeleteTopicState(name="orders", topic_id=None),
                                             R.DeleteTopicState(name=None, topic_id=TOPIC_ID)])
    else:
        request = R(timeout_ms=3000, topic_names=["orders", "logs"])

    def check(d):
        assert d.timeout_ms == 3000
        if v >= 6:
            assert [(t.name, t.topic_id) for t in d.topics] == [
                ("orders", None), (None, TOPIC_ID)]
        else:
            assert list(d.topic_names) == ["orders", "logs"]
    return request, check


def _describe_configs(v):
    R = messages.DescribeConfigsRequest
    request = R(include_synonyms=True, include_documentation=True, resources=[
        R.DescribeConfigsResource(resource_type=2, resource_name="orders",
                                  configuration_keys=["retention.ms"]),
        R.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None)])

    def check(d):
        assert [(r.resource_type, r.resource_name, r.configuration_keys) for r in d.resources] == [
            (2, "orders", ["retention.ms"]), (4, "1", None)]
        assert d.include_synonyms is True
        assert d.include_documentation is (v >= 3)
    return request, check


def _create_partitions(v):
    R = messages.CreatePartitionsRequest
    T = R.CreatePartitionsTopic
    request = R(timeout_ms=2000, validate_only=True, topics=[
        T(name="orders", count=4, assignments=None),
        T(name="logs", count=2, assignments=[T.CreatePartitionsAssignment(broker_ids=[1])])])

    def check(d):
        assert (d.timeout_ms, d.validate_only) == (2000, True)
        assert [(t.name, t.count) for t in d.topics] == [("orders", 4), ("logs", 2)]
        assert d.topics[0].assignments is None
        assert [a.broker_ids for a in d.topics[1].assignments] == [[1]]
    return request, check


def _describe_cluster(v):
    R = messages.DescribeClusterRequest
    request = R(include_cluster_authorized_operations=True, endpoint_type=1)

    def check(d):
        assert d.include_cluster_authorized_operations is True
        assert d.endpoint_type == 1
    return request, check


def _init_producer_id(v):
    R = messages.InitProducerIdRequest
    request = R(transactional_id=None, transaction_timeout_ms=60000, producer_id=7,
                producer_epoch=3)

    def check(d):
        assert d.transactional_id is None and d.transaction_timeout_ms == 60000
        if v >= 3:
            assert (d.producer_id, d.producer_epoch) == (7, 3)
    return request, check


def _describe_producers(v):
    R = messages.DescribeProducersRequest
    request = R(topics=[R.TopicRequest(name="orders", partition_indexes=[0, 2])])

    def check(d):
        assert [(t.name, t.partition_indexes) for t in d.topics] == [("orders", [0, 2])]
    return request, check


def _offset_for_leader_epoch(v):
    R = messages.OffsetForLeaderEpochRequest
    request = R(replica_id=2, topics=[R.OffsetForLeaderTopic(topic="orders", partitions=[
        R.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=1, current_leader_epoch=4,
                                                        leader_epoch=3)])])

    def check(d):
        if v >= 3:
            assert d.replica_id == 2
        (topic,) = d.topics
        (partition,) = topic.partitions
        assert (topic.topic, partition.partition, partition.current_leader_epoch,
                partition.leader_epoch) == ("orders", 1, 4, 3)
    return request, check


def _find_coordinator(v):
    request = messages.FindCoordinatorRequest(key="orders-app", key_type=0,
                                              coordinator_keys=["orders-app", "billing"])

    def check(d):
        if v >= 4:
            assert d.coordinator_keys == ["orders-app", "billing"]
        else:
            assert d.key == "orders-app"
        assert d.key_type == 0
    return request, check


def _join_group(v):
    R = messages.JoinGroupRequest
    request = R(group_id="orders-app", session_timeout_ms=10000, rebalance_timeout_ms=30000,
                member_id="m-1", group_instance_id="host-a", protocol_type="consumer",
                protocols=[R.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01"),
                           R.JoinGroupRequestProtocol(name="roundrobin", metadata=b"")],
                reason="restart")

    def check(d):
        assert (d.group_id, d.session_timeout_ms, d.member_id, d.protocol_type) == (
            "orders-app", 10000, "m-1", "consumer")
        assert [(p.name, bytes(p.metadata)) for p in d.protocols] == [
            ("range", b"\x00\x01"), ("roundrobin", b"")]
        assert d.rebalance_timeout_ms == (30000 if v >= 1 else -1)
        assert d.group_instance_id == ("host-a" if v >= 5 else None)
        assert d.reason == ("restart" if v >= 8 else None)
    return request, check


def _sync_group(v):
    R = messages.SyncGroupRequest
    request = R(group_id="orders-app", generation_id=3, member_id="m-1",
                group_instance_id="host-a", protocol_type="consumer", protocol_name="range",
                assignments=[R.SyncGroupRequestAssignment(member_id="m-1", assignment=b"\x07")])

    def check(d):
        assert (d.group_id, d.generation_id, d.member_id) == ("orders-app", 3, "m-1")
        assert [(a.member_id, bytes(a.assignment)) for a in d.assignments] == [("m-1", b"\x07")]
        assert d.group_instance_id == ("host-a" if v >= 3 else None)
        assert d.protocol_name == ("range" if v >= 5 else None)
    return request, check


def _heartbeat(v):
    request = messages.HeartbeatRequest(group_id="orders-app", generation_id=3, member_id="m-1",
                                        group_instance_id="host-a")

    def check(d):
        assert (d.group_id, d.generation_id, d.member_id) == ("orders-app", 3, "m-1")
        assert d.group_instance_id == ("host-a" if v >= 3 else None)
    return request, check


def _leave_group(v):
    R = messages.LeaveGroupRequest
    request = R(group_id="orders-app", member_id="m-1", members=[
        R.MemberIdentity(member_id="m-1", group_instance_id=None, reason="bye"),
        R.MemberIdentity(member_id="", group_instance_id="host-b", reason=None)])

    def check(d):
        assert d.group_id == "orders-app"
        if v >= 3:
            assert [(m.member_id, m.group_instance_id) for m in d.members] == [
                ("m-1", None), ("", "host-b")]
        else:
            assert d.member_id == "m-1"
    return request, check


def _offset_commit(v):
    R = messages.OffsetCommitRequest
    T = R.OffsetCommitRequestTopic
    request = R(group_id="orders-app", generation_id_or_member_epoch=3, member_id="m-1",
                group_instance_id=None, retention_time_ms=-1, topics=[T(name="orders", partitions=[
                    T.OffsetCommitRequestPartition(partition_index=2, committed_offset=41,
                                                   committed_leader_epoch=0,
                                                   committed_metadata="batch-7"),
                    T.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                   committed_metadata=None)])])

    def check(d):
        assert (d.group_id, d.generation_id_or_member_epoch, d.member_id) == (
            "orders-app", 3, "m-1")
        [topic] = d.topics
        assert topic.name == "orders"
        assert [(p.partition_index, p.committed_offset, p.committed_metadata)
                for p in topic.partitions] == [(2, 41, "batch-7"), (0, 0, None)]
    return request, check


def _offset_fetch(v):
    R = messages.OffsetFetchRequest
    request = R(group_id="orders-app", topics=[R.OffsetFetchRequestTopic(
        name="orders", partition_indexes=[0, 2])], require_stable=True, groups=[
        R.OffsetFetchRequestGroup(group_id="orders-app", topics=[
            R.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name="orders",
                                                               partition_indexes=[0, 2])]),
        R.OffsetFetchRequestGroup(group_id="billing", topics=None)])

    def check(d):
        if v >= 8:
            assert [g.group_id for g in d.groups] == ["orders-app", "billing"]
            assert d.groups[1].topics is None
            assert [(t.name, t.partition_indexes) for t in d.groups[0].topics] == [
                ("orders", [0, 2])]
        else:
            assert d.group_id == "orders-app"
            assert [(t.name, t.partition_indexes) for t in d.topics] == [("orders", [0, 2])]
    return request, check


def _list_groups(v):
    request = messages.ListGroupsRequest(states_filter=["Stable"], types_filter=["classic"])

    def check(d):
        assert d.states_filter == (["Stable"] if v >= 4 else [])
        assert d.types_filter == (["classic"] if v >= 5 else [])
    return request, check


def _describe_groups(v):
    request = messages.DescribeGroupsRequest(groups=["orders-app", "billing"],
                                             include_authorized_operations=True)

    def check(d):
        assert d.groups == ["orders-app", "billing"]
        assert d.include_authorized_operations is (v >= 3)
    return request, check


def _delete_groups(v):
    request = messages.DeleteGroupsRequest(groups_names=["orders-app", "billing"])

    def check(d):
        assert d.groups_names == ["orders-app", "billing"]
    return request, check


def _offset_delete(v):
    R = messages.OffsetDeleteRequest
    T = R.OffsetDeleteRequestTopic
    request = R(group_id="orders-app", topics=[T(name="orders", partitions=[
        T.OffsetDeleteRequestPartition(partition_index=1)])])

    def check(d):
        assert d.group_id == "orders-app"
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in d.topics] == [
            ("orders", [1])]
    return request, check


def _add_partitions_to_txn(v):
    R = messages.AddPartitionsToTxnRequest
    if v >= 4:  # the brokers' form (KIP-890): transactions, each maybe verify-only
        T = R.AddPartitionsToTxnTransaction
        request = R(transactions=[
            T(transactional_id="app-1", producer_id=7, producer_epoch=2, verify_only=True,
              topics=[T.AddPartitionsToTxnTopic(name="orders", partitions=[0, 3])]),
            T(transactional_id="app-2", producer_id=8, producer_epoch=0, verify_only=False,
              topics=[T.AddPartitionsToTxnTopic(name="refunds", partitions=[1])])])

        def check_brokers(d):
            assert [(t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only,
                     [(topic.name, topic.partitions) for topic in t.topics])
                    for t in d.transactions] == [
                ("app-1", 7, 2, True, [("orders", [0, 3])]),
                ("app-2", 8, 0, False, [("refunds", [1])])]
        return request, check_brokers
    request = R(v3_and_below_transactional_id="app-1", v3_and_below_producer_id=7,
                v3_and_below_producer_epoch=2, v3_and_below_topics=[
                    R.AddPartitionsToTxnTopic(name="orders", partitions=[0, 3])])

    def check(d):
        assert (d.v3_and_below_transactional_id, d.v3_and_below_producer_id,
                d.v3_and_below_producer_epoch) == ("app-1", 7, 2)
        assert [(t.name, t.partitions) for t in d.v3_and_below_topics] == [("orders", [0, 3])]
    return request, check


def _add_offsets_to_txn(v):
    request = messages.AddOffsetsToTxnRequest(transactional_id="app-1", producer_id=7,
                                              producer_epoch=2, group_id="orders-app")

    def check(d):
        assert (d.transactional_id, d.producer_id, d.producer_epoch, d.group_id) == (
            "app-1", 7, 2, "orders-app")
    return request, check


def _end_txn(v):
    request = messages.EndTxnRequest(transactional_id="app-1", producer_id=7, producer_epoch=2,
                                     committed=True)

    def check(d):
        assert (d.transactional_id, d.producer_id, d.producer_epoch, d.committed) == (
            "app-1", 7, 2, True)
    return request, check


def _write_txn_markers(v):
    R = messages.WriteTxnMarkersRequest
    M = R.WritableTxnMarker
    request = R(markers=[M(producer_id=7, producer_epoch=2, transaction_result=False,
                           topics=[M.WritableTxnMarkerTopic(name="orders",
                                                            partition_indexes=[1])],
                           coordinator_epoch=4)])

    def check(d):
        (marker,) = d.markers
        assert (marker.producer_id, marker.producer_epoch, marker.transaction_result,
                marker.coordinator_epoch) == (7, 2, False, 4)
        assert [(t.name, t.partition_indexes) for t in marker.topics] == [("orders", [1])]
    return request, check


def _txn_offset_commit(v):
    R = messages.TxnOffsetCommitRequest
    T = R.TxnOffsetCommitRequestTopic
    request = R(transactional_id="app-1", group_id="orders-app", producer_id=7,
                producer_epoch=2, generation_id=5, member_id="m-1", group_instance_id=None,
                topics=[T(name="orders", partitions=[T.TxnOffsetCommitRequestPartition(
                    partition_index=1, committed_offset=42, committed_leader_epoch=3,
                    committed_metadata="m")])])

    def check(d):
        assert (d.transactional_id, d.group_id, d.producer_id, d.producer_epoch) == (
            "app-1", "orders-app", 7, 2)
        (topic,) = d.topics
        (partition,) = topic.partitions
        assert (topic.name, partition.partition_index, partition.committed_offset) == (
            "orders", 1, 42)
        if v >= 3:
            assert (d.generation_id, d.member_id) == (5, "m-1")
    return request, check


def _describe_transactions(v):
    request = messages.DescribeTransactionsRequest(transactional_ids=["app-1", "app-2"])

    def check(d):
        assert d.transactional_ids == ["app-1", "app-2"]
    return request, check


def _list_transactions(v):
    request = messages.ListTransactionsRequest(state_filters=["Ongoing"],
                                               producer_id_filters=[7], duration_filter=1000)

    def check(d):
        assert (d.state_filters, d.producer_id_filters) == (["Ongoing"], [7])
        if v >= 1:
            assert d.duration_filter == 1000
    return request, check


def _sasl_handshake(v):
    request = messages.SaslHandshakeRequest(mechanism="SCRAM-SHA-512")

    def check(d):
        assert d.mechanism == "SCRAM-SHA-512"
    return request, check


def _sasl_authenticate(v):
    request = messages.SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=abc")

    def check(d):
        assert bytes(d.auth_bytes) == b"n,,n=alice,r=abc"
    return request, check


def _describe_user_scram_credentials(v):
    U = messages.DescribeUserScramCredentialsRequest.UserName
    request = messages.DescribeUserScramCredentialsRequest(users=[U(name="alice")])

    def check(d):
        assert [u.name for u in d.users] == ["alice"]
    return request, check


def _alter_user_scram_credentials(v):
    R = messages.AlterUserScramCredentialsRequest
    request = R(deletions=[R.ScramCredentialDeletion(name="bob", mechanism=1)],
                upsertions=[R.ScramCredentialUpsertion(name="alice", mechanism=2,
                                                       iterations=4096, salt=b"s" * 16,
                                                       salted_password=b"p" * 64)])

    def check(d):
        assert [(x.name, x.mechanism) for x in d.deletions] == [("bob", 1)]
        (upsertion,) = d.upsertions
        assert (upsertion.name, upsertion.iterations, bytes(upsertion.salt)) == (
            "alice", 4096, b"s" * 16)
    return request, check


def _describe_acls(v):
    request = messages.DescribeAclsRequest(
        resource_type_filter=2, resource_name_filter="orders", pattern_type_filter=2,
        principal_filter="User:alice", host_filter=None, operation=3, permission_type=3)

    def check(d):
        assert (d.resource_type_filter, d.resource_name_filter, d.pattern_type_filter) == (
            2, "orders", 2)
        assert (d.principal_filter, d.host_filter, d.operation) == ("User:alice", None, 3)
    return request, check


def _create_acls(v):
    C = messages.CreateAclsRequest.AclCreation
    request = messages.CreateAclsRequest(creations=[C(
        resource_type=2, resource_name="orders-", resource_pattern_type=4,
        principal="User:alice", host="*", operation=4, permission_type=3)])

    def check(d):
        (creation,) = d.creations
        assert (creation.resource_name, creation.resource_pattern_type, creation.operation) == (
            "orders-", 4, 4)
    return request, check


def _delete_acls(v):
    F = messages.DeleteAclsRequest.DeleteAclsFilter
    request = messages.DeleteAclsRequest(filters=[F(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter="User:bob", host_filter=None, operation=1, permission_type=1)])

    def check(d):
        (found,) = d.filters
        assert (found.principal_filter, found.resource_name_filter) == ("User:bob", None)
    return request, check


# Consumer groups
SAMPLES = {
    ApiKey.FIND_COORDINATOR: _find_coordinator, ApiKey.JOIN_GROUP: _join_group,
    ApiKey.SYNC_GROUP: _sync_group, ApiKey.HEARTBEAT: _heartbeat,
    ApiKey.LEAVE_GROUP: _leave_group, ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch, ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.DESCRIBE_GROUPS: _describe_groups, ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.OFFSET_DELETE: _offset_delete,
}
# Idempotent producer
SAMPLES |= {
    ApiKey.INIT_PRODUCER_ID: _init_producer_id, ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
}
# Transactions
SAMPLES |= {
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn, ApiKey.END_TXN: _end_txn,
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers, ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
}
# Broker core
SAMPLES |= {
    ApiKey.PRODUCE: _produce, ApiKey.FETCH: _fetch, ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata, ApiKey.API_VERSIONS: _api_versions,
    ApiKey.CREATE_TOPICS: _create_topics, ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.DESCRIBE_CONFIGS: _describe_configs, ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DESCRIBE_CLUSTER: _describe_cluster,
    ApiKey.SASL_HANDSHAKE: _sasl_handshake, ApiKey.SASL_AUTHENTICATE: _sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_user_scram_credentials,
    ApiKey.DESCRIBE_ACLS: _describe_acls, ApiKey.CREATE_ACLS: _create_acls,
    ApiKey.DELETE_ACLS: _delete_acls,
}

SERVED = [pytest.param(key, version, id=f"{ApiKey(key).name}-v{version}")
          for key, module in sorted(HANDLERS.items()) for version in module.VERSIONS]
SCHEMA = [pytest.param(key, version, id=f"{ApiKey(key).name}-v{version}")
          for key in sorted(HANDLERS) for version in range(RESPONSES[key].max_version + 1)]


def test_every_handled_api_has_codecs_and_a_sample():
    assert set(HANDLERS) == set(SAMPLES)
    for key, module in HANDLERS.items():
        assert key in REQUESTS and key in RESPONSES
        assert module.VERSIONS.stop - 1 <= REQUESTS[key].max_version
        assert module.VERSIONS.stop - 1 <= RESPONSES[key].max_version
        assert messages.can_encode(key, module.VERSIONS.stop - 1)


# -- requests -----------------------------------------------------------------------------------

@pytest.mark.parametrize("api_key, version", SERVED)
def test_request_round_trips(api_key, version):
    request, check = SAMPLES[api_key](version)
    body = request.encode(version=version)
    frame = header_bytes(api_key, version) + body

    header = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key, version, 0x01020304, CLIENT_ID)
    assert header.known_api
    assert header.body_offset == len(frame) - len(body)

    decoded = decode_request(header, frame)
    assert type(decoded) is REQUESTS[api_key]
    check(decoded)
    assert decoded.version == version
    decoded._header = None  # kafka-python's decoder leaves this slot unset; encode reads it
    assert decoded.encode(version=version) == body  # nothing lost or invented


@pytest.mark.parametrize("api_key, version", SERVED)
def test_hand_built_header_matches_kafka_pythons(api_key, version):
    ours = header_bytes(api_key, version, correlation_id=77, client_id="cli")
    theirs = KafkaPythonRequestHeader(request_api_key=api_key, request_api_version=version,
                                      correlation_id=77, client_id="cli").encode(
        flexible=REQUESTS[api_key].flexible_version_q(version))
    assert ours == theirs


def test_flexible_header_with_tagged_fields_is_skipped():
    body = messages.MetadataRequest(topics=None, allow_auto_topic_creation=True).encode(
        version=12)
    # two tagged fields: tag 0 with 3 bytes, tag 5 with 0 bytes
    frame = header_bytes(3, 12)[:-1] + b"\x02" + b"\x00\x03abc" + b"\x05\x00" + body
    header = decode_request_header(frame)
    assert header.body_offset == len(frame) - len(body)
    assert decode_request(header, frame).topics is None


def test_null_client_id():
    frame = header_bytes(18, 0, client_id=None)
    header = decode_request_header(frame)
    assert header.client_id is None
    assert header.body_offset == len(frame)


def test_unknown_api_key_header_parses():
    frame = struct.pack(">hhih", 9999, 3, 42, 3) + b"abc" + b"body bytes"
    header = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        9999, 3, 42, "abc")
    assert not header.known_api
    assert header.body_offset == 13  # no tagged fields assumed for an unknown API


@pytest.mark.parametrize("length", [0, 1, 7, 9])
def test_truncated_header_is_invalid_request(length):
    frame = header_bytes(3, 1)[:length]
    with pytest.raises(KafkaError) as raised:
        decode_request_header(frame)
    assert raised.value.code == ErrorCode.INVALID_REQUEST


def test_client_id_past_the_frame_is_invalid_request():
    frame = struct.pack(">hhih", 3, 1, 42, 100) + b"short"
    with pytest.raises(KafkaError) as raised:
        decode_request_header(frame)
    assert raised.value.code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("tagged", [b"", b"\x01", b"\x01\x00", b"\x01\x00\x05ab",
                                    b"\xff\xff\xff\xff\xff\xff"])
def test_broken_header_tagged_fields_are_invalid_request(tagged):
    frame = header_bytes(3, 12)[:-1] + tagged
    with pytest.raises(KafkaError) as raised:
        decode_request_header(frame)
    assert raised.value.code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("api_key, version", [  # ApiVersions v0-2 bodies are empty
    p for p in SERVED if SAMPLES[p.values[0]](p.values[1])[0].encode(version=p.values[1])])
def test_truncated_body_is_invalid_request(api_key, version):
    request, _ = SAMPLES[api_key](version)
    body = request.encode(version=version)
    frame = header_bytes(api_key, version) + body[:len(body) // 2]
    with pytest.raises(KafkaError) as raised:
        decode_request(decode_request_header(frame), frame)
    assert raised.value.code == ErrorCode.INVALID_REQUEST


def test_version_beyond_the_schema_is_unsupported():
    frame = header_bytes(3, 99)
    with pytest.raises(KafkaError) as raised:
        decode_request(decode_request_header(frame), frame)
    assert raised.value.code == ErrorCode.UNSUPPORTED_VERSION
    assert not messages.can_encode(3, 99)
    assert not messages.can_encode(3, -1)


def test_negative_version_is_unsupported():
    frame = header_bytes(3, -1)
    with pytest.raises(KafkaError) as raised:
        decode_request(decode_request_header(frame), frame)
    assert raised.value.code == ErrorCode.UNSUPPORTED_VERSION


# -- responses ----------------------------------------------------------------------------------

def _error_codes(value) -> list[int]:
    if isinstance(value, dict):
        return [code for key, item in value.items()
                for code in ([item] if key in ("error_code", "partition_error_code")
                              else _error_codes(item))]
    if isinstance(value, list):
        return [code for item in value for code in _error_codes(item)]
    return []


def _messages(value) -> list[str | None]:
    if isinstance(value, dict):
        return [m for key, item in value.items()
                for m in ([item] if key == "error_message" else _messages(item))]
    if isinstance(value, list):
        return [m for item in value for m in _messages(item)]
    return []


def _decode_framed(api_key: int, version: int, response) -> tuple:
    """Frame ``response`` as the broker does and take the frame apart again: its correlation
    id, what the header holds after it, and the body decoded."""
    parts = encode_response(api_key, version, -5, response)
    (frame,) = parts  # one part, one write: no record sets large enough to splice here
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    (correlation_id,) = struct.unpack_from(">i", frame, 4)
    body = bytes(response.encode(version=version))
    assert frame.endswith(body)
    # kafka-python's ApiVersionsResponse.decode reads any error response as v0; Kafka (and
    # we) answer errors other than UNSUPPORTED_VERSION at the request's version, so decode
    # with the plain schema codec.
    decoded = ApiMessage.__dict__["decode"].__func__(RESPONSES[api_key], body, version=version)
    return correlation_id, frame[8:len(frame) - len(body)], decoded


@pytest.mark.parametrize("code", [ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_VERSION])
@pytest.mark.parametrize("api_key, version", SCHEMA)
def test_error_response_encodes_at_every_schema_version(api_key, version, code):
    """Served versions, and the unserved ones dispatch answers with UNSUPPORTED_VERSION."""
    sample_version = min(version, REQUESTS[api_key].max_version)
    request, _ = SAMPLES[api_key](sample_version)
    request = REQUESTS[api_key].decode(request.encode(version=sample_version),
                                       version=sample_version)
    response = HANDLERS[api_key].error_response(request, code, "it went wrong")

    correlation_id, header_rest, decoded = _decode_framed(api_key, version, response)
    assert correlation_id == -5
    codes = _error_codes(decoded.to_dict())
    assert codes and set(codes) == {code}
    texts = [m for m in _messages(decoded.to_dict()) if m is not None]
    assert set(texts) <= {"it went wrong"}


@pytest.mark.parametrize("api_key, version", SERVED)
def test_response_header_version(api_key, version):
    request, _ = SAMPLES[api_key](version)
    response = HANDLERS[api_key].error_response(request, ErrorCode.NONE, None)
    _, header_rest, _ = _decode_framed(api_key, version, response)
    flexible = RESPONSES[api_key].flexible_version_q(version)
    if api_key == ApiKey.API_VERSIONS or not flexible:
        assert header_rest == b""      # header v0: the correlation id only
    else:
        assert header_rest == b"\x00"  # header v1: one empty tagged-field count


def test_api_versions_v3_response_keeps_header_v0():
    # KIP-511: a client parses ApiVersions before it knows our versions, so never header v1.
    response = api_versions.error_response(None, ErrorCode.NONE, None)
    (frame,) = encode_response(ApiKey.API_VERSIONS, 3, 9, response)
    prefix, body = frame[:8], frame[8:]
    assert prefix == struct.pack(">ii", 4 + len(body), 9)
    decoded = messages.ApiVersionsResponse.decode(body, version=3)
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == {
        key: (offered.start, offered.stop - 1) for key, module in HANDLERS.items()
        for offered in [getattr(module, "ADVERTISED_VERSIONS", module.VERSIONS)]}


def test_unsupported_api_versions_answer_at_v0_lists_our_versions():
    response = api_versions.unsupported_version_response()
    (frame,) = encode_response(ApiKey.API_VERSIONS, 0, 3, response)
    decoded = messages.ApiVersionsResponse.decode(frame[8:], version=0)
    assert decoded.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert sorted(k.api_key for k in decoded.api_keys) == sorted(HANDLERS)


def test_api_versions_v3_response_has_no_tagged_fields():
    response = api_versions.error_response(None, ErrorCode.NONE, None)
    (frame,) = encode_response(ApiKey.API_VERSIONS, 3, 9, response)
    body = frame[8:]
    assert body.endswith(b"\x00\x00\x00\x00" + b"\x00")  # throttle_time_ms, no tags
    decoded = messages.ApiVersionsResponse.decode(body, version=3)
    assert decoded.supported_features in (None, [])
    assert decoded.finalized_features_epoch == -1


# -- tagged fields with default values are not written ------------------------------------------

def _read_uvarint(data: bytes, position: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def _fetch_v12_partition_tag_counts(body: bytes) -> list[int]:
    """Walk a FetchResponse v12 body by hand; return each partition's tagged-field count."""
    position = 4 + 2 + 4  # throttle_time_ms, error_code, session_id
    topics, position = _read_uvarint(body, position)
    counts = []
    for _ in range(topics - 1):
        length, position = _read_uvarint(body, position)
        position += length - 1  # compact string topic
        partitions, position = _read_uvarint(body, position)
        for _ in range(partitions - 1):
            position += 4 + 2 + 8 + 8 + 8  # index, error, high watermark, LSO, log start
            aborted, position = _read_uvarint(body, position)
            position += max(aborted - 1, 0) * 16
            position += 4  # preferred_read_replica
            records, position = _read_uvarint(body, position)
            position += max(records - 1, 0)
            count, position = _read_uvarint(body, position)
            counts.append(count)
            for _ in range(count):
                _, position = _read_uvarint(body, position)
                size, position = _read_uvarint(body, position)
                position += size
        topic_tags, position = _read_uvarint(body, position)
        assert topic_tags == 0
    top_tags, position = _read_uvarint(body, position)
    assert top_tags == 0
    assert position == len(body)
    return counts


def test_fetch_v12_partitions_carry_no_default_tagged_fields():
    """librdkafka before 2.1.2 misparses a FetchResponse partition with tagged fields present.

    diverging_epoch, current_leader and snapshot_id hold their defaults in every partition
    we send, so each partition's tagged-field count must be 0.
    """
    request, _ = _fetch(12)
    response = fetch.error_response(request, ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
    T = messages.FetchResponse.FetchableTopicResponse
    response.responses.append(T(topic="with-data", partitions=[
        T.PartitionData(partition_index=0, error_code=0, high_watermark=2,
                        last_stable_offset=2, log_start_offset=0, aborted_transactions=[],
                        preferred_read_replica=-1, records=BATCH)]))
    (frame,) = encode_response(ApiKey.FETCH, 12, 1, response)
    body = frame[9:]  # size, correlation id, header v1's tag count
    assert _fetch_v12_partition_tag_counts(body) == [0, 0]

    decoded = messages.FetchResponse.decode(body, version=12)
    for topic in decoded.responses:
        for partition in topic.partitions:
            assert partition.diverging_epoch is None
            assert partition.current_leader is None
            assert partition.snapshot_id is None
    assert bytes(decoded.responses[1].partitions[0].records) == BATCH


def _tagged_values(item, schema, version):
    """(field name, value, default) for every tagged field of every struct in a message."""
    for field in schema.tagged_fields(version)._fields:
        yield field.name, getattr(item, field.name), field.default
    for field in schema.untagged_fields(version):
        value = getattr(item, field.name)
        if field.is_struct() and value is not None:
            yield from _tagged_values(value, field, version)
        elif field.is_struct_array():
            for element in value or []:
                yield from _tagged_values(element, field, version)


FLEXIBLE_SERVED = [p for p in SERVED if RESPONSES[p.values[0]].flexible_version_q(p.values[1])]


@pytest.mark.parametrize("api_key, version", FLEXIBLE_SERVED)
def test_error_responses_carry_only_default_tagged_fields(api_key, version):
    request, _ = SAMPLES[api_key](version)
    response = HANDLERS[api_key].error_response(request, ErrorCode.INVALID_REQUEST, "no")
    _, _, decoded = _decode_framed(api_key, version, response)
    assert [(name, value) for name, value, default in
            _tagged_values(decoded, RESPONSES[api_key]._struct, version)
            if value != default] == []


def test_tag_walkers_see_a_tagged_field_when_one_is_set():
    # The walkers above are only worth something if they would notice a non-default tag.
    T = messages.FetchResponse.FetchableTopicResponse
    P = T.PartitionData
    response = messages.FetchResponse(throttle_time_ms=0, error_code=0, session_id=0,
                                      responses=[T(topic="t", partitions=[P(
                                          partition_index=0, error_code=0, high_watermark=0,
                                          last_stable_offset=0, log_start_offset=0,
                                          aborted_transactions=None, preferred_read_replica=-1,
                                          records=b"", current_leader=P.LeaderIdAndEpoch(
                                              leader_id=1, leader_epoch=0))])])
    (frame,) = encode_response(ApiKey.FETCH, 12, 1, response)
    body = frame[9:]  # size, correlation id, header v1's tag count
    assert _fetch_v12_partition_tag_counts(body) == [1]
    decoded = messages.FetchResponse.decode(body, version=12)
    assert [name for name, value, default in
            _tagged_values(decoded, messages.FetchResponse._struct, 12)
            if value != default] == ["current_leader"]


@pytest.mark.parametrize("api_key, version", SERVED)
def test_decoded_request_does_not_alias_the_receive_buffer(api_key, version):
    """The server decodes frames from a view of its receive buffer and then reuses that
    buffer for the next bytes; that is only safe if the decoded request holds copies."""
    request, check = SAMPLES[api_key](version)
    body = request.encode(version=version)
    buffer = bytearray(header_bytes(api_key, version) + body)
    view = memoryview(buffer)
    decoded = decode_request(decode_request_header(view), view)
    buffer[:] = b"\xa5" * len(buffer)  # the next frame arrives in the same memory
    check(decoded)
    decoded._header = None
    assert decoded.encode(version=version) == body


def _follower_fetch_response(records: bytes) -> bytes:
    topic = FetchResponse.FetchableTopicResponse
    return bytes(FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        topic(topic="t", partitions=[topic.PartitionData(
            partition_index=0, error_code=0, high_watermark=7, last_stable_offset=7,
            log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
            records=records)])]).encode(version=11))


def test_a_follower_fetch_response_decodes_with_its_records_as_a_view_of_the_frame():
    batch = make_batch([b"x" * 1000, b"y"])
    frame = bytearray(_follower_fetch_response(batch))
    response = messages.decode_response_views(ApiKey.FETCH, 11, memoryview(frame))
    records = response.responses[0].partitions[0].records
    assert isinstance(records, memoryview) and bytes(records) == batch
    assert response.responses[0].partitions[0].high_watermark == 7
    frame[-len(batch):] = bytes(len(batch))  # the buffer reused: the view shows it (no copy)
    assert bytes(records) == bytes(len(batch))


@pytest.mark.parametrize("cut", [1, 10, 40])
def test_a_cut_or_garbled_response_is_a_value_error(cut):
    frame = _follower_fetch_response(make_batch([b"x" * 100]))
    with pytest.raises(ValueError, match="FetchResponse v11"):
        messages.decode_response_views(ApiKey.FETCH, 11, memoryview(frame[:-cut]))
    with pytest.raises(ValueError, match="FetchResponse v11"):
        messages.decode_response_views(ApiKey.FETCH, 11,
                                       memoryview(frame[:20] + b"\x7f" * 8 + frame[28:]))


def _slots(message: object) -> dict[str, object]:
    values = {}
    for cls in type(message).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if name != "__weakref__":
                values[name] = getattr(message, name, "<unset>")
    return values


_FETCH_TOPIC = messages.FetchRequest.FetchTopic
_PARTITION_DATA = FetchResponse.FetchableTopicResponse.PartitionData


@pytest.mark.parametrize("cls, fields", [
    (FetchResponse, dict(throttle_time_ms=0, error_code=0, session_id=0, responses=[])),
    (FetchResponse.FetchableTopicResponse, dict(topic="t", topic_id=uuid.uuid4(), partitions=[])),
    (_PARTITION_DATA, dict(partition_index=1, error_code=0, high_watermark=5,
                           last_stable_offset=5, log_start_offset=0, aborted_transactions=None,
                           preferred_read_replica=-1, records=b"x")),
    (_PARTITION_DATA, dict(partition_index=1, error_code=0, diverging_epoch=None)),  # tagged
    (messages.FetchRequest, dict(replica_id=1, max_wait_ms=500, min_bytes=1, max_bytes=10,
                                 isolation_level=0, session_id=0, session_epoch=-1, topics=[],
                                 forgotten_topics_data=[], rack_id="")),
    (_FETCH_TOPIC.FetchPartition, dict(partition=0, current_leader_epoch=3, fetch_offset=7,
                                       log_start_offset=0, partition_max_bytes=1 << 20)),
    (_FETCH_TOPIC, dict(topic_id=uuid.uuid4(), partitions=[])),
])
def test_build_makes_what_the_constructor_makes(cls, fields):
    built = messages.build(cls, **fields)
    assert type(built) is cls
    assert _slots(built) == _slots(cls(**fields))
    assert built.version is None and built.tags == cls(**fields).tags


def test_build_refuses_what_the_constructor_refuses():
    with pytest.raises(ValueError, match="Unrecognized fields"):
        messages.build(FetchResponse, throttle_time_ms=0, no_such_field=1)
