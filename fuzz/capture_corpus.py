"""Seed the fuzz corpus with the requests real clients send.

Starts a broker whose advertised address is a recording proxy, drives it through the proxy
with confluent-kafka (producer: idempotent, transactional-free; consumer group; admin),
kafka-python and aiokafka, and writes every client-to-broker frame (without its 4-byte size)
to ``fuzz/corpus/requests/<api>-v<version>-<client>-<hash>``. Identical frames are kept
once. Run it again after adding an API: ``.venv/bin/python fuzz/capture_corpus.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import struct
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

from oncelog.broker.process import BrokerProcess, free_port  # noqa: E402
from oncelog.protocol.api_keys import ApiKey  # noqa: E402

OUT = ROOT / "corpus" / "requests"
BATCHES_OUT = ROOT / "corpus" / "batches"
PER_KIND = 4  # frames kept per (API, version, client): more are near-duplicates


class RecordingProxy:
    """Forwards loopback TCP to the broker; splits the client's bytes into frames."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self.target_port = target_port
        self.client = "unknown"
        self.frames: dict[str, bytes] = {}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self.loop).result(5)

    async def _listen(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _serve(self, reader, writer) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1",
                                                                         self.target_port)
        await asyncio.gather(self._record(reader, upstream_writer),
                             self._pipe(upstream_reader, writer), return_exceptions=True)
        writer.close()
        upstream_writer.close()

    async def _record(self, reader, writer) -> None:
        while True:
            try:
                size_bytes = await reader.readexactly(4)
            except asyncio.IncompleteReadError:
                return
            (size,) = struct.unpack(">i", size_bytes)
            frame = await reader.readexactly(size)
            self._keep(frame)
            writer.write(size_bytes + frame)
            await writer.drain()

    async def _pipe(self, reader, writer) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()

    def _keep(self, frame: bytes) -> None:
        api_key, version = struct.unpack_from(">hh", frame)
        try:
            name = ApiKey(api_key).name.lower()
        except ValueError:
            name = f"api{api_key}"
        digest = hashlib.sha1(frame).hexdigest()[:12]
        self.frames.setdefault(digest, (f"{name}-v{version}-{self.client}-{digest}", frame))

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


def confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    seed = NewTopic("seed", 2, 1, config={"retention.ms": "3600000"})
    admin.create_topics([seed])["seed"].result(15)
    admin.create_partitions([NewPartitions("seed", 3)])["seed"].result(15)
    admin.describe_configs([ConfigResource("topic", "seed")])
    admin.list_topics(timeout=10)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                             "compression.type": codec})
        for i in range(20):
            producer.produce("seed", key=f"k{i}".encode(), value=f"{codec}-{i}".encode(),
                             headers=[("h", b"v")])
        assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "seed-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["seed"])
    seen = 0
    while seen < 100:
        message = consumer.poll(5)
        if message is None:
            break
        if message.error() is None:
            seen += 1
            consumer.commit(message, asynchronous=False)
    consumer.close()
    admin.list_consumer_groups().result(10)
    admin.describe_consumer_groups(["seed-group"])["seed-group"].result(10)
    admin.delete_topics(["seed-doomed"])  # an error answer, still a real request


def kafka_python(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip")
    for i in range(20):
        producer.send("seed", key=b"k", value=f"kp-{i}".encode())
    producer.flush(15)
    producer.close()
    consumer = KafkaConsumer("seed", bootstrap_servers=bootstrap, group_id="kp-group",
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    for _ in consumer:
        pass
    consumer.commit()
    consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.list_groups()
    admin.describe_groups(["kp-group"])
    admin.list_group_offsets("kp-group")
    admin.delete_group_offsets("kp-group", [TopicPartition("seed", 0)])
    admin.delete_groups(["kp-group"])
    admin.close()


def aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        for i in range(20):
            await producer.send_and_wait("seed", f"aio-{i}".encode())
        await producer.stop()
        consumer = AIOKafkaConsumer("seed", bootstrap_servers=bootstrap, group_id="aio-group",
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=3000)
            await consumer.commit()
        finally:
            await consumer.stop()

    asyncio.run(run())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        proxy = RecordingProxy(port)
        broker = BrokerProcess(Path(tmp) / "data", port=port, settings={
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}",
            "group.initial.rebalance.delay.ms": "0"})
        proxy.start()
        try:
            broker.start()
            for client, drive in (("confluent", confluent), ("kafkapython", kafka_python),
                                  ("aiokafka", aiokafka)):
                proxy.client = client
                try:
                    drive(f"127.0.0.1:{proxy.port}")
                except Exception as error:  # keep what was captured; say what failed
                    print(f"{client}: {type(error).__name__}: {error}", file=sys.stderr)
        finally:
            broker.kill()
            proxy.stop()
    OUT.mkdir(parents=True, exist_ok=True)
    kept: dict[str, int] = {}
    for name, frame in sorted(proxy.frames.values()):
        kind = name.rsplit("-", 1)[0]  # api-version-client
        kept[kind] = kept.get(kind, 0) + 1
        if kept[kind] <= PER_KIND:
            (OUT / name).write_bytes(frame)
    for name, frame in built_frames():
        (OUT / name).write_bytes(frame)
    batches = BATCHES_OUT
    batches.mkdir(parents=True, exist_ok=True)
    for path in OUT.glob("produce-*"):
        for batch in batches_in(path.read_bytes()):
            (batches / f"{path.name}-{hashlib.sha1(batch).hexdigest()[:8]}").write_bytes(batch)
    print(f"{sum(1 for _ in OUT.iterdir())} request frames in {OUT}, "
          f"{sum(1 for _ in batches.iterdir())} record batches in {batches}")


def built_frames() -> list[tuple[str, bytes]]:
    """Requests of the APIs we serve that the clients above did not send in this run,
    encoded by our own codec (so marked "built", not a client's name)."""
    from oncelog.protocol import messages
    requests = [
        (messages.DescribeClusterRequest(include_cluster_authorized_operations=False), 0),
        (messages.DeleteGroupsRequest(groups_names=["g"]), 2),
        (messages.OffsetDeleteRequest(group_id="g", topics=[
            messages.OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name="seed", partitions=[messages.OffsetDeleteRequest.OffsetDeleteRequestTopic
                                         .OffsetDeleteRequestPartition(partition_index=0)])]), 0),
        (messages.DescribeProducersRequest(topics=[
            messages.DescribeProducersRequest.TopicRequest(name="seed",
                                                           partition_indexes=[0, 1])]), 0),
        (messages.ListGroupsRequest(states_filter=["Stable"]), 4),
    ]
    frames = []
    for request, version in requests:
        header = struct.pack(">hhih", request.API_KEY, version, 1, 5) + b"built"
        if messages.is_flexible(request.API_KEY, version):
            header += b"\x00"
        frame = header + bytes(request.encode(version=version))
        name = ApiKey(request.API_KEY).name.lower()
        frames.append((f"{name}-v{version}-built-{hashlib.sha1(frame).hexdigest()[:12]}", frame))
    return frames


def batches_in(frame: bytes) -> list[bytes]:
    """The record batches of a captured produce request, as the broker's validator sees them."""
    from oncelog.protocol import messages
    from oncelog.protocol.batches import iter_headers
    header = messages.decode_request_header(frame)
    request = messages.decode_request(header, frame)
    found = []
    for topic in request.topic_data:
        for partition in topic.partition_data:
            records = partition.records or b""
            found += [records[p:p + h.size] for p, h in iter_headers(records)]
    return found


if __name__ == "__main__":
    main()
