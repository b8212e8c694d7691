"""The partition log on real files: offsets, reads, roll, retention, recovery, timestamps."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from oncelog.protocol.batches import (HEADER_SIZE, iter_headers, parse_header,
                                      set_log_append_time)
from oncelog.protocol.errors import ErrorCode, KafkaError
from oncelog.protocol.records import decode_records, make_batch
from oncelog.storage import FileRegion, Log, LogConfig, OffsetAndTimestamp
from tests.fake_clock import FakeClock

DAY_MS = 24 * 3600 * 1000

@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def open_log(path: Path, clock: FakeClock, **settings) -> Log:
    return Log.open(path / "topic-0", LogConfig(**settings), clock)


def batch(*values: bytes, **kwargs) -> bytearray:
    return bytearray(make_batch(list(values), **kwargs))


def records(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in whole batches ``data``."""
    out = []
    for position, header in iter_headers(data):
        out += [(r.offset, r.value) for r in decode_records(data[position:position + header.size])]
    return out


def read_all(log: Log, start: int | None = None) -> list[tuple[int, bytes]]:
    offset = log.log_start_offset if start is None else start
    out = []
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        got = records(data)
        out += [item for item in got if item[0] >= offset]
        offset = got[-1][0] + 1
    return out


def segment_files(log: Log, suffix: str = ".log") -> list[str]:
    return sorted(p.name for p in log.directory.iterdir() if p.name.endswith(suffix))


def fill(log: Log, count: int, size: int = 1) -> list[tuple[int, bytes]]:
    """Append ``count`` batches of ``size`` records each; return the expected records."""
    expected = []
    for i in range(count):
        values = [b"v%d-%d" % (i, j) for j in range(size)]
        info = log.append(batch(*values), leader_epoch=0)
        expected += list(zip(range(info.base_offset, info.last_offset + 1), values))
    return expected


# -- append and read ---------------------------------------------------------------------------

def test_append_assigns_offsets_and_patches_the_header(tmp_path, clock):
    log = open_log(tmp_path, clock)
    first = log.append(batch(b"a", b"b", b"c"), leader_epoch=7)
    buffer = batch(b"d") + batch(b"e", b"f")  # two batches in one append
    second = log.append(buffer, leader_epoch=7)

    assert (first.base_offset, first.last_offset, first.position) == (0, 2, 0)
    assert (second.base_offset, second.last_offset) == (3, 5)
    assert second.log_append_time_ms == -1
    assert (log.log_start_offset, log.log_end_offset) == (0, 6)
    headers = [header for _, header in iter_headers(buffer)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(3, 7), (4, 7)]
    assert log.read(3, 1 << 20) == bytes(buffer)
    assert read_all(log) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"e"), (5, b"f")]
    assert log.size_bytes == first.position + len(batch(b"a", b"b", b"c")) + len(buffer)


def test_append_reports_log_append_time(tmp_path, clock):
    log = open_log(tmp_path, clock)
    buffer = batch(b"a")
    set_log_append_time(buffer, 0, len(buffer), 12345)
    assert log.append(buffer, leader_epoch=0).log_append_time_ms == 12345
    assert log.offset_for_timestamp(12000) == OffsetAndTimestamp(0, 12345)


@pytest.mark.parametrize("buffer", [bytearray(), batch(b"a")[:-1], batch(b"a") + b"xx"])
def test_append_rejects_what_is_not_whole_batches(tmp_path, clock, buffer):
    log = open_log(tmp_path, clock)
    with pytest.raises(KafkaError) as error:
        log.append(buffer, leader_epoch=0)
    assert error.value.code is ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 0 and log.size_bytes == 0


def test_read_from_the_middle_of_a_batch_returns_the_whole_batch(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append(batch(b"a", b"b"), leader_epoch=0)
    log.append(batch(b"c", b"d", b"e"), leader_epoch=0)
    data = log.read(3, 1 << 20)
    assert parse_header(data).base_offset == 2
    assert records(data) == [(2, b"c"), (3, b"d"), (4, b"e")]


def test_read_returns_whole_batches_within_max_bytes(tmp_path, clock):
    log = open_log(tmp_path, clock)
    fill(log, 5)
    size = len(log.read(0, 1 << 20)) // 5
    assert len(log.read(0, 2 * size)) == 2 * size
    assert len(log.read(0, 3 * size - 1)) == 2 * size  # never part of a batch
    assert len(log.read(1, 1 << 20)) == 4 * size


def test_min_one_batch_returns_an_oversized_first_batch(tmp_path, clock):
    """KIP-74: a consumer whose max_bytes is below one batch still makes progress."""
    log = open_log(tmp_path, clock)
    log.append(batch(b"x" * 1000), leader_epoch=0)
    log.append(batch(b"y"), leader_epoch=0)
    assert records(log.read(0, 10)) == [(0, b"x" * 1000)]
    assert log.read(0, 10, min_one_batch=False) == b""


def test_read_never_includes_a_batch_at_or_past_max_offset(tmp_path, clock):
    log = open_log(tmp_path, clock)
    fill(log, 4, size=2)  # batches at 0, 2, 4, 6
    assert [o for o, _ in records(log.read(0, 1 << 20, max_offset=4))] == [0, 1, 2, 3]
    assert [o for o, _ in records(log.read(0, 1 << 20, max_offset=5))] == [0, 1, 2, 3, 4, 5]
    assert log.read(4, 1 << 20, max_offset=4) == b""
    assert log.read(0, 1 << 20, max_offset=0) == b""


@pytest.mark.parametrize("offset, max_bytes, max_offset", [
    (0, 1 << 20, None), (3, 1 << 20, None), (0, 2500, None), (1, 10, None),  # KIP-74
    (0, 1 << 20, 6), (2, 1 << 20, 5)])
def test_a_region_read_spans_the_bytes_a_plain_read_returns(tmp_path, clock, offset, max_bytes,
                                                            max_offset):
    """``region_min_bytes``: the same whole batches, sent from the file instead of read."""
    log = open_log(tmp_path, clock)
    fill(log, 5, size=2)  # batches at 0, 2, 4, 6, 8
    plain = bytes(log.read(offset, max_bytes, max_offset=max_offset))
    region = log.read(offset, max_bytes, max_offset=max_offset, region_min_bytes=1)
    assert isinstance(region, FileRegion) and len(region) == len(plain) > 0
    assert region.read() == plain
    assert log.read(offset, max_bytes, max_offset=max_offset,
                    region_min_bytes=len(plain) + 1) == plain  # smaller spans are read


def test_a_region_outlives_its_segment_and_closes_its_descriptor(tmp_path, clock):
    log = open_log(tmp_path, clock)
    fill(log, 3)
    expected = bytes(log.read(0, 1 << 20))
    region = log.read(0, 1 << 20, region_min_bytes=1)
    log.close()
    shutil.rmtree(tmp_path / "topic-0")
    assert region.read() == expected  # its own descriptor: retention cannot pull it away
    fd = region.fd
    del region
    with pytest.raises(OSError):
        os.fstat(fd)


def test_read_outside_the_log_is_offset_out_of_range(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=200, retention_bytes=1)
    fill(log, 10)
    log.apply_retention()
    assert log.log_start_offset > 0
    assert log.read(log.log_end_offset, 1 << 20) == b""
    for offset in (log.log_start_offset - 1, log.log_end_offset + 1):
        with pytest.raises(KafkaError) as error:
            log.read(offset, 1 << 20)
        assert error.value.code is ErrorCode.OFFSET_OUT_OF_RANGE


def test_reads_use_the_sparse_index_across_many_batches(tmp_path, clock):
    log = open_log(tmp_path, clock, index_interval_bytes=256)
    expected = fill(log, 300, size=3)
    for offset in (0, 1, 299, 450, 898, 899):
        assert records(log.read(offset, 1))[0][0] == offset - offset % 3
    assert read_all(log) == expected


# -- roll -------------------------------------------------------------------------------------

def test_rolls_by_size(tmp_path, clock):
    one = len(batch(b"v0-0"))
    log = open_log(tmp_path, clock, segment_bytes=3 * one)
    expected = fill(log, 10)
    assert log.segment_base_offsets == [0, 3, 6, 9]
    assert segment_files(log) == [f"{base:020d}.log" for base in (0, 3, 6, 9)]
    assert segment_files(log, ".index") == [f"{base:020d}.index" for base in (0, 3, 6)]
    assert read_all(log) == expected


def test_an_oversized_append_gets_a_segment_of_its_own(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=100)
    fill(log, 1)
    log.append(batch(b"x" * 500), leader_epoch=0)
    fill(log, 1)
    assert log.segment_base_offsets == [0, 1, 2]


def test_rolls_by_time(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_ms=DAY_MS)
    fill(log, 2)
    clock.now += DAY_MS
    fill(log, 1)
    assert log.segment_base_offsets == [0]
    clock.now += 1
    fill(log, 1)
    assert log.segment_base_offsets == [0, 3]


def test_roll_if_due_rolls_a_quiet_partition(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_ms=DAY_MS)
    assert not log.roll_if_due()  # empty: nothing to roll
    fill(log, 2)
    assert not log.roll_if_due()
    clock.now += DAY_MS + 1
    assert log.roll_if_due()
    assert log.segment_base_offsets == [0, 2]
    assert not log.roll_if_due()  # the new active segment is empty


# -- retention --------------------------------------------------------------------------------

def test_retention_by_time_deletes_old_segments(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=200, retention_ms=DAY_MS)
    old = [log.append(batch(b"old%d" % i, timestamp_ms=clock.now), 0) for i in range(6)]
    clock.now += DAY_MS // 2
    new = fill_at(log, clock.now, 6)
    segments_before = log.segment_base_offsets
    assert log.apply_retention() == 0
    clock.now += DAY_MS // 2 + 1  # old records are now older than a day, new ones are not

    deleted = log.apply_retention()

    assert deleted > 0
    assert log.log_start_offset == segments_before[deleted]
    assert log.log_start_offset <= new[0]
    assert log.log_start_offset > old[0].base_offset
    assert f"{segments_before[0]:020d}.log" not in segment_files(log)
    assert len(segment_files(log)) == len(segments_before) - deleted
    assert log.log_end_offset == 12


def fill_at(log: Log, timestamp_ms: int, count: int) -> list[int]:
    return [log.append(batch(b"new%d" % i, timestamp_ms=timestamp_ms), 0).base_offset
            for i in range(count)]


def test_retention_by_size_keeps_at_least_retention_bytes(tmp_path, clock):
    one = len(batch(b"v0-0"))
    log = open_log(tmp_path, clock, segment_bytes=2 * one, retention_bytes=5 * one,
                   retention_ms=-1)  # make_batch timestamps are 0: long expired
    expected = fill(log, 10)  # five segments of two batches
    assert log.apply_retention() == 2
    assert log.log_start_offset == 4
    assert log.size_bytes == 6 * one
    assert read_all(log) == expected[4:]
    assert segment_files(log) == [f"{base:020d}.log" for base in (4, 6, 8)]


def test_retention_never_loses_log_end_offset(tmp_path, clock):
    """Every segment expired: the log rolls and keeps an empty active segment, so the next
    record still gets the next offset and log_start_offset == log_end_offset."""
    log = open_log(tmp_path, clock, segment_bytes=200, retention_ms=DAY_MS)
    fill_at(log, clock.now, 8)
    clock.now += 2 * DAY_MS
    assert log.apply_retention() >= 2
    assert log.log_start_offset == log.log_end_offset == 8
    assert log.read(8, 1 << 20) == b""
    assert log.append(batch(b"next"), leader_epoch=0).base_offset == 8
    log.close()
    assert open_log(tmp_path, clock).log_end_offset == 9


def test_retention_spares_segments_above_the_high_watermark(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=200, retention_ms=DAY_MS)
    fill_at(log, clock.now, 8)
    clock.now += 2 * DAY_MS
    bases = log.segment_base_offsets
    log.apply_retention(high_watermark=bases[2])
    assert log.log_start_offset == bases[2]


# -- reopen and recovery ----------------------------------------------------------------------

def test_reopen_after_close_keeps_everything(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300, index_interval_bytes=64)
    expected = fill(log, 20, size=2)
    bases = log.segment_base_offsets
    log.close()
    log = open_log(tmp_path, clock, segment_bytes=300, index_interval_bytes=64)
    assert log.segment_base_offsets == bases
    assert read_all(log) == expected
    assert log.append(batch(b"z"), leader_epoch=1).base_offset == 40


def test_reopen_without_close_like_a_killed_process(tmp_path, clock):
    """Copying the directory of a log still open gives what kill -9 leaves behind: data
    in the files, the active segment's indexes never written."""
    log = open_log(tmp_path, clock, segment_bytes=300)
    expected = fill(log, 20, size=2)
    shutil.copytree(log.directory, tmp_path / "copy" / "topic-0")
    assert not (tmp_path / "copy" / "topic-0" / f"{log.segment_base_offsets[-1]:020d}.index"
                ).exists()
    recovered = open_log(tmp_path / "copy", clock, segment_bytes=300)
    assert read_all(recovered) == expected
    assert recovered.log_end_offset == 40


def test_kill_9_mid_append_loses_nothing_appended(tmp_path):
    """A real process appending in a loop is killed with SIGKILL; every append it reported
    must be there after recovery, at the same offsets."""
    directory = tmp_path / "topic-0"
    script = f"""
import sys
from oncelog.storage import Log, LogConfig
from oncelog.protocol.records import make_batch
log = Log.open({str(directory)!r}, LogConfig(segment_bytes=20000), lambda: 0)
i = 0
while True:
    info = log.append(bytearray(make_batch([b"%d" % i] * 3)), 0)
    print(info.last_offset, flush=True)
    i += 1
"""
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        lines = [process.stdout.readline() for _ in range(2000)]
    finally:
        process.kill()
        process.wait()
    acknowledged = int(lines[-1])
    log = Log.open(directory, LogConfig(segment_bytes=20000), FakeClock())
    assert log.log_end_offset > acknowledged
    got = read_all(log)
    assert [offset for offset, _ in got] == list(range(log.log_end_offset))
    assert all(value == b"%d" % (offset // 3) for offset, value in got)


def torn(path: Path, last_batch: int) -> None:
    os.truncate(path, path.stat().st_size - last_batch // 2)


def garbage(path: Path, last_batch: int) -> None:
    with open(path, "ab") as file:
        file.write(b"\x00\x01garbage" * 10)


def flipped(path: Path, last_batch: int) -> None:
    with open(path, "r+b") as file:
        file.seek(path.stat().st_size - 3)  # inside the last record: covered by the CRC
        byte = file.read(1)
        file.seek(-1, os.SEEK_CUR)
        file.write(bytes([byte[0] ^ 0xFF]))


def zeroed_tail(path: Path, last_batch: int) -> None:
    with open(path, "ab") as file:  # a file system that grew the file but lost the data
        file.write(bytes(HEADER_SIZE + 10))


@pytest.mark.parametrize("damage", [torn, garbage, flipped, zeroed_tail])
def test_damaged_tail_is_cut_on_reopen(tmp_path, clock, damage, caplog):
    log = open_log(tmp_path, clock, segment_bytes=400)
    expected = fill(log, 12, size=2)
    last_batch = len(log.read(22, 1 << 20))
    active = log.directory / f"{log.segment_base_offsets[-1]:020d}.log"
    log.close()
    damage(active, last_batch)

    with caplog.at_level(logging.WARNING, logger="oncelog.storage"):
        log = open_log(tmp_path, clock, segment_bytes=400)

    keep = expected if damage in (garbage, zeroed_tail) else expected[:-2]
    assert read_all(log) == keep
    assert log.log_end_offset == len(keep)
    assert any(active.name in message and "truncating" in message
               for message in caplog.messages)
    info = log.append(batch(b"after"), leader_epoch=0)
    assert info.base_offset == len(keep)
    log.close()
    assert read_all(open_log(tmp_path, clock, segment_bytes=400)) == keep + [(len(keep), b"after")]


def test_deleted_index_files_are_rebuilt(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300, index_interval_bytes=64)
    expected = fill(log, 20, size=2)
    log.close()
    index_files = segment_files(log, ".index") + segment_files(log, ".timeindex")
    for name in index_files:
        (log.directory / name).unlink()
    log = open_log(tmp_path, clock, segment_bytes=300, index_interval_bytes=64)
    for base_offset in log.segment_base_offsets[:-1]:  # sealed ones are written back at once
        assert (log.directory / f"{base_offset:020d}.index").stat().st_size > 0
        assert (log.directory / f"{base_offset:020d}.timeindex").exists()
    assert read_all(log) == expected
    assert log.offset_for_timestamp(0) == OffsetAndTimestamp(0, 0)


def test_garbled_index_of_a_sealed_segment_is_rebuilt(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300, index_interval_bytes=64)
    expected = fill(log, 20, size=2)
    log.close()
    (log.directory / f"{0:020d}.index").write_bytes(b"\x7f" * 16)
    log = open_log(tmp_path, clock, segment_bytes=300, index_interval_bytes=64)
    assert read_all(log) == expected


def test_corruption_in_a_sealed_segment_ends_the_log_there(tmp_path, clock, caplog):
    """Recovery keeps the log a prefix of what was written, as Kafka's does: later segments
    go rather than leave a hole in the offsets."""
    log = open_log(tmp_path, clock, segment_bytes=300)
    expected = fill(log, 20, size=2)
    second = log.segment_base_offsets[1]
    log.close()
    (log.directory / f"{second:020d}.index").unlink()  # forces a rescan with CRCs
    flipped(log.directory / f"{second:020d}.log", 0)
    with caplog.at_level(logging.WARNING, logger="oncelog.storage"):
        log = open_log(tmp_path, clock, segment_bytes=300)
    assert log.segment_base_offsets[-1] == second
    assert read_all(log) == expected[:log.log_end_offset]
    assert log.log_end_offset < len(expected)
    assert any("deleting" in message for message in caplog.messages)


def test_a_new_directory_starts_at_offset_zero(tmp_path, clock):
    log = open_log(tmp_path, clock)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    assert log.read(0, 100) == b""
    assert log.offset_for_timestamp(0) is None and log.max_timestamp() is None
    assert segment_files(log) == [f"{0:020d}.log"]


def _lose_segments_after_a_power_cut(tmp_path, clock, **settings):
    """Four segments (0, 3, 6, 9) of one-record batches; then, as a power cut after rolls that
    were never fsynced, the last two segments' files come back empty."""
    one = len(batch(b"v0-0"))
    log = open_log(tmp_path, clock, segment_bytes=3 * one, **settings)
    expected = fill(log, 10)
    assert log.segment_base_offsets == [0, 3, 6, 9]
    log.close()
    for path in log.directory.iterdir():
        if path.name.startswith(("00000000000000000006.", "00000000000000000009.")):
            os.truncate(path, 0)
    return expected


def test_a_gap_between_segments_ends_the_log_where_its_durable_records_end(tmp_path, clock):
    """Regression: the log ended at the empty last segment's base offset (9), and a consumer
    at offset 6 waited for ever for records that did not exist."""
    expected = _lose_segments_after_a_power_cut(tmp_path, clock)
    log = open_log(tmp_path, clock)
    assert log.log_end_offset == 6
    assert read_all(log) == expected[:6]
    assert log.append(batch(b"next"), leader_epoch=0).base_offset == 6


def test_a_compacted_log_keeps_its_gaps(tmp_path, clock):
    """The cleaner leaves gaps (and empty segments holding their place) in compacted logs:
    there a gap is not a loss, and offsets must never be given out twice."""
    _lose_segments_after_a_power_cut(tmp_path, clock, compacted=True)
    log = open_log(tmp_path, clock, compacted=True)
    assert log.log_end_offset == 9


# -- timestamps -------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_offset_for_timestamp_is_record_precise_in_compressed_batches(tmp_path, clock, codec):
    log = open_log(tmp_path, clock, index_interval_bytes=0)
    for i in range(10):  # batch i: offsets 4i..4i+3, timestamps 1000i + 0, 10, 20, 30
        log.append(batch(*[b"%d" % j for j in range(4)], codec=codec,
                         timestamps=[1000 * i + 10 * j for j in range(4)]), 0)
    assert log.offset_for_timestamp(0) == OffsetAndTimestamp(0, 0)
    assert log.offset_for_timestamp(5011) == OffsetAndTimestamp(22, 5020)
    assert log.offset_for_timestamp(5020) == OffsetAndTimestamp(22, 5020)
    assert log.offset_for_timestamp(5031) == OffsetAndTimestamp(24, 6000)
    assert log.offset_for_timestamp(9030) == OffsetAndTimestamp(39, 9030)
    assert log.offset_for_timestamp(9031) is None
    assert log.max_timestamp() == OffsetAndTimestamp(39, 9030)


def test_offset_for_timestamp_takes_the_first_record_when_timestamps_go_back(tmp_path, clock):
    """ListOffsets returns the first offset whose timestamp is >= the target, not the record
    with the nearest timestamp: a later batch with an earlier time does not win."""
    log = open_log(tmp_path, clock, index_interval_bytes=0, segment_bytes=250)
    log.append(batch(b"a", b"b", timestamps=[100, 500]), 0)  # 0, 1
    log.append(batch(b"c", b"d", timestamps=[300, 200]), 0)  # 2, 3
    log.append(batch(b"e", timestamps=[400]), 0)  # 4
    log.append(batch(b"f", b"g", timestamps=[50, 600]), 0)  # 5, 6
    assert log.offset_for_timestamp(150) == OffsetAndTimestamp(1, 500)
    assert log.offset_for_timestamp(550) == OffsetAndTimestamp(6, 600)
    assert log.offset_for_timestamp(50) == OffsetAndTimestamp(0, 100)
    assert log.offset_for_timestamp(601) is None


def test_offset_for_timestamp_across_segments_and_restarts(tmp_path, clock):
    settings = dict(segment_bytes=500, index_interval_bytes=100)
    log = open_log(tmp_path, clock, **settings)
    for i in range(60):
        log.append(batch(b"x", b"y", timestamps=[10 * i, 10 * i + 5]), 0)
    assert len(log.segment_base_offsets) > 3
    answers = [log.offset_for_timestamp(t) for t in range(0, 600, 7)]
    log.close()
    log = open_log(tmp_path, clock, **settings)
    assert [log.offset_for_timestamp(t) for t in range(0, 600, 7)] == answers
    for t, answer in zip(range(0, 600, 7), answers):
        i, rest = divmod(t, 10)
        expected = (2 * i, 10 * i) if rest == 0 else (2 * i + 1, 10 * i + 5) if rest <= 5 \
            else (2 * i + 2, 10 * i + 10)
        assert answer == OffsetAndTimestamp(*expected)


def test_max_timestamp_is_the_earliest_record_with_the_largest_time(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=200)
    log.append(batch(b"a", b"b", timestamps=[10, 90]), 0)
    log.append(batch(b"c", b"d", b"e", timestamps=[20, 95, 95]), 0)
    log.append(batch(b"f", timestamps=[95]), 0)
    log.append(batch(b"g", timestamps=[30]), 0)
    assert log.max_timestamp() == OffsetAndTimestamp(3, 95)
    log.close()
    assert open_log(tmp_path, clock).max_timestamp() == OffsetAndTimestamp(3, 95)


# -- truncation, flush, deletion --------------------------------------------------------------

def test_truncate_to_within_and_across_segments(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300, index_interval_bytes=64)
    expected = fill(log, 20, size=2)
    log.truncate_to(33)  # mid-batch: the batch 32..33 goes whole
    assert log.log_end_offset == 32
    assert read_all(log) == expected[:32]
    bases = log.segment_base_offsets
    log.truncate_to(bases[1] + 2)
    assert log.segment_base_offsets == bases[:2]
    assert read_all(log) == expected[:bases[1] + 2]
    assert log.append(batch(b"new"), 1).base_offset == bases[1] + 2
    log.close()
    log = open_log(tmp_path, clock, segment_bytes=300, index_interval_bytes=64)
    assert read_all(log) == expected[:bases[1] + 2] + [(bases[1] + 2, b"new")]


def test_truncate_to_recomputes_timestamps(tmp_path, clock):
    log = open_log(tmp_path, clock, index_interval_bytes=0)
    log.append(batch(b"a", timestamps=[10]), 0)
    log.append(batch(b"b", timestamps=[99]), 0)
    log.truncate_to(1)
    assert log.max_timestamp() == OffsetAndTimestamp(0, 10)
    assert log.offset_for_timestamp(50) is None


def test_truncate_below_the_log_start_restarts_the_log_there(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=200, retention_bytes=1)
    fill(log, 10)
    log.apply_retention()
    start = log.log_start_offset
    log.truncate_to(start - 2)
    assert (log.log_start_offset, log.log_end_offset) == (start - 2, start - 2)
    assert log.append(batch(b"a"), 0).base_offset == start - 2


def test_flush_while_another_thread_appends(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=500, retention_bytes=2000)
    stop = threading.Event()
    errors = []

    def flusher():
        while not stop.is_set():
            try:
                log.flush()
            except Exception as error:  # pragma: no cover - reported below
                errors.append(error)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for _ in range(20):
            fill(log, 10)
            log.apply_retention()
    finally:
        stop.set()
        thread.join()
    log.flush()
    assert errors == []
    assert log.log_end_offset == 200


def test_closed_log_refuses_work_and_delete_removes_the_directory(tmp_path, clock):
    log = open_log(tmp_path, clock)
    fill(log, 2)
    log.close()
    log.flush()  # harmless after close
    with pytest.raises(KafkaError):
        log.append(batch(b"a"), 0)
    log = open_log(tmp_path, clock)
    log.delete()
    assert not log.directory.exists()


@pytest.mark.parametrize("settings", [dict(segment_bytes=0), dict(segment_bytes=1 << 31),
                                      dict(retention_ms=-2), dict(retention_bytes=-5),
                                      dict(segment_ms=0), dict(index_interval_bytes=-1)])
def test_config_rejects_impossible_values(settings):
    with pytest.raises(ValueError):
        LogConfig(**settings)
