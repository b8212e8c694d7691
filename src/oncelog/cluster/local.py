"""A whole cluster on one machine: a ZooKeeper (or an ensemble of them) and N brokers on
loopback, each a real process with its own data directory (``oncelog cluster start``, the
cluster tests, the verifier's ``--brokers`` and the benchmarks).

Broker ``n`` (1-based) gets ``node.id=n`` and ``<data-dir>/broker-n``; ZooKeeper keeps its
data in ``<data-dir>/zookeeper`` (with ``zookeepers=3``, an ensemble: ``zookeeper/node-N``
per node, and every broker's ``zookeeper.connect`` lists all three) unless an existing
ensemble is given with ``zookeeper_connect``. Every process is stopped by its pid in
``stop()`` (also as a context manager), gracefully first, the brokers before ZooKeeper.
``kill``/``pause``/``resume``/``restart`` act on one broker, for fault injection;
``ensemble.kill(n)``/``ensemble.start_node(n)`` on one ZooKeeper node.

``isolated=True`` (root on Linux: ``cluster.isolation``) puts every broker and every ZooKeeper
node in a network namespace of its own, with its own address on a bridge this cluster creates
and removes (nodes ``broker-N`` and ``zookeeper-N``; brokers on port 9092, ZooKeeper on its
usual ports); clients in the root namespace reach the brokers at their advertised addresses.
Then the network faults: ``isolate``, ``split``, ``cut``, ``cut_from_zookeeper``, ``slow`` and
``heal`` (each names nodes as ``broker-N``/``zookeeper-N`` or broker ids).

A secured cluster (``oncelog cluster start --secure``, the security tests) gives the
brokers' secrets in ``config_file`` (a properties file every broker reads with ``--config``:
never on a command line, which ``ps`` shows to every user), its own checks' client settings
in ``client_config`` (librdkafka's: ``security.protocol``, ``sasl.*``, ``ssl.ca.location``),
and ``before_brokers``, called with ``zookeeper.connect`` once ZooKeeper runs and before any
broker starts (the SCRAM users the brokers log in to each other as).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..broker.process import BrokerExited, BrokerProcess, exit_reason
from .isolation import Fault, IsolatedNetwork, IsolationError
from .zookeeper_ensemble import ZooKeeperEnsemble
from .zookeeper_process import ZooKeeperProcess

CHROOT = "/oncelog"
ISOLATED_BROKER_PORT = 9092
_networks_made = 0  # by this process: each isolated cluster's names differ


def _network_prefix() -> str:
    """``o`` + this process's id and a counter in base 36: unique on the machine while this
    process lives (a set left by a dead process with the same id is removed at create)."""
    global _networks_made
    _networks_made += 1
    return "o" + _base36(os.getpid()) + _base36(_networks_made)


def _base36(number: int) -> str:
    digits = ""
    while True:
        number, digit = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
        if not number:
            return digits


NodeName = str | int  # "broker-2", "zookeeper-1", or a broker id


class BrokerStartError(RuntimeError):
    """A broker exited while the cluster started: one sentence with the broker's own reason."""


class LocalCluster:
    def __init__(self, data_dir: Path, brokers: int = 3, *, zookeeper_connect: str | None = None,
                 settings: dict[str, str] | None = None, host: str = "127.0.0.1",
                 ports: Sequence[int | None] | None = None, zookeepers: int = 1,
                 isolated: bool = False, subnet: str | None = None,
                 config_file: Path | None = None, client_config: dict[str, str] | None = None,
                 before_brokers: Callable[[str], None] | None = None,
                 security_protocol: str = "PLAINTEXT") -> None:
        self.data_dir = Path(data_dir)
        self.security_protocol = security_protocol  # every broker's one listener's
        self.config_file = config_file
        self.client_config = dict(client_config or {})  # librdkafka's, for our own checks
        self._before_brokers = before_brokers
        self.host = host
        if isolated and zookeeper_connect:
            raise ValueError("an isolated cluster starts its own ZooKeeper nodes")
        # Checked now (ValueError), before anything starts: an odd count, 1 or more.
        self.ensemble: ZooKeeperEnsemble | None = None if zookeeper_connect else \
            ZooKeeperEnsemble(self.data_dir / "zookeeper", zookeepers, host=host)
        self.zookeeper_connect = zookeeper_connect
        self.settings = dict(settings or {})
        self.brokers: dict[int, BrokerProcess] = {}
        self._count = brokers
        self._zookeepers = zookeepers
        self._ports = list(ports or [])
        # isolated: the namespaces and bridge, made by start() (None until then, or not)
        self.isolated = isolated
        self.network: IsolatedNetwork | None = None
        self._subnet = subnet  # isolated: tried first (the last run's, so nodes keep addresses)

    @property
    def zookeeper(self) -> ZooKeeperProcess | None:
        """The ZooKeeper this cluster started when it is a single one (None with an ensemble
        of several nodes - see ``ensemble`` - or with ``zookeeper_connect``)."""
        if self.ensemble is None or self.ensemble.count != 1 or not self.ensemble.nodes:
            return None
        return self.ensemble.nodes[1]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def broker(self, node_id: int) -> BrokerProcess:
        return self.brokers[node_id]

    def start(self, timeout_s: float = 60.0) -> LocalCluster:
        try:
            if self.isolated:
                self._create_network()
            if self.ensemble is not None:
                self.ensemble.start()
                self.zookeeper_connect = self.ensemble.connect_string + CHROOT
            if self._before_brokers is not None:
                assert self.zookeeper_connect is not None  # ours, or the one given
                self._before_brokers(self.zookeeper_connect)
            for node_id in range(1, self._count + 1):
                port = self._ports[node_id - 1] if node_id <= len(self._ports) else None
                self.brokers[node_id] = self._broker_process(node_id, port)
            for node_id, process in self.brokers.items():
                process.data_dir.mkdir(parents=True, exist_ok=True)
                try:
                    process.start(timeout_s)
                except BrokerExited as error:
                    raise BrokerStartError(f"broker {node_id} {error.summary}") from None
            self.wait_for_brokers(set(self.brokers), timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _create_network(self) -> None:
        """The namespaces and bridge of an isolated cluster, on ``subnet`` when it was given
        and is free, else a /24 of 10.213.0.0/16 no interface of this machine holds; the
        ZooKeeper ensemble is placed inside them. (A broker back within its previous ZooKeeper
        session is recognised only on its previous address: ``cluster start`` gives the last
        run's subnet, as it gives the last run's ports on loopback.)"""
        names = [f"zookeeper-{n}" for n in range(1, self._zookeepers + 1)] + \
            [f"broker-{n}" for n in range(1, self._count + 1)]
        prefix = _network_prefix()
        start = (os.getpid() * 7 + _networks_made) % 250
        subnets = [f"10.213.{(start + step) % 250}.0/24" for step in range(250)]
        if self._subnet:
            subnets.insert(0, self._subnet)
        for subnet in subnets:
            network = IsolatedNetwork(prefix, subnet)
            try:
                network.create(names)
            except IsolationError as error:
                if "overlaps" in str(error):
                    continue  # another cluster's subnet: the next one
                raise
            self.network = network
            break
        else:
            raise IsolationError("no free /24 in 10.213.0.0/16 for an isolated cluster")
        zookeepers = [f"zookeeper-{n}" for n in range(1, self._zookeepers + 1)]
        self.ensemble = ZooKeeperEnsemble(
            self.data_dir / "zookeeper", self._zookeepers,
            hosts=[network.address(z) for z in zookeepers],
            command_prefixes=[network.exec_prefix(z) for z in zookeepers])

    def _broker_process(self, node_id: int, port: int | None) -> BrokerProcess:
        directory = self.data_dir / f"broker-{node_id}"
        assert self.zookeeper_connect is not None  # known once ZooKeeper runs
        settings = {"node.id": str(node_id), "zookeeper.connect": self.zookeeper_connect,
                    **self.settings}
        extra_args = ["--config", str(self.config_file)] if self.config_file else []
        if self.network is not None:
            node = f"broker-{node_id}"
            return BrokerProcess(directory / "data", port=port or ISOLATED_BROKER_PORT,
                                 host=self.network.address(node), settings=settings,
                                 log_path=directory / "broker.log", extra_args=extra_args,
                                 command_prefix=self.network.exec_prefix(node),
                                 security_protocol=self.security_protocol)
        return BrokerProcess(directory / "data", port=port, host=self.host, settings=settings,
                             log_path=directory / "broker.log", extra_args=extra_args,
                             security_protocol=self.security_protocol)

    def wait_for_brokers(self, node_ids: set[int], timeout_s: float = 30.0) -> None:
        """Until every broker's Metadata lists exactly ``node_ids`` as live."""
        from confluent_kafka.admin import AdminClient
        deadline = time.monotonic() + timeout_s
        seen: set[int] = set()
        while time.monotonic() < deadline:
            for node_id, process in list(self.brokers.items()):
                if process.process is None:
                    continue
                if process.process.poll() is not None:
                    if node_id in node_ids:
                        reason = exit_reason(process.log_text()) or "its log says nothing"
                        raise BrokerStartError(
                            f"broker {node_id} exited with status {process.process.returncode}"
                            f" while the cluster formed: {reason}; see {process.log_path}")
                    continue
                try:
                    admin = AdminClient({"bootstrap.servers": process.bootstrap,
                                         **self.client_config})
                    seen = set(admin.list_topics(timeout=2).brokers)
                except Exception:
                    seen = set()
                if seen != node_ids:
                    break
            else:
                return
            time.sleep(0.1)
        missing = [self.brokers[n] for n in sorted(node_ids - seen) if n in self.brokers]
        tails = "".join(f"\n{p.log_path}:\n{p.log_tail()}" for p in missing)
        raise TimeoutError(f"brokers {sorted(node_ids)} did not all see each other within "
                           f"{timeout_s:g} s (last seen: {sorted(seen)}){tails}")

    # -- faults ------------------------------------------------------------------------

    def kill(self, node_id: int) -> None:
        self.brokers[node_id].kill()

    def stop_broker(self, node_id: int) -> int | None:
        return self.brokers[node_id].stop()

    def restart(self, node_id: int, timeout_s: float = 30.0) -> None:
        process = self.brokers[node_id]
        if process.process is not None and process.process.poll() is None:
            os.kill(process.process.pid, signal.SIGCONT)  # a paused broker cannot stop
            process.stop()
        process.start(timeout_s)

    def pause(self, node_id: int) -> None:
        os.kill(self._pid(node_id), signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        os.kill(self._pid(node_id), signal.SIGCONT)

    def _pid(self, node_id: int) -> int:
        pid = self.brokers[node_id].pid
        assert pid is not None, f"broker {node_id} was started"
        return pid

    def is_running(self, node_id: int) -> bool:
        process = self.brokers[node_id].process
        return process is not None and process.poll() is None

    # -- network faults (isolated clusters) ---------------------------------------------

    def node_name(self, node: NodeName) -> str:
        """``broker-N`` for a broker id, or the name given (``zookeeper-N``, ``broker-N``)."""
        return f"broker-{node}" if isinstance(node, int) else node

    def _network(self) -> IsolatedNetwork:
        if self.network is None:
            raise IsolationError("network faults need an isolated cluster (isolated=True, "
                                 "or oncelog cluster start --isolated)")
        return self.network

    def isolate(self, node: NodeName) -> Fault:
        """Cut one broker or ZooKeeper node off from everything, clients included."""
        return self._network().isolate(self.node_name(node))

    def split(self, side_a: Sequence[NodeName], side_b: Sequence[NodeName]) -> Fault:
        """Two groups of nodes that cannot reach each other (clients reach both)."""
        return self._network().split([self.node_name(n) for n in side_a],
                                     [self.node_name(n) for n in side_b])

    def cut(self, a: NodeName, b: NodeName) -> Fault:
        """One directed link: ``a``'s packets to ``b`` dropped, ``b``'s to ``a`` delivered."""
        return self._network().cut(self.node_name(a), self.node_name(b))

    def cut_from_zookeeper(self, broker: NodeName) -> Fault:
        """A broker cut from every ZooKeeper node only: clients and other brokers still
        reach it (a leader losing its session while serving)."""
        network = self._network()
        return network.cut_from(self.node_name(broker),
                                [n for n in network.nodes if n.startswith("zookeeper-")])

    def slow(self, a: NodeName, b: NodeName | None = None, delay_ms: float = 0,
             jitter_ms: float = 0, loss_percent: float = 0) -> Fault:
        """Delay (TCP, through a relay), jitter and loss between two nodes, or for all of
        one node's traffic."""
        return self._network().slow(self.node_name(a),
                                    None if b is None else self.node_name(b),
                                    delay_ms, jitter_ms, loss_percent)

    def heal(self, fault: Fault | None = None) -> None:
        """Remove one fault, or all of them."""
        if self.network is not None:
            self.network.heal(fault)

    def faults(self) -> list[Fault]:
        return self.network.faults() if self.network is not None else []

    # -- stopping ----------------------------------------------------------------------

    def stop(self) -> None:
        for process in self.brokers.values():
            if process.process is not None and process.process.poll() is None:
                try:
                    os.kill(process.process.pid, signal.SIGCONT)  # a paused broker cannot stop
                except ProcessLookupError:
                    pass
        try:
            if self.network is not None:
                self.network.heal()  # a cut-off broker would wait out its SIGTERM
            for process in self.brokers.values():
                process.stop()
            if self.ensemble is not None:
                self.ensemble.stop()
        finally:
            if self.network is not None:
                self.network.destroy()
                self.network = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
