"""A segment's aborted-transaction index: Kafka's ``.txnindex`` file (KIP-98).

``<base_offset:020d>.txnindex`` beside the segment's ``.log``; one entry per transaction that
was aborted by a marker written into that segment, in the order the markers were written.
An entry is 34 bytes, big-endian, exactly Kafka's ``AbortedTxn``::

    version int16 (0) | producer_id int64 | first_offset int64 | last_offset int64
    | last_stable_offset int64

``first_offset`` is the transaction's first record on this partition, ``last_offset`` the
offset of its ABORT marker (so the entry lives in the marker's segment, which may be later
than the one holding ``first_offset``), ``last_stable_offset`` the partition's LSO when the
marker was written, not counting the transaction itself (Kafka's
``ProducerStateManager.lastStableOffset(completedTxn)``): the first offset of the earliest
other transaction still open, or ``last_offset + 1``.

Invariants: entries' ``last_offset`` strictly increase and lie inside the segment's offsets;
the file holds exactly the entries in memory (appended through, one ``os.write`` per abort;
cut by ``truncate_to``; replaced whole, temp file and rename, by ``replace``, or by
compaction, which drops an entry with its marker and renames a new file in place: a
segment's fresh ``TransactionIndex`` then reads it). A missing file
means no aborted transaction: segments written before transactions existed have none.

Reads: ``collect`` answers a ``read_committed`` fetch's question - which aborted
transactions overlap [fetch offset, upper bound) - and whether later segments need asking
(Kafka's ``TransactionIndex.collectAbortedTxns``): once an entry's ``last_stable_offset``
reaches the upper bound, every transaction aborted later began at or after the bound.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

from . import files

logger = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
VERSION = 0
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return ENTRY.pack(VERSION, self.producer_id, self.first_offset, self.last_offset,
                          self.last_stable_offset)


def encode_entries(entries: list[AbortedTxn]) -> bytes:
    return b"".join(entry.to_bytes() for entry in entries)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Whole entries of version 0; a torn last entry or an entry of another version ends
    the list there (what follows cannot be trusted)."""
    entries = []
    for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, producer_id, first, last, stable = ENTRY.unpack_from(data, position)
        if version != VERSION:
            break
        entries.append(AbortedTxn(producer_id, first, last, stable))
    return entries


class TransactionIndex:
    """The entries of one segment's ``.txnindex``, loaded from the file on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path.name}, {len(self.entries)} entries)"

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def _load(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []  # no aborted transaction (or a segment older than transactions)
        entries = decode_entries(data)
        if len(entries) * ENTRY_SIZE != len(data):
            logger.warning("%s: %d bytes, of which only %d entries are whole and of version "
                           "%d; keeping those", self.path, len(data), len(entries), VERSION)
            self._write_whole(entries)
        return entries

    def append(self, entry: AbortedTxn) -> None:
        """Add the entry of an abort marker just written to the segment (one ``os.write``)."""
        entries = self.entries
        if entries and entry.last_offset <= entries[-1].last_offset:
            raise ValueError(f"{self.path.name}: entry {entry} does not follow "
                             f"{entries[-1]}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, entry.to_bytes())
        finally:
            os.close(fd)
        entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Forget entries whose marker is at ``offset`` or later (their batches were cut)."""
        entries = self.entries
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep == len(entries):
            return
        del entries[keep:]
        if keep:
            os.truncate(self.path, keep * ENTRY_SIZE)
        else:
            self.path.unlink(missing_ok=True)

    def replace(self, entries: list[AbortedTxn]) -> None:
        """Hold exactly ``entries`` from now on (recovery's rebuild); the file is replaced
        whole and fsynced, so a crash leaves the old file or the new one."""
        entries = sorted(entries, key=lambda entry: entry.last_offset)
        if entries == self.entries:
            return
        self._write_whole(entries)
        self._entries = entries

    def _write_whole(self, entries: list[AbortedTxn]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        files.replace(self.path, encode_entries(entries), fsync=True)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries of transactions that overlap [``fetch_offset``, ``upper_bound_offset``):
        marker at or after the fetch offset, first offset before the bound. The flag says the
        search is complete: no later segment can hold another such entry."""
        found = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._entries = []

    def forget(self) -> None:
        """Drop the loaded entries (the file was replaced from outside, e.g. compaction)."""
        self._entries = None
