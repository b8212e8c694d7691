"""Random and mutated frames thrown at a running broker.

Afterwards the broker process is alive, a normal client still produces and consumes, and no
record acknowledged before the fuzzing changed. Valid requests of several APIs are the seeds;
Hypothesis flips, truncates, extends and splices their bytes, and also sends pure noise.
"""

from __future__ import annotations

import socket
import struct

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oncelog.broker.process import BrokerProcess
from oncelog.client.reader import read_topic
from oncelog.protocol.messages import (CreateTopicsRequest, FetchRequest, ListOffsetsRequest,
                                       MetadataRequest, ProduceRequest)
from oncelog.protocol.records import make_batch
from tests.integration.raw import RawConnection

TOPIC = "fuzzed"


def _seed_frames() -> list[bytes]:
    conn = RawConnection.__new__(RawConnection)
    conn.correlation_id = 0
    T, P = ProduceRequest.TopicProduceData, ProduceRequest.TopicProduceData.PartitionProduceData
    FT = FetchRequest.FetchTopic
    LT = ListOffsetsRequest.ListOffsetsTopic
    requests = [
        (ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            T(name=TOPIC, partition_data=[P(index=0, records=make_batch([b"fuzz"] * 3))])]), 9),
        (ProduceRequest(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
            T(name=TOPIC, partition_data=[P(index=1, records=make_batch([b"z"], codec=2))])]), 3),
        (FetchRequest(replica_id=-1, max_wait_ms=10, min_bytes=1, max_bytes=1 << 20,
                      isolation_level=0, session_id=0, session_epoch=-1,
                      topics=[FT(topic=TOPIC, partitions=[FT.FetchPartition(
                          partition=0, fetch_offset=0, partition_max_bytes=1 << 16)])],
                      forgotten_topics_data=[], rack_id=""), 12),
        (MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                         allow_auto_topic_creation=False), 12),
        (ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[LT(name=TOPIC, partitions=[
            LT.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7),
        (CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="fz", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=1000, validate_only=True), 7),
    ]
    frames = []
    for request, version in requests:
        payload = conn.header(request.API_KEY, version) + bytes(request.encode(version=version))
        frames.append(struct.pack(">i", len(payload)) + payload)
    return frames


SEEDS = _seed_frames()


@st.composite
def mutated_frames(draw) -> bytes:
    frame = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "truncate", "extend", "splice", "size"]))
        if kind == "flip" and frame:
            index = draw(st.integers(0, len(frame) - 1))
            frame[index] ^= draw(st.integers(1, 255))
        elif kind == "truncate" and len(frame) > 1:
            del frame[draw(st.integers(1, len(frame) - 1)):]
        elif kind == "extend":
            frame += draw(st.binary(max_size=64))
        elif kind == "splice" and len(frame) > 8:
            index = draw(st.integers(4, len(frame) - 1))
            frame[index:index + 4] = draw(st.binary(min_size=4, max_size=4))
        elif kind == "size" and len(frame) >= 4:
            struct.pack_into(">i", frame, 0, draw(st.integers(-2**31, 2**31 - 1)))
    return bytes(frame)


frames = st.one_of(mutated_frames(), st.binary(min_size=1, max_size=300))


@pytest.fixture(scope="module")
def fuzz_target(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    broker = BrokerProcess(base / "data", log_path=base / "broker.log").start()
    try:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(15)
        acknowledged = {}
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for i in range(200):
            producer.produce(TOPIC, value=f"before-{i}".encode(), partition=i % 2,
                             on_delivery=lambda e, m: acknowledged.__setitem__(
                                 m.value(), (m.partition(), m.offset())) if e is None else None)
        producer.flush(15)
        assert len(acknowledged) == 200
        yield broker, acknowledged
    finally:
        broker.kill()


def _throw(bootstrap: str, data: bytes) -> None:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=2) as sock:
        sock.settimeout(0.1)
        try:
            sock.sendall(data)
            sock.recv(65536)  # an answer, a close, or a timeout: all acceptable
        except OSError:
            pass


@pytest.mark.slow
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batch=st.lists(frames, min_size=1, max_size=4))
def test_broker_survives_garbage(fuzz_target, batch):
    broker, _ = fuzz_target
    _throw(broker.bootstrap, b"".join(batch))
    assert broker.process.poll() is None, broker.log_tail()


@pytest.mark.slow
def test_after_fuzzing_clients_work_and_acknowledged_records_are_unchanged(fuzz_target):
    """Runs after the fuzzing test in this module (pytest keeps file order)."""
    broker, acknowledged = fuzz_target
    assert broker.process.poll() is None
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    producer.produce(TOPIC, value=b"after-fuzz", partition=0)
    assert producer.flush(15) == 0
    records = list(read_topic(broker.bootstrap, TOPIC))
    stored = {r.value: (r.partition, r.offset) for r in records}
    assert b"after-fuzz" in stored
    for value, place in acknowledged.items():
        assert stored.get(value) == place, value
    for partition in (0, 1):
        # Mutated-but-still-valid produce requests may have appended "fuzz" records too.
        offsets = [r.offset for r in records if r.partition == partition]
        assert offsets == list(range(len(offsets))), "the log stayed dense and ordered"
    log_text = broker.log_path.read_text()
    assert "Traceback" not in log_text, "an input reached an unexpected-error path"
