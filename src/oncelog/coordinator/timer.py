"""Deadlines for a coordinator: schedule, replace or cancel an operation by key, and run the
operations whose time has come (Kafka's ``CoordinatorTimer`` and the purgatories' timeouts).

Owns: the pending deadlines. ``schedule`` with a key already pending replaces it (a heartbeat
pushes its member's session deadline back); ``cancel`` removes it. ``run_due`` runs, in
deadline order, every operation whose deadline is at or before ``clock()``, including ones
scheduled meanwhile for "now" (a zero delay). Operations are plain synchronous functions of
the coordinator, so each runs whole between two awaits.

Time is the injected ``clock()`` (milliseconds): unit tests move a fake clock and call
``run_due``; the broker awaits ``run()``, which sleeps until the earliest deadline and is woken
early when an earlier one is scheduled.

Invariant: every key in ``_entries`` has exactly one live heap item (same sequence number)
whose deadline is at or before the entry's; other heap items are stale and skipped when they
surface. Pushing a deadline back — what every heartbeat and offset commit does to its
member's session — only updates the entry; its heap item, surfacing early, is pushed again
with the new deadline. So the heap holds one item per key, not one per heartbeat.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Callable, Hashable

log = logging.getLogger(__name__)


class _Entry:
    __slots__ = ("deadline_ms", "sequence", "operation", "queued_ms")

    def __init__(self, deadline_ms: int, sequence: int, operation: Callable[[], None]) -> None:
        self.deadline_ms = deadline_ms
        self.sequence = sequence
        self.operation = operation
        self.queued_ms = deadline_ms  # the deadline of this entry's live heap item


class Timer:
    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self._entries: dict[Hashable, _Entry] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._sequence = 0
        self._wakeup: Callable[[], None] = lambda: None

    def __len__(self) -> int:
        return len(self._entries)

    def schedule(self, key: Hashable, delay_ms: int, operation: Callable[[], None]) -> None:
        deadline_ms = self.clock() + max(delay_ms, 0)
        entry = self._entries.get(key)
        if entry is not None and entry.queued_ms <= deadline_ms:
            entry.deadline_ms, entry.operation = deadline_ms, operation  # pushed back
            return
        earliest = self.next_deadline_ms()
        self._sequence += 1
        self._entries[key] = _Entry(deadline_ms, self._sequence, operation)
        heapq.heappush(self._heap, (deadline_ms, self._sequence, key))
        if earliest is None or deadline_ms < earliest:
            self._wakeup()

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._entries

    def deadline_ms(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.deadline_ms

    def next_deadline_ms(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def _drop_stale(self) -> None:
        """Make the heap's top a live item at its entry's real deadline."""
        heap = self._heap
        while heap:
            queued_ms, sequence, key = heap[0]
            entry = self._entries.get(key)
            if entry is None or entry.sequence != sequence:
                heapq.heappop(heap)  # cancelled or replaced
            elif entry.deadline_ms > queued_ms:
                entry.queued_ms = entry.deadline_ms  # pushed back since it was queued
                heapq.heapreplace(heap, (entry.deadline_ms, sequence, key))
            else:
                return

    def run_due(self) -> int:
        """Run every operation whose deadline has passed; return how many ran. An operation
        that fails is logged and the others still run: one broken group must not stop the
        session timeouts of every other group."""
        ran = 0
        now_ms = self.clock()
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ms:
                return ran
            _, _, key = heapq.heappop(self._heap)
            entry = self._entries.pop(key)
            ran += 1
            try:
                entry.operation()
            except Exception:
                log.exception("timer operation %r failed", key)

    async def run(self) -> None:
        """Drive the timer on the event loop until cancelled."""
        wakeup = asyncio.Event()
        self._wakeup = wakeup.set
        try:
            while True:
                next_deadline = self.next_deadline_ms()
                if next_deadline is None:
                    await wakeup.wait()
                else:
                    delay_s = max(next_deadline - self.clock(), 0) / 1000
                    if delay_s > 0:
                        try:
                            await asyncio.wait_for(wakeup.wait(), delay_s)
                        except TimeoutError:
                            pass
                wakeup.clear()
                self.run_due()
                await asyncio.sleep(0)  # let requests run between bursts of expirations
        finally:
            self._wakeup = lambda: None
