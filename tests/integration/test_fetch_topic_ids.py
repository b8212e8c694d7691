"""Fetch v13 names topics by id (KIP-516), and oncelog's followers use it.

Found by the cluster simulation: a topic deleted and created again while one broker had not
heard of the deletion yet; a follower of the new incarnation fetched by name from that
broker, the leader of the old one - both in leader epoch 0 - and copied the old topic's
records into the new topic's log (its high watermark later went back). A v13 fetch names the
incarnation: a broker holding another one, or none, answers UNKNOWN_TOPIC_ID.
"""

from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.protocol import messages
from oncelog.protocol.errors import ErrorCode

from tests.cluster.helpers import raw_produce

from .raw import RawConnection

R = messages.FetchRequest
T = R.FetchTopic


def fetch_v13(conn: RawConnection, topic_id: uuid.UUID, replica_id: int = -1):
    request = R(replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
                forgotten_topics_data=[], topics=[T(topic_id=topic_id, partitions=[
                    T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                     last_fetched_epoch=-1, log_start_offset=-1,
                                     partition_max_bytes=1 << 20)])])
    return conn.request(request, 13).responses[0]


def test_a_fetch_by_topic_id_reads_that_incarnation_only(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("incarnations", 1, 1)])["incarnations"].result(15)
    assert raw_produce(broker.bootstrap, "incarnations", b"first") == ErrorCode.NONE
    with RawConnection(broker.bootstrap) as conn:
        metadata = conn.request(messages.MetadataRequest(topics=[
            messages.MetadataRequest.MetadataRequestTopic(topic_id=None, name="incarnations")],
            allow_auto_topic_creation=False), 12)
        topic_id = metadata.topics[0].topic_id
        answer = fetch_v13(conn, topic_id)
        assert answer.topic_id == topic_id
        [partition] = answer.partitions
        assert partition.error_code == ErrorCode.NONE and b"first" in bytes(partition.records)
        stranger = fetch_v13(conn, uuid.uuid4())
        assert stranger.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        assert not stranger.partitions[0].records
