"""A wall clock that tests move by hand: components take ``clock()`` -> ms, never time.time()."""

from __future__ import annotations

START_MS = 1_700_000_000_000


class FakeClock:
    def __init__(self, now: int = START_MS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now
