"""The simulated loop keeps virtual time: sleeps cost nothing, order is the same every run,
and a world waiting on something real says so instead of hanging."""

from __future__ import annotations

import asyncio
import time

import pytest

from oncelog.simulation.loop import SimulatedLoop, SimulationStuck


def run(coroutine_function):
    loop = SimulatedLoop()
    try:
        return loop.run_until_complete(coroutine_function(loop))
    finally:
        loop.close()


async def _workers(loop: SimulatedLoop) -> list[tuple[float, str]]:
    order: list[tuple[float, str]] = []

    async def worker(name: str, delays: list[float]) -> None:
        for delay in delays:
            await asyncio.sleep(delay)
            order.append((round(loop.time(), 6), name))
    await asyncio.gather(worker("a", [1, 2, 3]), worker("b", [1.5, 1.5]), worker("c", [0, 0]))
    return order


async def _an_hour(loop: SimulatedLoop) -> float:
    await asyncio.sleep(3600)
    return loop.time()


def test_an_hour_of_sleeps_takes_no_time_and_replays_in_the_same_order():
    started = time.monotonic()
    first, second = run(_workers), run(_workers)
    assert first == second == [(0.0, "c"), (0.0, "c"), (1.0, "a"), (1.5, "b"), (3.0, "a"),
                               (3.0, "b"), (6.0, "a")]
    assert run(_an_hour) == 3600
    assert time.monotonic() - started < 1.0


def test_waiting_on_nothing_is_stuck_not_a_hang():
    with pytest.raises(SimulationStuck):
        run(lambda loop: asyncio.Event().wait())


def test_a_thread_is_refused():
    with pytest.raises(SimulationStuck):
        run(lambda loop: asyncio.to_thread(time.sleep, 0))
