"""The leader-epoch checkpoint of one partition: which leader epoch began at which offset
(Kafka's ``LeaderEpochFileCache`` and its ``leader-epoch-checkpoint`` file, KIP-101/KIP-279).

Entries ``(leader_epoch, start_offset)`` strictly increase in both fields. A leader adds one
when it takes over (its log end offset is where its epoch starts); a follower adds one when
it appends the first batch written in a newer epoch. With them a replica answers
OffsetForLeaderEpoch — "where did epoch E end in your log?" — which is how a returning or
deposed replica finds the point where its log diverged from the leader's and truncates
there, instead of trusting its high watermark (the KIP-101 data-loss and divergence cases).

The file is Kafka's text format: a version line (0), a count, then ``epoch offset`` lines;
it is rewritten whole, fsynced and renamed, so a crash leaves the old or the new list. Its
first version is not fsynced: a new partition's first epoch is written as the partition is
opened, on the event loop, and a topic of fifty partitions paid fifty fsyncs there (on
this machine 8 ms each, seconds under load: clients of every partition of the broker waited).
Losing that first version loses nothing - with no file, the partition rebuilds its epochs
from its batches' headers when it opens (``Partition._load_epoch_cache``).
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from pathlib import Path

from . import files

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / CHECKPOINT_FILE
        self.entries: list[tuple[int, int]] = self._read()
        self._written = self.path.exists()  # once it is, every rewrite is fsynced

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries})"

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, leader_epoch: int, start_offset: int) -> None:
        """Record that ``leader_epoch`` starts at ``start_offset`` (no-op if known). An entry
        that would break the ordering replaces the ones it contradicts, as Kafka's does:
        newer information about where epochs start wins."""
        if self.entries and self.entries[-1][0] == leader_epoch:
            return
        if self.entries and leader_epoch < self.entries[-1][0]:
            log.warning("%s: epoch %d at %d is older than the latest %s; ignored", self.path,
                        leader_epoch, start_offset, self.entries[-1])
            return
        kept = [(e, o) for e, o in self.entries if o < start_offset]
        self.entries = kept + [(leader_epoch, start_offset)]
        self._write()

    def end_offset_for(self, leader_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: the largest epoch <= ``leader_epoch`` we know and the offset
        where it ended (the next epoch's start, or our log end for the latest epoch).
        ``(UNDEFINED_EPOCH, UNDEFINED_OFFSET)`` when we know no such epoch."""
        if not self.entries or leader_epoch < self.entries[0][0]:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        epochs = [e for e, _ in self.entries]
        at = bisect_right(epochs, leader_epoch) - 1
        found = self.entries[at][0]
        if at + 1 < len(self.entries):
            return found, self.entries[at + 1][1]
        return found, log_end_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: epochs starting at or after it are gone."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Retention moved the log start: the epoch covering it now starts there."""
        if not self.entries or self.entries[0][1] >= start_offset:
            return
        later = [(e, o) for e, o in self.entries if o > start_offset]
        covering = [(e, o) for e, o in self.entries if o <= start_offset][-1]
        self.entries = [(covering[0], start_offset)] + later
        self._write()

    def clear(self) -> None:
        self.entries = []
        self._write()

    def _read(self) -> list[tuple[int, int]]:
        try:
            lines = self.path.read_text().split("\n")
        except FileNotFoundError:
            return []
        try:
            count = int(lines[1])
            entries = [tuple(int(v) for v in line.split()) for line in lines[2:2 + count]]
            if len(entries) != count or any(len(e) != 2 for e in entries):
                raise ValueError("entry count does not match")
        except (ValueError, IndexError) as error:
            # Kafka fails the log dir here; we rebuild from the batches instead (the caller
            # re-assigns epochs from the log's batch headers).
            log.error("%s is unreadable (%s); rebuilding it from the log", self.path, error)
            return []
        return [(e, o) for e, o in entries]

    def _write(self) -> None:
        lines = ["0", str(len(self.entries))] + [f"{e} {o}" for e, o in self.entries]
        files.replace(self.path, "\n".join(lines) + "\n", fsync=self._written)
        self._written = True
