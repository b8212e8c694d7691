"""The partition log against a model: a list of batches of values at their offsets.

Segments are tiny so that every rule crosses segment boundaries; restarts are both clean
(close, open) and crash-like (the files as a killed process leaves them), and a torn last
write must cost exactly the last batch. Whatever happens, reading from ``log_start_offset``
decodes to the model's values at the model's offsets.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from oncelog.protocol.batches import iter_headers
from oncelog.protocol.records import decode_records, make_batch
from oncelog.storage import Log, LogConfig
from tests.fake_clock import FakeClock

VALUES = st.lists(st.binary(max_size=40), min_size=1, max_size=6)
CODECS = st.sampled_from([0, 0, 0, 1, 2, 3, 4])


def decode(data: bytes) -> list[tuple[int, bytes]]:
    return [(record.offset, record.value)
            for position, header in iter_headers(data)
            for record in decode_records(data[position:position + header.size])]


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="oncelog-log-model-"))
        self.directory = self.root / "topic-0"
        self.generation = 0
        self.clock = FakeClock()
        self.config = LogConfig(segment_bytes=400, index_interval_bytes=96, retention_ms=-1)
        self.log = Log.open(self.directory, self.config, self.clock)
        self.batches: list[tuple[int, list[bytes]]] = []  # (base_offset, values) in the log
        self.log_start_offset = 0
        self.log_end_offset = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root)

    def _model_append(self, values: list[bytes]) -> None:
        self.batches.append((self.log_end_offset, values))
        self.log_end_offset += len(values)

    @rule(values=VALUES, codec=CODECS, leader_epoch=st.integers(0, 3))
    def append(self, values, codec, leader_epoch):
        info = self.log.append(bytearray(make_batch(values, codec=codec)), leader_epoch)
        assert (info.base_offset, info.last_offset) == (
            self.log_end_offset, self.log_end_offset + len(values) - 1)
        self._model_append(values)

    @rule(batches=st.lists(VALUES, min_size=2, max_size=4), codec=CODECS)
    def append_several_batches_at_once(self, batches, codec):
        buffer = bytearray(b"".join(make_batch(values, codec=codec) for values in batches))
        info = self.log.append(buffer, 0)
        assert info.base_offset == self.log_end_offset
        for values in batches:
            self._model_append(values)
        assert info.last_offset == self.log_end_offset - 1

    @rule()
    def restart(self):
        self.log.close()
        self.log = Log.open(self.directory, self.config, self.clock)

    @rule()
    def crash_and_recover(self):
        """Copy the files of the open log: what kill -9 leaves (active indexes unwritten)."""
        self.generation += 1
        crashed = self.root / f"crash-{self.generation}" / "topic-0"
        shutil.copytree(self.directory, crashed)
        self.log.close()
        shutil.rmtree(self.directory)
        self.directory = crashed
        self.log = Log.open(self.directory, self.config, self.clock)

    def _last_batch_is_in_active_segment(self) -> bool:
        return bool(self.batches) and self.batches[-1][0] >= self.log.segment_base_offsets[-1]

    @precondition(_last_batch_is_in_active_segment)
    @rule(cut=st.integers(min_value=1))
    def torn_last_write(self, cut):
        """The last batch, in the active segment, lost some tail bytes: recovery drops it."""
        last_base = self.batches[-1][0]
        last_size = len(self.log.read(last_base, 1 << 20))
        path = self.directory / f"{self.log.segment_base_offsets[-1]:020d}.log"
        self.log.close()
        with open(path, "r+b") as file:
            file.truncate(path.stat().st_size - (1 + cut % last_size))
        self.log = Log.open(self.directory, self.config, self.clock)
        self.batches.pop()
        self.log_end_offset = last_base

    @rule(data=st.data())
    def truncate_to(self, data):
        offset = data.draw(st.integers(max(0, self.log_start_offset - 2), self.log_end_offset + 2))
        self.log.truncate_to(offset)
        if offset >= self.log_end_offset:
            return
        if offset <= self.log_start_offset:  # emptied; restarts at offset
            self.batches, self.log_start_offset, self.log_end_offset = [], offset, offset
            return
        kept = [(base, values) for base, values in self.batches if base + len(values) <= offset]
        dropped = self.batches[len(kept):]
        self.batches, self.log_end_offset = kept, dropped[0][0]  # a straddling batch goes whole

    @rule(limit=st.integers(0, 1500))
    def retention_by_size(self, limit):
        self.log.config = replace(self.config, retention_bytes=limit)
        deleted = self.log.apply_retention()
        self.log.config = self.config
        start = self.log.log_start_offset
        assert self.log.log_end_offset == self.log_end_offset
        if deleted:
            assert self.log.size_bytes >= limit
        if len(self.log.segment_base_offsets) > 1:  # the first could not have gone too
            first = (self.directory / f"{start:020d}.log").stat().st_size
            assert self.log.size_bytes - first < limit
        self.batches = [(base, values) for base, values in self.batches if base >= start]
        self.log_start_offset = start
        assert start == (self.batches[0][0] if self.batches else self.log_end_offset)

    @rule(data=st.data(), max_bytes=st.integers(0, 600))
    def read_from_any_offset(self, data, max_bytes):
        if self.log_end_offset == self.log_start_offset:
            return
        offset = data.draw(st.integers(self.log_start_offset, self.log_end_offset - 1))
        got = decode(self.log.read(offset, max_bytes))
        base, values = next((b, v) for b, v in self.batches if b + len(v) > offset)
        assert got[:len(values)] == list(zip(range(base, base + len(values)), values))

    @invariant()
    def reads_match_model(self):
        assert (self.log.log_start_offset, self.log.log_end_offset) == (
            self.log_start_offset, self.log_end_offset)
        expected = [(base + i, value) for base, values in self.batches
                    for i, value in enumerate(values)]
        got, offset = [], self.log_start_offset
        while offset < self.log_end_offset:
            records = decode(self.log.read(offset, 300))
            got += records
            offset = records[-1][0] + 1
        assert got == expected


LogMachine.TestCase.settings = settings(max_examples=50, stateful_step_count=30, deadline=None)
TestLogModel = LogMachine.TestCase
