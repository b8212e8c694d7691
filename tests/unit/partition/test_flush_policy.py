"""``log.flush.policy=ack`` on the partition: the high watermark - what consumers may read,
and what acks=all waits for - never passes what the leader has fsynced. Before the fsync a
consumer sees nothing of a new batch; after it, everything up to the fsynced end."""

from __future__ import annotations

from oncelog.partition import Partition, TopicSettings
from oncelog.protocol.records import make_batch
from oncelog.storage import Log
from tests.fake_clock import FakeClock

from .replication_harness import CONFIGS


class HeldFlusher:
    """Records flush requests; flushes only when told (the real one runs in a thread)."""

    def __init__(self) -> None:
        self.requests: list = []

    def request(self, partition_log: Log, on_flushed) -> None:
        self.requests.append((partition_log, on_flushed))

    def flush(self) -> None:
        requests, self.requests = self.requests, []
        for partition_log, on_flushed in requests:
            partition_log.flush()
            on_flushed()


def open_partition(tmp_path, flusher: HeldFlusher | None) -> Partition:
    clock = FakeClock()
    settings = TopicSettings.from_configs({**CONFIGS, "min.insync.replicas": "1"})
    partition = Partition("orders", 0, Log.open(tmp_path / "orders-0", settings.log_config,
                                                clock), settings, clock)
    partition.flush_requester = flusher.request if flusher else None
    return partition


def test_under_ack_the_high_watermark_waits_for_the_fsync(tmp_path):
    flusher = HeldFlusher()
    partition = open_partition(tmp_path, flusher)
    partition.append_records(make_batch([b"a", b"b"]), required_acks=1)
    assert partition.log_end_offset == 2
    assert partition.high_watermark == 0 and partition.log.durable_end_offset == 0
    assert len(flusher.requests) == 1
    flusher.flush()
    assert partition.high_watermark == 2
    partition.append_records(make_batch([b"c"]), required_acks=-1)
    assert partition.high_watermark == 2  # acks=all waits for the fsync through the HW
    flusher.flush()
    assert partition.high_watermark == 3


def test_a_truncation_takes_back_what_was_not_fsynced(tmp_path):
    flusher = HeldFlusher()
    partition = open_partition(tmp_path, flusher)
    partition.append_records(make_batch([b"a"]), required_acks=1)
    flusher.flush()
    partition.append_records(make_batch([b"b"]), required_acks=1)
    partition.log.truncate_to(1)
    partition.log.append(bytearray(make_batch([b"b2"])), 0)
    assert partition.log.durable_end_offset == 1  # b2 was never fsynced


def test_under_os_the_high_watermark_moves_at_append(tmp_path):
    partition = open_partition(tmp_path, None)
    partition.append_records(make_batch([b"a", b"b"]), required_acks=1)
    assert partition.high_watermark == 2
