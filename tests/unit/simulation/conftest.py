"""A clock the tests move by hand, and a MemoryZooKeeper on it."""

from __future__ import annotations

import pytest

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
