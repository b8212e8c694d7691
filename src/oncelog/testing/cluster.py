"""A replicated cluster for a user's tests: ZooKeeper and N oncelog brokers on loopback.

``with cluster(brokers=3) as c:`` starts a real ZooKeeper (Java and the ZooKeeper jars
must be installed) and N broker processes (``oncelog.cluster.local.LocalCluster``), each
behind its own ``WireProxy``; ``c.bootstrap`` lists the proxies, and each proxy rewrites
every broker's address to that broker's proxy, so clients follow leaders from broker to
broker and wire faults (``c.fail_next(...)`` and the rest, shared by all proxies) reach
whichever broker a request goes to.

Process faults per broker (node ids 1..N): ``kill(n)``, ``restart(n)``, ``pause(n)``,
``resume(n)``; ``leader_of(topic, partition)`` names the current leader, so
``c.kill(c.leader_of(topic, 0))`` fails a partition over. Timings are short (2 s ZooKeeper
sessions and replica lag), so a failover takes seconds.

``cluster(brokers=3, zookeepers=3)`` runs the brokers on a 3-node ZooKeeper ensemble
(``oncelog.cluster.zookeeper_ensemble``); ``c.zookeeper_leader()`` names the node leading it,
``c.kill_zookeeper(n)`` kills node n (kill -9) and ``c.start_zookeeper(n)`` starts it again,
so a test can take a minority of the ensemble away, or its leader.

``cluster(isolated=True)`` (root on Linux, ``ip`` and ``nft``) puts every broker and every
ZooKeeper node in a network namespace of its own (``oncelog.cluster.isolation``), so a test
can partition the network under its application: ``c.isolate(node)``, ``c.split([...],
[...])``, ``c.cut(a, b)``, ``c.cut_from_zookeeper(broker)``, ``c.slow(a, b, delay_ms=...,
jitter_ms=..., loss_percent=...)``, ``c.heal()`` and ``c.network_faults()`` (the faults now),
naming nodes by broker id or as ``broker-N``/``zookeeper-N``. ``c.faults`` stays the wire
faults every proxy shares, as on ``Broker``. The proxies run in the root namespace, so a
client of ``c.bootstrap`` is cut off from an isolated broker as any client would be: its
requests there go unanswered (clients need short request timeouts and frequent metadata
refreshes to move on - docs/testing.md). The namespaces go with the cluster, even when the
test fails.

Without Java or ZooKeeper, ``start()`` raises ``ClusterUnavailable`` with one line saying
what to install (with ``isolated=True`` and no root, ``ip`` or ``nft``, the line says which
is missing); the pytest fixture fails with that line (it does not skip).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..cluster.local import LocalCluster
from ..cluster.zookeeper_process import ZooKeeperNotInstalled
from .broker import (FAST_SETTINGS, _track, _untrack, _WireFaultMethods, unique_name,
                     wait_until_in_sync)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..broker.process import BrokerProcess
    from ..cluster.isolation import Fault
    from ..cluster.local import NodeName
    from ..cluster.zookeeper_ensemble import ZooKeeperEnsemble
    from ..cluster.zookeeper_process import ZooKeeperProcess
    from .wire import WireProxy

__all__ = ["Cluster", "ClusterUnavailable", "cluster"]

INSTALL_HINT = ("the oncelog_cluster fixture needs Java 17+ and Apache ZooKeeper 3.8: on "
                "Debian/Ubuntu run `sudo apt-get install default-jre-headless zookeeper`")

CLUSTER_SETTINGS = {
    **FAST_SETTINGS,
    "zookeeper.session.timeout.ms": "2000",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "offsets.topic.num.partitions": "3",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
}


class ClusterUnavailable(RuntimeError):
    """Java or ZooKeeper is missing; the message says how to install them."""


class Cluster(_WireFaultMethods):
    def __init__(self, data_dir: Path, brokers: int = 3, *,
                 settings: dict[str, str] | None = None, zookeepers: int = 1,
                 isolated: bool = False) -> None:
        self.local = LocalCluster(Path(data_dir), brokers,
                                  settings={**CLUSTER_SETTINGS, **(settings or {})},
                                  zookeepers=zookeepers, isolated=isolated)
        from .wire import WireFaults
        self.faults = WireFaults()
        self._addresses: dict[tuple[str, int], tuple[str, int]] = {}
        self.proxies: dict[int, WireProxy] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(proxy.bootstrap for proxy in self.proxies.values())

    @property
    def direct_bootstrap(self) -> str:
        return self.local.bootstrap

    @property
    def node_ids(self) -> list[int]:
        return sorted(self.local.brokers)

    def pid(self, node_id: int) -> int | None:
        return self.local.broker(node_id).pid

    def pids(self) -> list[int]:
        return [process.pid for process in self._processes() if process.pid is not None]

    def _processes(self) -> list[BrokerProcess | ZooKeeperProcess]:
        zookeepers = list(self.local.ensemble.nodes.values()) if self.local.ensemble else []
        return [*self.local.brokers.values(), *zookeepers]

    def start(self, timeout_s: float = 60.0) -> Cluster:
        from ..cluster.isolation import IsolationUnavailable
        try:
            self.local.start(timeout_s)
        except ZooKeeperNotInstalled as error:
            raise ClusterUnavailable(f"{INSTALL_HINT} ({error})") from None
        except IsolationUnavailable as error:
            raise ClusterUnavailable(f"cluster(isolated=True): {error}") from None
        finally:
            self._track_all()
        from .wire import WireProxy
        try:
            for node_id, process in self.local.brokers.items():
                proxy = WireProxy(process.bootstrap, faults=self.faults,
                                  addresses=self._addresses).start()
                self.proxies[node_id] = proxy
                self._addresses[(process.host, process.port)] = (
                    proxy.proxy.listen_host, proxy.proxy.listen_port)
        except BaseException:
            self.close()
            raise
        return self

    def _track_all(self) -> None:
        for process in self._processes():
            if process.process is not None:
                _track(process)

    def close(self) -> None:
        for proxy in self.proxies.values():
            proxy.stop()
        pids = self.pids()
        self.local.stop()  # resumes paused brokers, stops brokers, then ZooKeeper
        for pid in pids:
            _untrack(pid)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- process faults --------------------------------------------------------------------

    def kill(self, node_id: int) -> None:
        if self._paused(node_id):
            self.local.resume(node_id)
        self.local.kill(node_id)

    def restart(self, node_id: int, timeout_s: float = 30.0) -> None:
        _untrack(self.pid(node_id))
        self.local.restart(node_id, timeout_s)
        _track(self.local.broker(node_id))

    def pause(self, node_id: int) -> None:
        self.local.pause(node_id)

    def resume(self, node_id: int) -> None:
        self.local.resume(node_id)

    def is_running(self, node_id: int) -> bool:
        return self.local.is_running(node_id)

    # -- ZooKeeper faults (an ensemble's nodes, 1..zookeepers) ---------------------------------

    @property
    def ensemble(self) -> ZooKeeperEnsemble:
        assert self.local.ensemble is not None, "the cluster started its own ZooKeeper"
        return self.local.ensemble

    def zookeeper_leader(self) -> int | None:
        """The ZooKeeper node leading the ensemble now (the only one, without an ensemble)."""
        return self.ensemble.leader()

    def kill_zookeeper(self, server_id: int) -> None:
        """kill -9 of ZooKeeper node ``server_id``."""
        node = self.ensemble.node(server_id)
        pid = node.pid
        node.kill()
        _untrack(pid)

    def start_zookeeper(self, server_id: int, timeout_s: float = 30.0) -> None:
        """ZooKeeper node ``server_id`` started again on its ports; back once it serves."""
        self.ensemble.start_node(server_id, timeout_s)
        _track(self.ensemble.node(server_id))

    def _paused(self, node_id: int) -> bool:
        try:
            with open(f"/proc/{self.pid(node_id)}/stat") as stat:
                return stat.read().split(") ", 1)[1][0] == "T"
        except (OSError, TypeError):
            return False

    # -- network faults (isolated=True) ------------------------------------------------------

    def isolate(self, node: NodeName) -> Fault:
        """Cut one broker or ZooKeeper node off from everything, clients included."""
        return self.local.isolate(node)

    def split(self, side_a: Sequence[NodeName], side_b: Sequence[NodeName]) -> Fault:
        """Two groups of nodes that cannot reach each other (clients reach both)."""
        return self.local.split(side_a, side_b)

    def cut(self, a: NodeName, b: NodeName) -> Fault:
        """One directed link: ``a``'s packets to ``b`` dropped, ``b``'s to ``a`` delivered."""
        return self.local.cut(a, b)

    def cut_from_zookeeper(self, broker: NodeName) -> Fault:
        """A broker cut from every ZooKeeper node only; clients and brokers still reach it."""
        return self.local.cut_from_zookeeper(broker)

    def slow(self, a: NodeName, b: NodeName | None = None, *, delay_ms: float = 0,
             jitter_ms: float = 0, loss_percent: float = 0) -> Fault:
        """Delay (TCP connections opened from now on), jitter and loss between ``a`` and
        ``b``, or for all of ``a``'s traffic."""
        return self.local.slow(a, b, delay_ms, jitter_ms, loss_percent)

    def heal(self, fault: Fault | None = None) -> None:
        """Remove one network fault, or all of them."""
        self.local.heal(fault)

    def network_faults(self) -> list[Fault]:
        """The network faults applied now, oldest first (``str(fault)`` is its caption)."""
        return self.local.faults()

    # -- topics and leaders ----------------------------------------------------------------

    def _admin(self):
        from confluent_kafka.admin import AdminClient
        running = [n for n in self.node_ids if self.is_running(n) and not self._paused(n)]
        return AdminClient({"bootstrap.servers": ",".join(
            self.local.broker(n).bootstrap for n in running), "log_level": 0})

    def topic(self, prefix: str = "test", partitions: int = 1, replication_factor: int = 3,
              config: dict[str, str] | None = None, timeout_s: float = 30.0) -> str:
        """Create a topic named ``<prefix>-<random>``, wait until every replica is in sync,
        and return its name."""
        from confluent_kafka.admin import NewTopic
        name = unique_name(prefix)
        admin = self._admin()
        admin.create_topics([NewTopic(name, partitions, replication_factor,
                                      config=dict(config or {}))])[name].result(timeout_s)
        return wait_until_in_sync(admin, name, partitions, replication_factor, timeout_s)

    def group(self, prefix: str = "group") -> str:
        return unique_name(prefix)

    def leader_of(self, topic: str, partition: int = 0, timeout_s: float = 30.0) -> int:
        """The node id leading ``topic``/``partition`` now, as the running brokers say;
        waits while there is none (an election in progress)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                described = self._admin().list_topics(topic, timeout=5).topics[topic]
                leader = described.partitions[partition].leader
                if leader >= 0 and self.is_running(leader):
                    return leader
            except Exception:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"{topic}/{partition} has no running leader after {timeout_s:g} s")

    def read_all(self, topic: str, *, isolation: str = "read_committed",
                 timeout_s: float = 10.0) -> list:
        from .assertions import read_all
        running = [self.local.broker(n).bootstrap for n in self.node_ids if self.is_running(n)]
        return read_all(",".join(running), topic, isolation=isolation, timeout_s=timeout_s)


@contextlib.contextmanager
def cluster(brokers: int = 3, data_dir: Path | str | None = None, *,
            settings: dict[str, str] | None = None, zookeepers: int = 1,
            isolated: bool = False) -> Iterator[Cluster]:
    """ZooKeeper (``zookeepers`` nodes: 1, or an ensemble of 3, 5, ...) and ``brokers``
    brokers for the ``with`` block (data in ``data_dir``, or a temporary directory removed
    afterwards), every process stopped by pid after it; ``isolated``: each in a network
    namespace of its own, removed after the block, for ``isolate``, ``split`` and the rest."""
    directory = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="oncelog-cluster-"))
    started = Cluster(directory, brokers, settings=settings, zookeepers=zookeepers,
                      isolated=isolated)
    try:
        started.start()
        yield started
    finally:
        started.close()
        if data_dir is None:
            shutil.rmtree(directory, ignore_errors=True)
