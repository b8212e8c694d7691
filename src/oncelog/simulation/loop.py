# mypy: disable-error-code="attr-defined, has-type"
# (asyncio's loop and handle internals used here are not in typeshed)
"""An asyncio event loop on virtual time, for simulations that must replay exactly.

``SimulatedLoop`` is a selector event loop whose ``time()`` is a number the loop itself
moves: whenever nothing is ready to run, it jumps to the next timer instead of sleeping, so
``asyncio.sleep(5)`` takes no wall-clock time, and every run of the same code from the same
seed makes the same callbacks in the same order (asyncio runs ready callbacks first in,
first out; timers by deadline, then by the order they were set). Nothing here may wait on
a thread or a socket: a loop with nothing ready and no timer is stuck, and says so
(``SimulationStuck``) instead of hanging.

A simulation spends most of its time in the loop itself (thousands of turns per simulated
minute), so ``SimulatedLoop`` replaces asyncio's turn (``_run_once``) and its timer calls with
leaner ones that do exactly what asyncio's do, in the same order, with the same arithmetic
(``now += when - now``): no selector is asked (no socket is ever ready), and the timer heap
holds ``(when, handle)`` pairs, which compare as the handles themselves do (by ``when``
alone: a tie falls through to the handles, which are then neither less nor greater) but
in C, so the heap keeps the same shape and pops timers in the same order as asyncio's.
"""

from __future__ import annotations

import asyncio
import contextvars
import selectors
from asyncio import events, format_helpers
from heapq import heapify, heappop, heappush
from typing import Any

# asyncio's own bounds (base_events): a turn's longest wait, and when to rebuild the heap
_MAXIMUM_SELECT_TIMEOUT = 24 * 3600
_MIN_SCHEDULED_TIMER_HANDLES = 100
_MIN_CANCELLED_TIMER_HANDLES_FRACTION = 0.5


class SimulationStuck(RuntimeError):
    """Nothing is ready and no timer is set: the simulated world waits on something real."""


class _VirtualSelector(selectors.DefaultSelector):
    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        # Never asked (SimulatedLoop._run_once moves the clock itself): no socket is ever
        # ready; the only one registered is the loop's self-pipe, whose wake-ups
        # (call_soon_threadsafe from this very thread) are already in the ready queue.
        if timeout is None:
            raise SimulationStuck("the simulated loop has nothing to run and no timer set")
        return []


class _Handle(events.Handle):
    """asyncio's ``Handle``, made without asking the loop whether it debugs (it does not:
    ``SimulatedLoop`` makes these only then)."""

    __slots__ = ()

    def __init__(self, callback: Any, args: Any, loop: Any, context: Any) -> None:
        _set_up(self, callback, args, loop, context)


def _set_up(handle: Any, callback: Any, args: Any, loop: Any, context: Any) -> None:
    """What asyncio's ``Handle.__init__`` sets, outside debug mode."""
    handle._context = context if context is not None else contextvars.copy_context()
    handle._loop = loop
    handle._callback = callback
    handle._args = args
    handle._cancelled = False
    handle._repr = None
    handle._source_traceback = None


class _Timer(events.TimerHandle):
    """asyncio's ``TimerHandle``, likewise; cancelled as asyncio's is when not debugging."""

    __slots__ = ()

    def __init__(self, when: float, callback: Any, args: Any, loop: Any, context: Any) -> None:
        _set_up(self, callback, args, loop, context)
        self._when = when
        self._scheduled = False

    def cancel(self) -> None:
        if not self._cancelled:
            if self._scheduled:  # the loop's _timer_handle_cancelled
                self._loop._timer_cancelled_count += 1
            self._cancelled = True
            self._callback = None
            self._args = None  # type: ignore[assignment]


class SimulatedLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._now = 0.0
        super().__init__(selector=_VirtualSelector())
        self._clock_resolution = 1e-9
        self._scheduled: list[tuple[float, events.TimerHandle]]
        if not self._debug:
            # Every Future, Task and Handle asks the loop get_debug(); a builtin answers
            # without a Python frame (set_debug(True) puts the method back)
            self.get_debug = bool  # type: ignore[method-assign]

    def set_debug(self, enabled: bool) -> None:
        super().set_debug(enabled)
        if enabled:
            self.__dict__.pop("get_debug", None)

    def time(self) -> float:
        return self._now

    def run_in_executor(  # type: ignore[override]
            self, executor: Any, func: Any, *args: Any) -> asyncio.Future[Any]:
        raise SimulationStuck(f"a simulation must not run {func!r} on a thread")

    # -- asyncio's timer calls and turn, leaner (see the module docstring) ------------------

    def call_later(self, delay: float, callback: Any, *args: Any,  # type: ignore[override]
                   context: Any = None) -> events.TimerHandle:
        if delay is None:
            raise TypeError("delay must not be None")
        return self.call_at(self._now + delay, callback, *args, context=context)

    def call_at(self, when: float, callback: Any, *args: Any,  # type: ignore[override]
                context: Any = None) -> events.TimerHandle:
        if when is None:
            raise TypeError("when cannot be None")
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if self._debug:
            self._check_thread()
            self._check_callback(callback, "call_at")
            timer: events.TimerHandle = events.TimerHandle(when, callback, args, self, context)
        else:
            timer = _Timer(when, callback, args, self, context)
        heappush(self._scheduled, (when, timer))
        timer._scheduled = True
        return timer

    def call_soon(self, callback: Any, *args: Any,  # type: ignore[override]
                  context: Any = None) -> events.Handle:
        if self._debug:
            return super().call_soon(callback, *args, context=context)
        if self._closed:
            raise RuntimeError("Event loop is closed")
        handle = _Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def _run_once(self) -> None:
        handle: Any
        scheduled = self._scheduled
        count = len(scheduled)
        if (count > _MIN_SCHEDULED_TIMER_HANDLES and self._timer_cancelled_count / count
                > _MIN_CANCELLED_TIMER_HANDLES_FRACTION):
            kept = []
            for entry in scheduled:
                if entry[1]._cancelled:
                    entry[1]._scheduled = False
                else:
                    kept.append(entry)
            heapify(kept)
            self._scheduled = scheduled = kept
            self._timer_cancelled_count = 0
        else:
            while scheduled and scheduled[0][1]._cancelled:
                self._timer_cancelled_count -= 1
                heappop(scheduled)[1]._scheduled = False

        ready = self._ready
        if not ready and not self._stopping:
            if not scheduled:
                raise SimulationStuck("the simulated loop has nothing to run and no timer set")
            timeout = min(max(0, scheduled[0][0] - self._now), _MAXIMUM_SELECT_TIMEOUT)
            if timeout > 0:
                self._now += timeout  # jump to the next timer instead of waiting for it

        end_time = self._now + self._clock_resolution
        while scheduled and scheduled[0][0] < end_time:
            handle = heappop(scheduled)[1]
            handle._scheduled = False
            ready.append(handle)

        for _ in range(len(ready)):
            handle = ready.popleft()
            if handle._cancelled:
                continue
            try:  # Handle._run, without its frame
                handle._context.run(handle._callback, *handle._args)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as error:
                self._callback_failed(handle, error)
        handle = None  # as asyncio: no cycle through a failed callback's traceback

    def _callback_failed(self, handle: events.Handle, error: BaseException) -> None:
        """What ``Handle._run`` does with a callback's exception."""
        source = format_helpers._format_callback_source(handle._callback, handle._args)
        context = {"message": f"Exception in callback {source}", "exception": error,
                   "handle": handle}
        if handle._source_traceback:
            context["source_traceback"] = handle._source_traceback
        self.call_exception_handler(context)
