"""``oncelog demo``: the quick start's main job on the embedded defaults.

Starts a broker in a fresh data directory, creates a 3-partition topic, produces records
with an unmodified Kafka client (confluent-kafka, acks=all, keys, headers, lz4), reads them
back, kills the broker with ``kill -9``, restarts it and reads again, then prints what
happened: every acknowledged record present once, in order per partition, before and after
the crash. Exits non-zero if anything was lost, duplicated or reordered.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from .broker.process import BrokerProcess, free_port
from .client.reader import read_topic

TOPIC = "demo-orders"


def run_demo(records: int, data_dir: Path | None, port: int | None) -> bool:
    console = Console(width=100) if not Console().is_terminal else Console()
    base = Path(data_dir or tempfile.mkdtemp(prefix="oncelog-demo-"))
    broker = BrokerProcess(base / "data", port=port or _preferred_port(),
                           log_path=base / "broker.log")
    with broker:
        console.print(f"[bold]broker[/] pid {broker.pid} on {broker.bootstrap}, "
                      f"data in {broker.data_dir}, log in {broker.log_path}")
        _create_topic(broker.bootstrap)
        started = time.monotonic()
        acknowledged = _produce(broker.bootstrap, records)
        elapsed = time.monotonic() - started
        console.print(f"produced {records} records with confluent-kafka (acks=all, lz4): "
                      f"{len(acknowledged)} acknowledged in {elapsed:.2f} s")
        before = _check(broker.bootstrap, acknowledged)
        console.print(f"kill -9 of broker pid {broker.pid}, then restart")
        broker.restart(hard=True)
        after = _check(broker.bootstrap, acknowledged)
    table = Table(title="what the log holds")
    for column in ("read", "acknowledged", "delivered", "lost", "duplicated", "out of order"):
        table.add_column(column, justify="right")
    for label, result in (("before the crash", before), ("after kill -9 + restart", after)):
        table.add_row(label, *(str(result[k]) for k in
                               ("acknowledged", "delivered", "lost", "duplicated", "reordered")))
    console.print(table)
    ok = all(r["lost"] == r["duplicated"] == r["reordered"] == 0 for r in (before, after))
    console.print("[green]every acknowledged record is there once, in order[/]" if ok
                  else "[red]the log does not match what was acknowledged[/]")
    return ok


def _preferred_port() -> int:
    import socket
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", 9092))
            return 9092
        except OSError:
            return free_port()


def _create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(timeout=15)


def _produce(bootstrap: str, records: int) -> dict[str, tuple[int, int]]:
    acknowledged: dict[str, tuple[int, int]] = {}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "compression.type": "lz4"})

    def on_delivery(error, message) -> None:
        if error is None:
            acknowledged[message.value().decode()] = (message.partition(), message.offset())

    for number in range(records):
        key = f"customer-{number % 97}".encode()
        while True:
            try:
                producer.produce(TOPIC, key=key, value=f"order-{number}".encode(),
                                 headers=[("source", b"demo")], on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(30)
    return acknowledged


def _check(bootstrap: str, acknowledged: dict[str, tuple[int, int]]) -> dict[str, int]:
    seen: dict[str, int] = {}
    last_offset: dict[int, int] = {}
    reordered = 0
    for record in read_topic(bootstrap, TOPIC):
        value = (record.value or b"").decode()  # the demo's records all have values
        seen[value] = seen.get(value, 0) + 1
        if record.offset <= last_offset.get(record.partition, -1):
            reordered += 1
        last_offset[record.partition] = record.offset
        if acknowledged.get(value, (record.partition, record.offset)) != (record.partition,
                                                                           record.offset):
            reordered += 1  # present, but not where the broker said it put it
    return {"acknowledged": len(acknowledged), "delivered": sum(seen.values()),
            "lost": sum(1 for value in acknowledged if value not in seen),
            "duplicated": sum(count - 1 for count in seen.values() if count > 1),
            "reordered": reordered}
