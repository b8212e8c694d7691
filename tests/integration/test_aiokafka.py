"""aiokafka (which speaks older protocol versions) against a real broker process."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


def test_produce_and_consume(broker):
    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                    compression_type="gzip")
        await producer.start()
        try:
            sent = [await producer.send_and_wait("aio", key=f"k{i}".encode(),
                                                 value=f"v{i}".encode(),
                                                 headers=[("h", b"x")]) for i in range(50)]
        finally:
            await producer.stop()
        assert [m.offset for m in sent] == list(range(50))

        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("aio", 0)])
            await consumer.seek_to_beginning()
            received = []
            while len(received) < 50:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 15)
                for records in batch.values():
                    received.extend(records)
            end = await consumer.end_offsets([TopicPartition("aio", 0)])
        finally:
            await consumer.stop()
        assert [r.value for r in received] == [f"v{i}".encode() for i in range(50)]
        assert received[3].key == b"k3" and list(received[3].headers) == [("h", b"x")]
        assert end[TopicPartition("aio", 0)] == 50

    asyncio.run(scenario())
