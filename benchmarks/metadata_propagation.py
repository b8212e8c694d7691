"""How fast a new topic reaches every broker of a cluster (issue 30).

    .venv/bin/python benchmarks/metadata_propagation.py [--partitions 100 2000] [--topics 40]

For each ``--partitions`` figure P it starts, in a temporary directory, a cluster of its
own (``LocalCluster``: a ZooKeeper and three brokers on loopback), fills it with topics of
RF 3 until each broker holds P partitions, then creates ``--topics`` new topics one at a
time (1 partition, RF 3) through the brokers in turn with an unmodified client
(confluent-kafka's AdminClient). Figure per topic: from the CreateTopics answer to the
moment every broker's own Metadata answer lists the topic with a leader (each broker asked
over a socket of its own, every 2 ms). Prints p50, p99 and max per P (goal: p99 <= 200 ms at
2,000); raw figures go to ``benchmarks/results/metadata-<timestamp>.json``. Every process it
starts is stopped at the end, also on failure. A measuring tool: nothing passes or fails.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from throughput import source_version  # noqa: E402

from oncelog.cluster.local import LocalCluster  # noqa: E402
from oncelog.protocol import messages  # noqa: E402

SETTINGS = {"zookeeper.session.timeout.ms": "6000", "default.replication.factor": "3",
            "min.insync.replicas": "2", "max.partitions.per.topic": "10000"}
FILL_TOPIC_PARTITIONS = 50
POLL_S = 0.002


class MetadataSocket:
    """One broker's Metadata, asked over one connection (v9, flexible)."""

    VERSION = 9

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation_id = 0

    def leader_of(self, topic: str) -> int:
        """The leader of ``topic``-0 as this broker knows it; -1 if unknown."""
        self.correlation_id += 1
        body = messages.MetadataRequest(
            topics=[messages.MetadataRequest.MetadataRequestTopic(topic_id=None, name=topic)],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        client_id = b"propagation"
        header = struct.pack(">hhih", 3, self.VERSION, self.correlation_id,
                             len(client_id)) + client_id + b"\x00"
        payload = header + bytes(body.encode(version=self.VERSION))
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        # correlation id, then the flexible header's empty tagged fields
        response = messages.RESPONSES[3].decode(frame[5:], version=self.VERSION)
        for found in response.topics:
            if found.name == topic and found.error_code == 0 and found.partitions:
                return found.partitions[0].leader_id
        return -1

    def _read(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


def fill(cluster: LocalCluster, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    remaining, index = partitions, 0
    while remaining > 0:
        count = min(FILL_TOPIC_PARTITIONS, remaining)
        name = f"fill-{index}"
        admin.create_topics([NewTopic(name, count, 3)], request_timeout=120)[name].result(180)
        remaining -= count
        index += 1
    sockets = [MetadataSocket(cluster.broker(n).bootstrap) for n in sorted(cluster.brokers)]
    try:  # every broker has opened them all
        deadline = time.monotonic() + 300
        while not all(s.leader_of(f"fill-{index - 1}") >= 0 for s in sockets):
            if time.monotonic() > deadline:
                raise TimeoutError("the filled cluster did not settle in 300 s")
            time.sleep(0.2)
    finally:
        for s in sockets:
            s.close()
    time.sleep(5)  # let the ISR of everything settle before measuring


def measure(cluster: LocalCluster, topics: int, label: str) -> list[float]:
    from confluent_kafka.admin import AdminClient, NewTopic
    nodes = sorted(cluster.brokers)
    admins = [AdminClient({"bootstrap.servers": cluster.broker(n).bootstrap}) for n in nodes]
    sockets = [MetadataSocket(cluster.broker(n).bootstrap) for n in nodes]
    figures = []
    try:
        for i in range(topics):
            name = f"new-{label}-{i}"
            admin = admins[i % len(admins)]
            admin.create_topics([NewTopic(name, 1, 3)], request_timeout=30)[name].result(60)
            answered = time.monotonic()
            pending = set(range(len(sockets)))
            deadline = answered + 60
            while pending and time.monotonic() < deadline:
                pending = {b for b in pending if sockets[b].leader_of(name) < 0}
                if pending:
                    time.sleep(POLL_S)
            figures.append((time.monotonic() - answered) * 1000)
            time.sleep(0.1)
    finally:
        for s in sockets:
            s.close()
    return figures


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[100, 2000],
                        help="partitions each broker holds before measuring")
    parser.add_argument("--topics", type=int, default=40, help="new topics measured per size")
    parser.add_argument("--output", type=Path)
    options = parser.parse_args(argv)
    results = {"options": vars(options) | {"output": str(options.output)},
               "source": source_version(), "runs": {}}
    for partitions in options.partitions:
        directory = Path(tempfile.mkdtemp(prefix="oncelog-propagation-"))
        cluster = LocalCluster(directory, 3, settings=SETTINGS)
        try:
            cluster.start(timeout_s=120)
            print(f"filling: {partitions} partitions per broker ...", flush=True)
            fill(cluster, partitions)
            figures = measure(cluster, options.topics, str(partitions))
        finally:
            cluster.stop()
            shutil.rmtree(directory, ignore_errors=True)
        results["runs"][str(partitions)] = figures
        print(f"{partitions:>6} partitions/broker: new topic visible everywhere after "
              f"p50 {statistics.median(figures):.0f} ms, p99 {percentile(figures, 0.99):.0f} ms, "
              f"max {max(figures):.0f} ms ({len(figures)} topics)", flush=True)
    output = options.output or HERE / "results" / f"metadata-{time.strftime('%Y%m%d-%H%M%S')}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=1))
    print(f"raw figures: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
