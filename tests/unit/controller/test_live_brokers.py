"""Which brokers Metadata lists: live ones, and for a few seconds the ones that just left
(``controller.live_brokers``: librdkafka moves a partition straight to its new leader only
while the dead leader is still listed)."""

from __future__ import annotations

from oncelog.controller.live_brokers import LiveBrokers
from oncelog.controller.store import BrokerRegistration


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def registrations(*node_ids: int) -> dict[int, BrokerRegistration]:
    return {n: BrokerRegistration(n, "127.0.0.1", 9090 + n) for n in node_ids}


def test_a_departed_broker_is_listed_for_a_while_but_is_not_live():
    clock = Clock()
    brokers = LiveBrokers(clock, departed_listed_s=10)
    brokers.update(registrations(1, 2, 3))
    brokers.update(registrations(2, 3))
    assert sorted(brokers.live) == [2, 3]
    assert [b.node_id for b in brokers.listed()] == [1, 2, 3]
    clock.now += 9.9
    assert [b.node_id for b in brokers.listed()] == [1, 2, 3]
    clock.now += 0.2
    assert [b.node_id for b in brokers.listed()] == [2, 3]


def test_a_broker_that_registers_again_is_listed_with_its_new_address():
    clock = Clock()
    brokers = LiveBrokers(clock)
    brokers.update(registrations(1, 2))
    brokers.update(registrations(2))
    back = {1: BrokerRegistration(1, "127.0.0.1", 7000), **registrations(2)}
    brokers.update(back)
    assert [(b.node_id, b.port) for b in brokers.listed()] == [(1, 7000), (2, 9092)]
    clock.now += 60
    assert [b.node_id for b in brokers.listed()] == [1, 2]
