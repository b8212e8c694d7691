"""A simulated broker started twice at once runs as one broker (stop 41).

A restart the schedule asked for in its last step (a task, not begun) and the healing right
after it (which starts every broker that is not running) both started the same broker: the
later start superseded the earlier, but the earlier, back from connecting to ZooKeeper, went
on with the later one's membership - watching the store a second time and registering again.
Each store event then reached the broker twice, and it missed a broker registering again
after a lost session: "did not converge: broker-2 sees live brokers [2], the store [1, 2]"
(seed 3587, once the lease loop's schedule shifted). No real broker starts twice; the
simulation must not either.
"""

from __future__ import annotations

import asyncio

from oncelog.simulation.cluster import ZOOKEEPER, Settings

from .conftest import run_on_two_brokers

SETTINGS = Settings(brokers=2, steps=0, session_timeout_s=2.0)


def test_a_broker_started_twice_at_once_still_sees_a_broker_register_again(tmp_path):
    async def scenario(sim, world) -> None:
        one, two = world.nodes[1], world.nodes[2]
        two.crash()
        await asyncio.sleep(3.0)          # its session expires
        first = asyncio.get_running_loop().create_task(two.start())
        second = asyncio.get_running_loop().create_task(two.start())
        await asyncio.gather(first, second)
        # one membership, watching its store once
        assert len(two.store._listeners) == 1
        await asyncio.sleep(2.0)
        assert sorted(two.brokers.live) == [1, 2]
        # broker 1 cut off from ZooKeeper past its session, then back: it registers again
        cut = frozenset((one.name, ZOOKEEPER))
        world.network.cut.add(cut)
        one.store.disconnected()
        await asyncio.sleep(4.0)
        sim._heal(cut)
        await asyncio.sleep(5.0)
        assert sorted(one.brokers.live) == [1, 2]
        assert sorted(two.brokers.live) == [1, 2], "broker 2 missed broker 1's new registration"
        assert not world.failures

    run_on_two_brokers(tmp_path, scenario, SETTINGS)


def test_healing_does_not_start_a_broker_whose_restart_is_under_way(tmp_path):
    async def scenario(sim, world) -> None:
        two = world.nodes[2]
        two.crash()
        incarnation = two.incarnation
        two.start_requested = True        # as the schedule's restart does, then its task
        restart = asyncio.get_running_loop().create_task(sim._start(two))
        await sim._heal_all()
        await restart
        assert two.incarnation == incarnation + 1
        assert not any("restarted (healing)" in line for line in world.log)

    run_on_two_brokers(tmp_path, scenario, SETTINGS)
