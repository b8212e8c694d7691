"""oncelog's own ``ZooKeeperMetadataStore`` on a simulated broker: over a
``MemoryKazooClient`` of the simulation's ``MemoryZooKeeper``, with what a real connection
would do done when the simulation says.

The simulation's ticker calls ``heartbeat()`` (kazoo's pings, while the broker reaches
ZooKeeper) and ``carry_events()`` (watch notifications and kazoo's queued callbacks reach
the broker, while it reaches ZooKeeper). A cut link is ``disconnected()`` (kazoo's
SUSPENDED) and, once healed, ``reconnected()``: the same session if ZooKeeper has kept it
(CONNECTED: the store reports WATCHES_RESET and the broker reads everything again), or, if
it expired meanwhile, kazoo's LOST then CONNECTED with a new session (SESSION_LOST,
SESSION_RESTORED: the broker registers again). ``abandon()`` is kill -9: the session is
left on the server until it expires.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kazoo.protocol.states import KazooState

from ..config import BrokerConfig
from ..controller.zookeeper_store import ZooKeeperMetadataStore
from .kazoo_client import MemoryKazooClient
from .zookeeper import MemoryZooKeeper

if TYPE_CHECKING:
    from .cluster import Network, Node

CONNECT = "sim:2181/oncelog"


def _retry_clock() -> tuple[Callable[[], float], Callable[[float], None]]:
    """A clock that only sleeping moves, and the sleep."""
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    return (lambda: now[0]), sleep


class SimulatedZooKeeperStore(ZooKeeperMetadataStore):
    def __init__(self, server: MemoryZooKeeper, node: Node, config: BrokerConfig) -> None:
        session_ms = config["zookeeper.session.timeout.ms"]
        self.server = server
        self.memory_client = MemoryKazooClient(server, hosts=CONNECT, timeout=session_ms / 1000)
        super().__init__(CONNECT, session_timeout_ms=session_ms, node_id=node.node_id,
                         client=self.memory_client)
        self.node = node
        self.connected = True
        # A request's retries (kazoo answered "connection closed": a store whose broker was
        # killed) back off until the store's request timeout; every attempt fails at once,
        # with nothing sent, so here the backing off passes on a clock of its own instead
        # of seconds of the wall clock: the same attempts, in no time.
        self._retry_clock, self._retry_sleep = _retry_clock()

    def heartbeat(self) -> None:
        if self.connected and not self._closing:
            self.memory_client.heartbeat()

    def carry_events(self, network: Network) -> None:
        if self.connected and not self._closing:
            client = self.memory_client  # (nothing waiting: nothing to do, ten times a second)
            if client.pending_callbacks() or self.server.has_events(client.session_id):
                client.deliver_events()

    def disconnected(self) -> None:
        if self.connected:
            self.connected = False
            self._on_session_state(KazooState.SUSPENDED)

    def reconnected(self) -> None:
        if self.connected or self._closing:
            return
        self.connected = True
        if self.server.is_alive(self.memory_client.session_id):
            self._on_session_state(KazooState.CONNECTED)
        self.memory_client.heartbeat()  # an expired session: LOST, then a new one
        self.memory_client.deliver_events()

    def expire_session(self) -> None:
        """ZooKeeper ends our session (the broker learns of it at its next ping or request)."""
        session_id = self.memory_client.session_id
        if session_id is not None:
            self.server.expire(session_id)

    def abandon(self) -> None:
        """kill -9: nothing more is sent; ZooKeeper expires the session in its time."""
        self._closing = True
