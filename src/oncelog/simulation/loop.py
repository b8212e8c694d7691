"""An asyncio event loop on virtual time, for simulations that must replay exactly.

``SimulatedLoop`` is a selector event loop whose ``time()`` is a number the loop itself
moves: whenever nothing is ready to run, it jumps to the next timer instead of sleeping, so
``asyncio.sleep(5)`` takes no wall-clock time, and every run of the same code from the same
seed makes the same callbacks in the same order (asyncio runs ready callbacks first in,
first out; timers by deadline, then by the order they were set). Nothing here may wait on
a thread or a socket: a loop with nothing ready and no timer is stuck, and says so
(``SimulationStuck``) instead of hanging.
"""

from __future__ import annotations

import asyncio
import selectors
from typing import Any


class SimulationStuck(RuntimeError):
    """Nothing is ready and no timer is set: the simulated world waits on something real."""


class _VirtualSelector(selectors.DefaultSelector):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise SimulationStuck("the simulated loop has nothing to run and no timer set")
        if timeout > 0:
            self.now += timeout  # jump to the next timer instead of waiting for it
        # No socket is ever ready: the only one registered is the loop's self-pipe, whose
        # wake-ups (call_soon_threadsafe from this very thread) are already in the ready
        # queue. Not asking the kernel saves a system call per turn of the loop.
        return []


class SimulatedLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._virtual = _VirtualSelector()
        super().__init__(selector=self._virtual)
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._virtual.now

    def run_in_executor(  # type: ignore[override]
            self, executor: Any, func: Any, *args: Any) -> asyncio.Future[Any]:
        raise SimulationStuck(f"a simulation must not run {func!r} on a thread")
