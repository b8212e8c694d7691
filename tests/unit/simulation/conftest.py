"""A clock the tests move by hand, and a MemoryZooKeeper on it; two simulated brokers
started for a scenario (``run_on_two_brokers``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from oncelog.simulation.cluster import Node, Settings, Simulation, World
from oncelog.simulation.zookeeper import MemoryZooKeeper


class Clock:
    """Seconds, as the simulation's loop keeps them; a test sets ``now``."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def zk(clock) -> MemoryZooKeeper:
    return MemoryZooKeeper(clock)


def run_on_two_brokers(tmp_path, scenario: Callable[[Simulation, World], Awaitable[None]],
                       settings: Settings) -> None:
    """Brokers 1 and 2 started, ZooKeeper's ticker running and a virtual second for them to
    hear of each other; then ``scenario(sim, world)`` on the simulation's loop."""
    sim = Simulation(1, settings, directory=tmp_path)
    world = sim.world

    async def main() -> None:
        ticker = asyncio.get_running_loop().create_task(sim._zookeeper_ticker())
        for node_id in (1, 2):
            world.nodes[node_id] = Node(world, node_id)
            await world.nodes[node_id].start()
        await asyncio.sleep(1.0)  # virtual: broker 1 hears of broker 2's registration
        await scenario(sim, world)
        ticker.cancel()

    try:
        sim.loop.run_until_complete(main())
    finally:
        sim._close()
