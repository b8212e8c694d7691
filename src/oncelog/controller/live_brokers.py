"""This broker's view of which brokers are live, which one is the controller, and which
brokers Metadata lists.

Live brokers are the registrations the metadata store holds (ZooKeeper's ephemeral nodes).
Partition leaders, ISRs and offline replicas are always judged against them. The brokers a
Metadata response *lists* are those plus, for ``departed_listed_s``, the ones whose
registration just ended - a divergence from Kafka, for librdkafka (2.16):

When a broker vanishes from the broker list in the same Metadata response that names its
partitions' new leader, librdkafka decommissions the dead broker's handle while it moves the
partitions, reverts them to "no leader" ("Reverting from preferred replica N to leader -1"
in its debug log) and asks again only at its next one-second topic scan: a second added to
every failover (measured: leader kill -9 -> first acknowledgement 7.0 s with 6 s ZooKeeper
sessions; 6.0 s with the dead broker listed a little longer). Listed, the dead broker keeps
its handle, the partitions move straight to the new leader, and it drops out of a later
response harmlessly: a client connects to a broker only when it needs one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .store import BrokerRegistration

DEPARTED_LISTED_S = 10.0


class LiveBrokers:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic,
                 departed_listed_s: float = DEPARTED_LISTED_S) -> None:
        self._monotonic = monotonic
        self.departed_listed_s = departed_listed_s
        self.live: dict[int, BrokerRegistration] = {}
        self.controller_id = -1  # -1: none that we know of
        # True while this broker is cut off from the store (its lease lapsed): nothing it
        # knows is known to be current - who leads, who controls (``membership`` sets it)
        self.cut_off = False
        self._departed: dict[int, tuple[BrokerRegistration, float]] = {}

    def update(self, live: dict[int, BrokerRegistration]) -> None:
        """The store's registrations now; a broker missing from them departs now."""
        now = self._monotonic()
        for node_id, registration in self.live.items():
            if node_id not in live:
                self._departed[node_id] = (registration, now)
        for node_id in live:
            self._departed.pop(node_id, None)
        self.live = dict(live)

    def address(self, node_id: int) -> tuple[str, int] | None:
        """Where a live broker listens (host, port); None when it is not live."""
        registration = self.live.get(node_id)
        return None if registration is None else (registration.host, registration.port)

    def listed(self) -> list[BrokerRegistration]:
        """Live brokers and those departed less than ``departed_listed_s`` ago, by node id."""
        now = self._monotonic()
        self._departed = {n: (r, at) for n, (r, at) in self._departed.items()
                          if now - at < self.departed_listed_s}
        listed = {n: r for n, (r, _) in self._departed.items()}
        listed.update(self.live)
        return [listed[n] for n in sorted(listed)]
