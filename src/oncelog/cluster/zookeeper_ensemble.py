"""A ZooKeeper ensemble of N real servers (issue 31): what a cluster's brokers connect to when
they should outlive one ZooKeeper node.

``ZooKeeperEnsemble(directory, nodes=3).start()`` gives every node a client port and the two
quorum ports (``server.N=host:peer_port:election_port``), writes each node's ``zoo.cfg`` and
``myid`` under ``directory/node-N`` (its log in ``node-N/zookeeper.log``), starts them all,
and waits until a quorum serves: every node answers ``srvr`` with ``Mode: leader`` or
``Mode: follower``, exactly one of them the leader. ``connect_string`` lists every node
(``h1:p1,h2:p2,h3:p3``), so a client - kazoo in each broker - moves to another node when its
own dies. ``kill(n)`` (SIGKILL) and ``stop_node(n)`` end one node, ``start_node(n)`` starts
it again on its ports (it rejoins the quorum); ``stop()`` ends every node by pid (SIGTERM,
then SIGKILL), also as a context manager; ``modes()`` and ``leader()`` say who leads now.

With ``nodes=1`` the one node is the standalone server ``ZooKeeperProcess`` has always run, in
``directory`` itself: ``LocalCluster`` uses an ensemble for any count, and a cluster of one
ZooKeeper is unchanged. N must be odd: an even ensemble tolerates no more failures than the
odd one below it and needs a larger majority.

Where each node runs: ``hosts`` gives each node its bind and advertised address (default
``host`` for all, loopback) and ``command_prefixes`` the words put before its java command
(e.g. ``["ip", "netns", "exec", "ns1"]``, so the isolated mode can run each node inside a
network namespace of its own); see ``zookeeper_process`` for how ports are chosen there.

A majority keeps serving when a minority dies: with three nodes, a follower's death changes
nothing for clients connected elsewhere (those connected to it reconnect to another node with
their session), and the leader's death costs an election - the two followers drop their
clients, elect one of themselves and serve again, about a second at the 100 ms tick - after
which the sessions of clients that come back within their timeout live on (the new leader
restarts every session's timer when it takes over).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from ..served_process import free_port
from .zookeeper_process import (CLIENT_PORT, ELECTION_PORT, PEER_PORT, QuorumPeer,
                                ZooKeeperProcess, ZooKeeperStartError)

QUORUM_MODES = ("leader", "follower")


class ZooKeeperEnsemble:
    def __init__(self, directory: Path, nodes: int = 3, *, host: str = "127.0.0.1",
                 hosts: Sequence[str] | None = None,
                 command_prefixes: Sequence[Sequence[str]] | None = None,
                 tick_time_ms: int = 100, max_session_timeout_ms: int = 60_000,
                 heap_mb: int = 256) -> None:
        if nodes < 1 or nodes % 2 == 0:
            raise ValueError(f"a ZooKeeper ensemble has an odd number of nodes (1, 3, 5, ...), "
                             f"not {nodes}")
        hosts = list(hosts) if hosts is not None else [host] * nodes
        prefixes = [list(p) for p in command_prefixes] if command_prefixes is not None \
            else [[] for _ in range(nodes)]
        if len(hosts) != nodes or len(prefixes) != nodes:
            raise ValueError(f"{nodes} ZooKeeper nodes need {nodes} hosts and command "
                             f"prefixes, not {len(hosts)} and {len(prefixes)}")
        self.directory = Path(directory).absolute()
        self.count = nodes
        self.hosts = hosts
        self.command_prefixes = prefixes
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.heap_mb = heap_mb
        self.nodes: dict[int, ZooKeeperProcess] = {}  # server id (1-based) -> its process

    # -- building ------------------------------------------------------------------------------

    def _build(self) -> None:
        """Fresh ports for every node, and each node's process (not started)."""
        common = dict(tick_time_ms=self.tick_time_ms, heap_mb=self.heap_mb,
                      max_session_timeout_ms=self.max_session_timeout_ms)
        if self.count == 1:
            self.nodes = {1: ZooKeeperProcess(self.directory, host=self.hosts[0],
                                              command_prefix=self.command_prefixes[0],
                                              **common)}  # type: ignore[arg-type]
            return
        quorum, client_ports, taken = [], [], set[int]()
        for server_id, host in enumerate(self.hosts, start=1):
            client_port, peer_port, election_port = _three_ports(host, taken)
            client_ports.append(client_port)
            quorum.append(QuorumPeer(server_id, host, peer_port, election_port))
        self.nodes = {
            peer.server_id: ZooKeeperProcess(
                self.directory / f"node-{peer.server_id}", port=client_port, host=peer.host,
                command_prefix=self.command_prefixes[peer.server_id - 1],
                server_id=peer.server_id, quorum=quorum, **common)  # type: ignore[arg-type]
            for peer, client_port in zip(quorum, client_ports, strict=True)}

    @property
    def connect_string(self) -> str:
        """Every node's ``host:port``, comma-separated; a caller appends its chroot."""
        return ",".join(node.connect_string for node in self.nodes.values())

    address = connect_string

    def node(self, server_id: int) -> ZooKeeperProcess:
        return self.nodes[server_id]

    @property
    def pids(self) -> list[int]:
        return [node.pid for node in self.nodes.values() if node.pid is not None]

    # -- starting ------------------------------------------------------------------------------

    def start(self, timeout_s: float = 60.0) -> Self:
        """Start every node and wait until a quorum serves; on failure every node is stopped
        and ``ZooKeeperStartError`` names the node and its log. Free ports can be taken by
        someone else before a node binds them: a node that exits while starting is retried
        twice with new ports for all."""
        if any(self.is_running(server_id) for server_id in self.nodes):
            # Building anew would lose the running nodes' pids: nothing could stop them.
            raise ZooKeeperStartError(f"the ZooKeeper ensemble on {self.connect_string} runs "
                                      f"already; stop it first")
        attempts = 3
        for attempt in range(attempts):
            self._build()
            try:
                if self.count == 1:
                    self.nodes[1].start(timeout_s)
                    return self
                for node in self.nodes.values():
                    node.launch()
                exited = self._wait_for_quorum(timeout_s)
            except BaseException:
                self.stop()
                raise
            if exited is None:
                return self
            self.stop()
            if attempt + 1 == attempts:
                node = self.nodes[exited]
                raise ZooKeeperStartError(
                    f"ZooKeeper node {exited} exited while the ensemble started on "
                    f"{self.connect_string}; see {node.log_path}")
        raise AssertionError("unreachable")

    def _wait_for_quorum(self, timeout_s: float) -> int | None:
        """None once a quorum serves; the id of a node that exited first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for server_id, node in self.nodes.items():
                if node.process is not None and node.process.poll() is not None:
                    return server_id
            if self.has_quorum(every_node=True):
                return None
            time.sleep(0.1)
        modes = ", ".join(f"node {n}: {m or 'not serving'}" for n, m in self.modes().items())
        raise ZooKeeperStartError(
            f"the ZooKeeper ensemble on {self.connect_string} elected no leader within "
            f"{timeout_s:g} s ({modes}); see {self.nodes[1].log_path} and the other nodes' logs")

    def has_quorum(self, *, every_node: bool = False) -> bool:
        """One leader and followers serve (``every_node``: every running node serves as one of
        them), as their ``srvr`` answers say."""
        modes = [mode for server_id, mode in self.modes().items() if self.is_running(server_id)]
        serving = [mode for mode in modes if mode in QUORUM_MODES]
        if every_node and len(serving) != len(modes):
            return False
        return serving.count("leader") == 1 and len(serving) > self.count // 2

    def wait_for_quorum(self, timeout_s: float = 30.0) -> float:
        """Until a leader and a majority serve again (after a node died); the seconds it took."""
        started = time.monotonic()
        while not self.has_quorum():
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(f"the ZooKeeper ensemble on {self.connect_string} had no "
                                   f"quorum within {timeout_s:g} s ({self.modes()})")
            time.sleep(0.05)
        return time.monotonic() - started

    # -- looking -------------------------------------------------------------------------------

    def modes(self) -> dict[int, str | None]:
        """Per node: ``leader``, ``follower``, ``standalone``, or None (not serving)."""
        return {server_id: node.mode() if self.is_running(server_id) else None
                for server_id, node in self.nodes.items()}

    def leader(self) -> int | None:
        """The node that leads now, if one does (the single node of a one-node ensemble)."""
        for server_id, mode in self.modes().items():
            if mode in ("leader", "standalone"):
                return server_id
        return None

    def followers(self) -> list[int]:
        return [server_id for server_id, mode in self.modes().items() if mode == "follower"]

    def is_running(self, server_id: int) -> bool:
        process = self.nodes[server_id].process
        return process is not None and process.poll() is None

    # -- faults and stopping -------------------------------------------------------------------

    def kill(self, server_id: int) -> None:
        """SIGKILL node ``server_id`` (a crashed ZooKeeper)."""
        self.nodes[server_id].kill()

    def stop_node(self, server_id: int) -> None:
        self.nodes[server_id].stop()

    def start_node(self, server_id: int, timeout_s: float = 30.0) -> None:
        """Start node ``server_id`` again on its ports and wait until it serves (as a follower
        of the running quorum, or in a new election)."""
        node = self.nodes[server_id]
        if self.is_running(server_id):
            return
        node.start(timeout_s)

    def stop(self) -> None:
        """Every node by its pid: SIGTERM, then SIGKILL; followers first, so the leader does
        not see an election it cannot win."""
        leader = self.leader() if len(self.nodes) > 1 else None
        order = sorted(self.nodes, key=lambda server_id: server_id == leader)
        for server_id in order:
            self.nodes[server_id].stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _three_ports(host: str, taken: set[int]) -> tuple[int, int, int]:
    """A node's client, peer and election ports: free ones on ``host``, none in ``taken``
    (which gets them); ZooKeeper's usual ones on an address of another network namespace."""
    ports: list[int] = []
    try:
        while len(ports) < 3:
            port = free_port(host)
            if port not in taken:
                taken.add(port)
                ports.append(port)
    except OSError:
        return CLIENT_PORT, PEER_PORT, ELECTION_PORT
    return ports[0], ports[1], ports[2]
