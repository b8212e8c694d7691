"""Progress while a verify run is going: one live line per semantics on a terminal, plain
lines every few seconds in a log or CI, and one line per fault event either way.

``HistoryTally`` counts what the producers' history files hold so far (reading only what
was appended since the last look), so the progress shows produced and acknowledged counts
without the producers reporting anything but their history.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from .history import FaultEvent
from .landing import describe_window

__all__ = ["HistoryTally", "ProgressView", "describe_event"]

_TYPES = {b'{"type":"produced"': "produced", b'{"type":"acknowledged"': "acknowledged",
          b'{"type":"failed"': "failed"}


class HistoryTally:
    """Counts records by type in growing JSON Lines files."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = list(paths)
        self.counts: Counter[str] = Counter()
        self._offsets: dict[Path, int] = {}

    def update(self) -> Counter:
        for path in self.paths:
            try:
                with open(path, "rb") as file:
                    file.seek(self._offsets.get(path, 0))
                    data = file.read()
            except FileNotFoundError:
                continue
            end = data.rfind(b"\n") + 1  # complete lines only
            for line in data[:end].split(b"\n"):
                for prefix, kind in _TYPES.items():
                    if line.startswith(prefix):
                        self.counts[kind] += 1
                        break
            self._offsets[path] = self._offsets.get(path, 0) + end
        return self.counts


def describe_event(semantics: str, event: FaultEvent) -> str:
    """``at-least-once: kill-consumer inject at 14.7 s: target ..., landed ...``"""
    detail = dict(event.detail)
    text = f"{semantics}: {event.name} {event.action}"
    if "elapsed_s" in detail:
        text += f" at {detail.pop('elapsed_s'):.1f} s"
    if detail.get("waited_s"):
        text += f" (waited {detail.pop('waited_s'):g} s for its target to recover)"
    for key in ("at_s", "took_s", "delay_s", "waited_s"):
        detail.pop(key, None)
    if isinstance(detail.get("window"), dict):  # where a copy-job kill landed
        detail["window"] = describe_window(detail["window"])
    if detail:
        text += ": " + ", ".join(f"{key.replace('_', ' ')} {value}"
                                 for key, value in detail.items())
    return text


class ProgressView:
    """``begin(semantics, duration_s)``, ``update(...)`` as often as wanted, ``event(text)``
    for things worth a line of their own, ``close()`` at the end (or on Ctrl-C)."""

    def __init__(self, console: Console, *, plain_every_s: float = 5.0) -> None:
        self.console = console
        self.live = console.is_terminal
        self.plain_every_s = plain_every_s
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._semantics = ""
        self._last_plain = 0.0
        if self.live:
            self._progress = Progress(
                TextColumn("[bold]{task.description:<14}"), BarColumn(bar_width=24),
                TextColumn("{task.fields[phase]:<10}"), TimeElapsedColumn(),
                TextColumn("{task.fields[counts]}"), console=console, transient=False)
            self._progress.start()

    def begin(self, semantics: str, duration_s: float) -> None:
        self._semantics = semantics
        if self._progress is not None:
            self._task = self._progress.add_task(semantics, total=duration_s,
                                                 phase="starting", counts="")
        else:
            self.console.print(f"{semantics}: starting")

    def update(self, *, phase: str, elapsed_s: float, total_s: float, produced: int,
               acknowledged: int, delivered: int, faults_done: int, faults_total: int,
               force: bool = False) -> None:
        counts = (f"produced {produced}  acked {acknowledged}  delivered {delivered}  "
                  f"faults {faults_done}/{faults_total}")
        if self._progress is not None:
            if self._task is not None:  # begun
                self._progress.update(self._task, completed=elapsed_s, total=total_s,
                                      phase=phase, counts=counts)
            return
        now = time.monotonic()
        if force or now - self._last_plain >= self.plain_every_s:
            self._last_plain = now
            self.console.print(f"{self._semantics}: {phase} {elapsed_s:.0f}/{total_s:.0f} s, "
                               f"{counts}", highlight=False)

    def event(self, text: str) -> None:
        self.console.print(text, highlight=False)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
