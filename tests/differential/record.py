"""Record what real clients send, as conversations (``conversations/recorded_*.json``).

    .venv/bin/python -m tests.differential.record            # every scenario, files rewritten
    .venv/bin/python -m tests.differential.record producer   # one

Run from the repository's root. Each scenario starts an oncelog broker (``oncelog.testing``)
with a recording proxy in front of it (the verifier's ``FaultProxy``, which also rewrites
Metadata and FindCoordinator to keep the client behind it), runs a real client against the
proxy (confluent-kafka; kafka-python and aiokafka for ``*_group``, the Java
client's probe of tests/integration for ``java_transactions``), and writes every request
in the order the broker received it, over all the client's connections, with what the
replay needs to send it again:

- the names the scenario made become ``$topic``, ``$group``, ``$txn``;
- ids the broker chose (member ids, producer ids, topic ids), seen in an earlier response,
  become the tokens ``replay.py`` substitutes (``@member#1``); a Produce batch's producer id
  is kept as ``{"$bytes": ..., "producer_id": "@producer#1"}``;
- requests of APIs oncelog does not serve are left out (none today).

Recorded against oncelog, so the versions are ones both brokers serve (recorded against
Apache Kafka, a client would pick versions oncelog does not serve).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import struct
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from oncelog.protocol import messages
from oncelog.protocol.batches import HEADER_SIZE, parse_header
from oncelog.verify.proxy import FaultProxy, ThreadedProxy

from .replay import (CONVERSATIONS, NAME_BY_API, REQUEST_LEARNED, Run, _learn_raw, plain)

CLIENTS = {"kafka_python_group": "kafka-python", "aiokafka_group": "aiokafka",
           "java_transactions": "kafka-clients 3.9.1 (Java)"}  # else confluent-kafka


class _Tap:
    """A StreamReader that hands every whole frame it reads to ``seen``."""

    def __init__(self, reader: asyncio.StreamReader, seen: Callable[[bytes], None]) -> None:
        self.reader, self.seen, self.buffer = reader, seen, b""

    async def readexactly(self, size: int) -> bytes:
        data = await self.reader.readexactly(size)
        self.buffer += data
        if len(self.buffer) >= 4:
            (length,) = struct.unpack_from(">i", self.buffer)
            if len(self.buffer) == 4 + length:
                self.seen(self.buffer[4:])
                self.buffer = b""
        return data


class RecordingProxy(FaultProxy):
    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.events: list[tuple[int, str, bytes]] = []  # (connection, "request"/"response", frame)
        self.lock = threading.Lock()
        self.connections = 0

    def _directions(self, client_reader, client_writer, upstream_reader, upstream_writer, cut):
        self.connections += 1
        connection = self.connections

        def seen(kind: str) -> Callable[[bytes], None]:
            def add(frame: bytes) -> None:
                with self.lock:
                    self.events.append((connection, kind, frame))
            return add

        return super()._directions(_Tap(client_reader, seen("request")), client_writer,
                                   _Tap(upstream_reader, seen("response")), upstream_writer,
                                   cut)


def conversation_of(events: list[tuple[int, str, bytes]], names: dict[str, str],
                    description: str, client: str) -> dict:
    """The recorded frames as a conversation file's content."""
    run = Run({})
    pending: dict[tuple[int, int], dict] = {}
    steps: list[dict] = []
    for connection, kind, frame in events:
        if kind == "request":
            header = messages.decode_request_header(frame)
            if header.api_key not in messages.REQUESTS:
                continue
            request = messages.decode_request(header, frame)
            cls = messages.REQUESTS[header.api_key]
            fields = _request_fields(plain(request, cls._struct._fields, header.api_version,
                                           lambda data: _records_field(data, run)), run)
            step = {"api": NAME_BY_API[header.api_key], "version": header.api_version,
                    "client_id": header.client_id, "request": fields}
            steps.append(step)
            pending[(connection, header.correlation_id)] = step
        else:
            (correlation,) = struct.unpack_from(">i", frame)
            step = pending.pop((connection, correlation), None)
            if step is None:
                continue
            api = next(key for key, name in NAME_BY_API.items() if name == step["api"])
            flexible = messages.is_flexible(api, step["version"]) and step["api"] != "ApiVersions"
            cls = messages.RESPONSES[api]
            response = cls.decode(frame[4 + (1 if flexible else 0):], version=step["version"])
            _learn_raw(plain(response, cls._struct._fields, step["version"]), run)
    text = json.dumps({"description": description, "source": "recorded", "client": client,
                       "steps": steps}, indent=1)
    for token, name in names.items():
        text = text.replace(name, f"${token}")
    return json.loads(text)


def _request_fields(value: Any, run: Run, key: str | None = None) -> Any:
    known = {v: t for ns in run.learned.values() for v, t in ns.items()}
    if key in REQUEST_LEARNED and not isinstance(value, (dict, list)) and value in known:
        return known[value]
    if isinstance(value, dict):
        return {k: _request_fields(v, run, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_request_fields(item, run) for item in value]
    return value


def _records_field(data: bytes, run: Run) -> dict:
    known = run.learned.get("producer", {})
    out: dict[str, Any] = {"$bytes": base64.b64encode(data).decode()}
    if len(data) >= HEADER_SIZE and parse_header(data).producer_id in known:
        out["producer_id"] = known[parse_header(data).producer_id]
    return out


# -- scenarios -----------------------------------------------------------------------------

def _producer(bootstrap: str, names: dict[str, str]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(names["topic"], 2, 1)])[names["topic"]].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    for i in range(6):
        producer.produce(names["topic"], key=f"k{i % 3}".encode(), value=f"v{i}".encode(),
                         partition=i % 2, timestamp=1_700_000_000_000 + i)
    assert producer.flush(10) == 0


def _group(bootstrap: str, names: dict[str, str]) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(names["topic"], 1, 1)])[names["topic"]].result(10)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(names["topic"], value=f"g{i}".encode(), timestamp=1_700_000_000_000)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": names["group"],
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([names["topic"]])
    got = 0
    for _ in range(60):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
            if got == 3:
                break
    assert got == 3, got
    consumer.commit(asynchronous=False)
    consumer.close()


def _transactions(bootstrap: str, names: dict[str, str]) -> None:
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(names["topic"], 1, 1)])[names["topic"]].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": names["txn"]})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(names["topic"], value=b"committed", timestamp=1_700_000_000_000)
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": names["group"]})
    producer.send_offsets_to_transaction([TopicPartition(names["topic"], 0, 1)],
                                         consumer.consumer_group_metadata(), 10)
    producer.commit_transaction(10)
    producer.begin_transaction()
    producer.produce(names["topic"], value=b"aborted", timestamp=1_700_000_000_000)
    producer.flush(10)
    producer.abort_transaction(10)
    consumer.close()


def _kafka_python_group(bootstrap: str, names: dict[str, str]) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(names["topic"], 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(3):
        producer.send(names["topic"], value=f"p{i}".encode(), timestamp_ms=1_700_000_000_000)
    producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(names["topic"], bootstrap_servers=bootstrap,
                             group_id=names["group"], auto_offset_reset="earliest",
                             enable_auto_commit=False)
    got = 0
    for _ in range(30):
        got += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
        if got >= 3:
            break
    assert got == 3, got
    consumer.commit()
    consumer.close()


def _aiokafka_group(bootstrap: str, names: dict[str, str]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(names["topic"], 1, 1)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(names["topic"], f"a{i}".encode(),
                                             timestamp_ms=1_700_000_000_000)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(names["topic"], bootstrap_servers=bootstrap,
                                    group_id=names["group"], auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            got = 0
            for _ in range(30):
                batches = await consumer.getmany(timeout_ms=500)
                got += sum(len(v) for v in batches.values())
                if got >= 3:
                    break
            assert got == 3, got
            await consumer.commit()
        finally:
            await consumer.stop()

    asyncio.run(run())


def _java_transactions(bootstrap: str, names: dict[str, str]) -> None:
    import tempfile

    from tests.integration.java_client import JavaProbe
    topic, group, txn = names["topic"], names["group"], names["txn"]
    with tempfile.TemporaryDirectory(prefix="oncelog-java-") as classes:
        probe = JavaProbe.compile(Path(classes))
        probe.run(
            bootstrap, f"create topics={topic} partitions=2",
            f"producer name=p transactional.id={txn} linger.ms=5",
            "begin producer=p", f"send producer=p topic={topic} count=4 value=c key=k",
            "commit producer=p",
            "begin producer=p", f"send producer=p topic={topic} count=2 value=a",
            "abort producer=p",
            f"consumer name=c topics={topic} subscribe=true group.id={group} "
            "isolation.level=read_committed auto.offset.reset=earliest "
            "enable.auto.commit=false",
            "poll consumer=c count=4", "commit-offsets consumer=c",
            "begin producer=p", f"send producer=p topic={topic} count=1 value=o",
            "send-offsets producer=p consumer=c", "commit producer=p",
            "close name=c", "close name=p")


SCENARIOS = {
    "producer": (_producer, ("topic",), "confluent-kafka: an idempotent producer writes six "
                                         "records to two partitions (acks=all)."),
    "group": (_group, ("topic", "group"), "confluent-kafka: a consumer group member joins, reads "
                                          "three records, commits and leaves."),
    "transactions": (_transactions, ("topic", "txn", "group"),
                     "confluent-kafka: a transactional producer commits a record with its "
                     "consumer offsets, then aborts one."),
    "kafka_python_group": (_kafka_python_group, ("topic", "group"),
                           "kafka-python: a producer writes three records (acks=all); a "
                           "consumer group member reads them, commits and leaves."),
    "aiokafka_group": (_aiokafka_group, ("topic", "group"),
                       "aiokafka: a producer writes three records (acks=all); a consumer "
                       "group member reads them, commits and leaves."),
    "java_transactions": (_java_transactions, ("topic", "group", "txn"),
                          "kafka-clients 3.9.1 (Java): a transactional producer commits four "
                          "records and aborts two; a read_committed consumer group member "
                          "reads the four and commits; the producer commits a record with "
                          "the consumer's offsets; both close."),
}


def record(scenario: str) -> Path:
    from oncelog.testing import broker
    run, tokens, description = SCENARIOS[scenario]
    names = {token: f"rec-{token}-{uuid.uuid4().hex[:10]}" for token in tokens}
    with broker(wire_faults=False) as started:
        proxy = RecordingProxy(started.direct_bootstrap)
        with ThreadedProxy(proxy, "recording-proxy") as threaded:
            run(threaded.bootstrap, names)
        events = list(proxy.events)
    conversation = conversation_of(events, names, description,
                                   CLIENTS.get(scenario, "confluent-kafka"))
    path = CONVERSATIONS / f"recorded_{scenario}.json"
    path.write_text(json.dumps(conversation, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", help=f"of {', '.join(SCENARIOS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.scenarios if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {unknown[0]!r}; known: {', '.join(SCENARIOS)}")
    for scenario in args.scenarios or list(SCENARIOS):
        path = record(scenario)
        steps = len(json.loads(path.read_text())["steps"])
        print(f"{path}: {steps} requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
