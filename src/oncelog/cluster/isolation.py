"""Real network partitions on one machine (issue 31): a network namespace per node on a bridge,
and Jepsen's faults - isolate, split, cut, slow - applied and healed on command.

``IsolatedNetwork(name_prefix, subnet)`` is a context manager. ``create(nodes)`` makes, in the
root namespace (where clients run), a bridge ``<prefix>br`` holding the subnet's first address,
and per node a namespace ``<prefix>-<node>`` with ``lo`` up, a veth pair (``<prefix>v<i>`` on
the bridge, ``eth0`` inside with the node's own address) and a default route via the bridge.
Every node reaches every other and the root namespace reaches every node. ``exec_prefix(node)``
runs a process inside a node's namespace; ``address(node)`` is where others reach it.

How each fault is made (``docs/cluster.md``, "Network partitions: the isolation layer"):

- Packet drops (``isolate``, ``split``, ``cut``, ``cut_from``, the loss of ``slow``) are rules in
  one nftables table of the ``bridge`` family in the root namespace, ``<prefix>_faults``, whose
  forward, input and output hooks see every packet between two nodes and between a node and the
  root namespace. A dropped packet vanishes on the wire: the sender's system call succeeds and
  its peer never answers, as in a real partition (Jepsen drops with iptables for the same
  reason). Not blackhole routes: a connect() or sendto() towards a blackhole route fails at once
  with EINVAL (measured here), which a broker takes as an error, not as a silent network.
- ``cut(a, b)`` is directed: a's packets to b are dropped, b's to a delivered. So a cannot
  connect to b, and b's connection attempts to a reach a but a's SYN-ACK does not come back;
  a UDP datagram from b still arrives at a.
- ``slow``'s loss is ``numgen random mod 10000 < N`` per packet in that table; its delay and
  jitter go through ``delay_relay.py`` (no netem in this kernel): a ``nat`` table in the node's
  namespace sends new TCP connections to a relay that delays byte chunks, not packets.
- ``heal()`` rewrites the tables without the healed faults, in one nftables transaction each.

Every name carries the prefix; ``destroy()`` removes exactly the names this object created (safe
twice), and ``create`` first removes a set a killed process left with the same prefix
(``remove_isolated_networks(prefix)``). Processes still running inside a namespace at
``destroy()`` are killed by pid: left there without a network they would hold their ports and
data directories. Needs Linux, root (CAP_NET_ADMIN and CAP_SYS_ADMIN), ``ip`` (iproute2) and
``nft`` (nftables); without them ``create`` raises ``IsolationUnavailable`` with one line
naming what is missing, before anything is created. IPv4 only.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from .delay_relay import RELAY_MARK, NamespaceRelay, RelayLoop

DEFAULT_SUBNET = "10.213.7.0/24"
PREFIX_PATTERN = re.compile(r"[a-z][a-z0-9]{0,8}")  # "<prefix>v252" fits in 15 characters
NODE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
DELAY_TABLE = "oncelog_delay"  # the nat table in each node's namespace
_CAP_NET_ADMIN = 12
_CAP_SYS_ADMIN = 21
_COMMAND_TIMEOUT_S = 30


class IsolationUnavailable(RuntimeError):
    """This machine cannot make network namespaces: ``missing`` names what it lacks, among
    ``"linux"``, ``"root"``, ``"ip"`` and ``"nft"``."""

    def __init__(self, missing: Sequence[str]) -> None:
        self.missing = tuple(missing)
        wanted = {"linux": "Linux", "root": "root (CAP_NET_ADMIN and CAP_SYS_ADMIN)",
                  "ip": "the ip command (iproute2)", "nft": "the nft command (nftables)"}
        super().__init__("network partitions need " + ", ".join(wanted[m] for m in missing)
                         + " (run as root after make setup)")


class IsolationError(RuntimeError):
    """A command that builds or changes the network failed; the message has its output."""


def missing_prerequisites() -> list[str]:
    """What ``create`` would miss here: [] when it can run."""
    if not sys.platform.startswith("linux"):
        return ["linux"]
    missing = [] if _has_admin_capabilities() else ["root"]
    missing += [command for command in ("ip", "nft") if shutil.which(command) is None]
    return missing


def _has_admin_capabilities() -> bool:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return os.geteuid() == 0
    match = re.search(r"^CapEff:\s*([0-9a-f]+)$", status, re.MULTILINE)
    if match is None:
        return os.geteuid() == 0
    effective = int(match.group(1), 16)
    return all(effective >> bit & 1 for bit in (_CAP_NET_ADMIN, _CAP_SYS_ADMIN))


def _run(argv: list[str], input_text: str | None = None) -> str:
    result = subprocess.run(argv, input=input_text, capture_output=True, text=True,
                            timeout=_COMMAND_TIMEOUT_S)
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip().replace("\n", " | ")
        raise IsolationError(f"{' '.join(argv)} failed (exit {result.returncode}): {output}")
    return result.stdout


@dataclass(frozen=True)
class DelaySpec:
    """Delay ``node``'s new TCP connections to ``target`` (an address), or with ``target``
    None every connection it opens in the subnet and every one that arrives at it."""
    node: str
    target: str | None
    delay_ms: float
    jitter_ms: float


@dataclass(frozen=True)
class Fault:
    """One applied fault: ``kind`` is Jepsen's word, ``caption`` says it for a chart or a log
    line (``str(fault)``); the rules are how it is made."""
    kind: str
    caption: str
    drop_rules: tuple[str, ...] = ()
    delays: tuple[DelaySpec, ...] = ()

    def __str__(self) -> str:
        return self.caption


class IsolatedNetwork:
    """Nodes in network namespaces on one bridge, with faults applied and healed on command
    (module docstring). ``seed`` drives the relay's jitter."""

    def __init__(self, name_prefix: str = "ol", subnet: str = DEFAULT_SUBNET,
                 seed: int = 0) -> None:
        if not PREFIX_PATTERN.fullmatch(name_prefix):
            raise ValueError(f"name prefix {name_prefix!r}: 1-9 characters, a-z then a-z0-9 "
                             "(interface names hold 15 characters)")
        self.prefix = name_prefix
        self.subnet = ipaddress.ip_network(subnet)
        if self.subnet.version != 4 or self.subnet.num_addresses < 4:
            raise ValueError(f"subnet {subnet}: an IPv4 network of at least 4 addresses")
        self.bridge_address = str(self.subnet.network_address + 1)
        self.bridge = f"{name_prefix}br"
        self.faults_table = f"{name_prefix}_faults"
        self.seed = seed
        self._nodes: dict[str, tuple[str, str, str]] = {}  # node: (address, namespace, veth)
        self._faults: list[Fault] = []
        self._relay_loop = RelayLoop()
        self._relays: dict[str, NamespaceRelay] = {}
        self._delay_rules: dict[str, str] = {}  # node: the nat ruleset applied in its namespace
        self._created: list[tuple[str, str]] = []  # (kind, name), in creation order

    # -- building and removing --------------------------------------------------------------

    def create(self, nodes: Sequence[str]) -> Self:
        missing = missing_prerequisites()
        if missing:
            raise IsolationUnavailable(missing)
        if self._created:
            raise IsolationError(f"network {self.prefix} is already created")
        self._check_nodes(nodes)
        remove_isolated_networks(self.prefix)
        self._check_subnet_free()
        try:
            self._create_bridge()
            for index, node in enumerate(nodes):
                self._create_node(index, node)
        except BaseException:
            self.destroy()
            raise
        return self

    def _check_nodes(self, nodes: Sequence[str]) -> None:
        if not nodes or len(set(nodes)) != len(nodes):
            raise ValueError(f"nodes {list(nodes)}: at least one, each named once")
        for node in nodes:
            if not NODE_PATTERN.fullmatch(node):
                raise ValueError(f"node name {node!r}: 1-40 characters, letters, digits, _.-")
        if len(nodes) > self.subnet.num_addresses - 3:
            raise ValueError(f"{len(nodes)} nodes do not fit in {self.subnet}")

    def _check_subnet_free(self) -> None:
        for line in _run(["ip", "-4", "-o", "addr", "show"]).splitlines():
            fields = line.split()
            if "inet" not in fields:
                continue
            interface = ipaddress.ip_interface(fields[fields.index("inet") + 1])
            if interface.network.overlaps(self.subnet):
                raise IsolationError(f"subnet {self.subnet} overlaps {interface} on {fields[1]}; "
                                     "choose another subnet for this network")

    def _create_bridge(self) -> None:
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        self._created.append(("link", self.bridge))
        prefix_length = self.subnet.prefixlen
        _run(["ip", "addr", "add", f"{self.bridge_address}/{prefix_length}", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        hooks = "\n".join(
            f"  chain {hook} {{\n    type filter hook {hook} priority 0; policy accept;\n"
            f"    ip {field} {self.subnet} jump faults\n  }}"
            for hook, field in (("forward", "saddr"), ("input", "saddr"), ("output", "daddr")))
        _run(["nft", "-f", "-"], f"table bridge {self.faults_table} {{\n  chain faults {{\n  }}\n"
                                 f"{hooks}\n}}\n")
        self._created.append(("table", self.faults_table))

    def _create_node(self, index: int, node: str) -> None:
        address = str(self.subnet.network_address + 2 + index)
        namespace = f"{self.prefix}-{node}"
        veth = f"{self.prefix}v{index}"
        _run(["ip", "netns", "add", namespace])
        self._created.append(("netns", namespace))
        self._nodes[node] = (address, namespace, veth)
        inner = f"{self.prefix}n{index}"
        _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", inner,
              "netns", namespace])
        self._created.append(("link", veth))
        _run(["ip", "link", "set", veth, "master", self.bridge, "up"])
        in_namespace = ["ip", "-n", namespace]
        _run([*in_namespace, "link", "set", "lo", "up"])
        _run([*in_namespace, "link", "set", inner, "name", "eth0"])
        _run([*in_namespace, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0"])
        _run([*in_namespace, "link", "set", "eth0", "up"])
        _run([*in_namespace, "route", "add", "default", "via", self.bridge_address])

    def destroy(self) -> None:
        """Remove every namespace, interface, table and relay this network created, by name;
        a name already gone is skipped, so a second call does nothing."""
        try:
            for relay in self._relays.values():
                self._relay_loop.call(relay.close)
        finally:
            self._relays.clear()
            self._relay_loop.close()
            self._remove_created()

    def _remove_created(self) -> None:
        namespaces, links, tables = _existing_names()
        for kind, name in reversed(self._created):
            if kind == "netns" and name in namespaces:
                _remove_namespace(name)
            elif kind == "link" and name in links:
                _run(["ip", "link", "del", name])
            elif kind == "table" and name in tables:
                _run(["nft", "delete", "table", "bridge", name])
        self._created.clear()
        self._nodes.clear()
        self._faults.clear()
        self._delay_rules.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.destroy()

    # -- where things are ---------------------------------------------------------------------

    @property
    def nodes(self) -> list[str]:
        return list(self._nodes)

    def address(self, node: str) -> str:
        return self._node(node)[0]

    def namespace(self, node: str) -> str:
        return self._node(node)[1]

    def exec_prefix(self, node: str) -> list[str]:
        """Put before a command to run it inside ``node``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(node)]

    def _node(self, node: str) -> tuple[str, str, str]:
        try:
            return self._nodes[node]
        except KeyError:
            raise ValueError(f"no node {node!r} in network {self.prefix} "
                             f"(nodes: {', '.join(self._nodes) or 'none'})") from None

    # -- faults -------------------------------------------------------------------------------

    def isolate(self, node: str) -> Fault:
        """``node`` can reach nothing and nothing reaches it, clients included."""
        address = self.address(node)
        return self._apply(Fault("isolate", f"isolate {node}",
                                 (f"ip saddr {address} drop", f"ip daddr {address} drop")))

    def split(self, group_a: Iterable[str], group_b: Iterable[str]) -> Fault:
        """No packet between the two groups either way; each group keeps its own links and the
        root namespace still reaches every node."""
        side_a, side_b = list(group_a), list(group_b)
        if not side_a or not side_b or set(side_a) & set(side_b):
            raise ValueError(f"split {side_a} | {side_b}: two non-empty groups, no node in both")
        caption = f"split {{{', '.join(side_a)}}} | {{{', '.join(side_b)}}}"
        return self._apply(Fault("split", caption, self._both_ways(side_a, side_b)))

    def cut(self, a: str, b: str) -> Fault:
        """Directed: ``a``'s packets to ``b`` are dropped, ``b``'s to ``a`` delivered."""
        self._check_pair(a, b)
        return self._apply(Fault("cut", f"cut {a} -> {b}", (
            f"ip saddr {self.address(a)} ip daddr {self.address(b)} drop",)))

    def cut_from(self, node: str, others: Iterable[str]) -> Fault:
        """``node`` and each of ``others`` cannot reach each other, either way (a leader cut
        from the ZooKeeper nodes only); every other path stays."""
        rest = list(others)
        if not rest or node in rest:
            raise ValueError(f"cut_from {node} {rest}: at least one other node, not itself")
        caption = f"cut {node} from {{{', '.join(rest)}}}"
        return self._apply(Fault("cut_from", caption, self._both_ways([node], rest)))

    def slow(self, a: str, b: str | None = None, delay_ms: float = 0, jitter_ms: float = 0,
             loss_percent: float = 0) -> Fault:
        """Between ``a`` and ``b`` (both ways), or with ``b`` None for all of ``a``'s traffic:
        each packet lost with ``loss_percent`` (resolution 0.01 %), and each byte chunk of a TCP
        connection opened from now on delayed by ``delay_ms`` +- ``jitter_ms`` in each
        direction (``delay_relay.py``: chunks, not packets)."""
        if b is not None:
            self._check_pair(a, b)
        else:
            self.address(a)
        if not 0 <= loss_percent <= 100 or delay_ms < 0 or not 0 <= jitter_ms <= delay_ms:
            raise ValueError(f"slow: loss_percent in 0-100 ({loss_percent}), delay_ms >= 0 "
                             f"({delay_ms}), 0 <= jitter_ms <= delay_ms ({jitter_ms})")
        if not loss_percent and not delay_ms:
            raise ValueError("slow: give delay_ms or loss_percent")
        drop_rules: tuple[str, ...] = ()
        if loss_percent:
            chance = f"numgen random mod 10000 < {round(loss_percent * 100)} drop"
            if b is None:
                drop_rules = (f"ip saddr {self.address(a)} {chance}",
                              f"ip daddr {self.address(a)} {chance}")
            else:
                drop_rules = (f"ip saddr {self.address(a)} ip daddr {self.address(b)} {chance}",
                              f"ip saddr {self.address(b)} ip daddr {self.address(a)} {chance}")
        delays: tuple[DelaySpec, ...] = ()
        if delay_ms:
            if b is None:
                delays = (DelaySpec(a, None, delay_ms, jitter_ms),)
            else:
                delays = (DelaySpec(a, self.address(b), delay_ms, jitter_ms),
                          DelaySpec(b, self.address(a), delay_ms, jitter_ms))
        what = [f"{delay_ms:g}±{jitter_ms:g} ms"] if delay_ms else []
        what += [f"{loss_percent:g}% loss"] if loss_percent else []
        between = f"{a} <-> {b}" if b is not None else a
        return self._apply(Fault("slow", f"slow {between}: {', '.join(what)}",
                                 drop_rules, delays))

    def heal(self, fault: Fault | None = None) -> None:
        """Remove one fault, or every fault when none is named."""
        if fault is None:
            self._faults.clear()
        elif fault in self._faults:
            self._faults.remove(fault)
        self._write_rules()

    def faults(self) -> list[Fault]:
        """The faults applied now, oldest first."""
        return list(self._faults)

    def _check_pair(self, a: str, b: str) -> None:
        self.address(a)
        self.address(b)
        if a == b:
            raise ValueError(f"{a} to itself: name two different nodes")

    def _both_ways(self, side_a: list[str], side_b: list[str]) -> tuple[str, ...]:
        set_a = "{ " + ", ".join(self.address(node) for node in side_a) + " }"
        set_b = "{ " + ", ".join(self.address(node) for node in side_b) + " }"
        return (f"ip saddr {set_a} ip daddr {set_b} drop",
                f"ip saddr {set_b} ip daddr {set_a} drop")

    def _apply(self, fault: Fault) -> Fault:
        if not self._created:
            raise IsolationError(f"network {self.prefix} is not created")
        self._faults.append(fault)
        try:
            self._write_rules()
        except BaseException:
            self._faults.remove(fault)
            self._write_rules()
            raise
        return fault

    def _write_rules(self) -> None:
        """Make the tables say what ``self._faults`` says: the bridge table's rules replaced in
        one transaction, and each node's delay rules where they changed."""
        if not self._created:
            return
        chain = f"bridge {self.faults_table} faults"
        lines = [f"flush chain {chain}"]
        lines += [f"add rule {chain} {rule}" for fault in self._faults for rule in fault.drop_rules]
        _run(["nft", "-f", "-"], "\n".join(lines) + "\n")
        for node in self._nodes:
            specs = [spec for fault in self._faults for spec in fault.delays if spec.node == node]
            self._write_delay_rules(node, specs)

    def _write_delay_rules(self, node: str, specs: list[DelaySpec]) -> None:
        address, namespace, _ = self._nodes[node]
        if specs and node not in self._relays:
            relay = NamespaceRelay(namespace, address, seed=self.seed + len(self._relays))
            self._relay_loop.call(relay.start)
            self._relays[node] = relay
            chains = "".join(f"  chain {hook} {{\n    type nat hook {hook} priority -100; "
                             "policy accept;\n  }\n" for hook in ("output", "prerouting"))
            # a rule that reads conntrack, never flushed: the namespace keeps tracking (and
            # translating) connections when the last dnat rule goes (see below)
            tracking = ("  chain tracking {\n    type filter hook output priority 0; "
                        "policy accept;\n    ct state invalid counter\n  }\n")
            _run([*self.exec_prefix(node), "nft", "-f", "-"],
                 f"table ip {DELAY_TABLE} {{\n{chains}{tracking}}}\n")
        if node not in self._relays:
            return
        table: dict[str | None, tuple[float, float]] = {}
        for spec in specs:
            table[spec.target] = max(table.get(spec.target, (0.0, 0.0)),
                                     (spec.delay_ms, spec.jitter_ms))
        self._relays[node].delays = table  # live connections follow it (0 once healed)
        script = self._delay_rules_script(node, specs)
        if script != self._delay_rules.get(node):
            _run([*self.exec_prefix(node), "nft", "-f", "-"], script)
            self._delay_rules[node] = script

    def _delay_rules_script(self, node: str, specs: list[DelaySpec]) -> str:
        """The rules of a node's nat table, replaced in one transaction. The table stays from
        the relay's start to ``destroy``, with its ``tracking`` chain: a namespace's conntrack
        runs only while some rule or chain uses it, and when the last ``dnat`` rule went the
        connections already relayed were no longer translated and were reset (measured)."""
        address = self.address(node)
        # only a connection's first SYN: a connection opened before the table existed was not
        # tracked, and its next segment, seen as new, must not be sent to the relay (reset)
        relay = (f"tcp flags & (syn | ack) == syn "
                 f"dnat to {address}:{self._relays[node].port}")
        output = [f"meta mark {RELAY_MARK:#x} return"]
        prerouting = []
        for spec in specs:
            if spec.target is None:
                output.append(f"ip daddr {self.subnet} ip daddr != {address} {relay}")
                prerouting.append(f'iifname "eth0" {relay}')
            else:
                output.append(f"ip daddr {spec.target} {relay}")
        lines = []
        for hook, rules in (("output", output), ("prerouting", prerouting)):
            lines.append(f"flush chain ip {DELAY_TABLE} {hook}")
            lines += [f"add rule ip {DELAY_TABLE} {hook} {rule}" for rule in rules]
        return "\n".join(lines) + "\n"


def _existing_names() -> tuple[set[str], set[str], set[str]]:
    """Network namespaces, root-namespace interfaces and bridge-family nftables tables now."""
    namespaces = {line.split()[0] for line in _run(["ip", "netns", "list"]).splitlines()
                  if line.strip()}
    links = {line.split(":")[1].strip().split("@")[0]
             for line in _run(["ip", "-o", "link", "show"]).splitlines() if ":" in line}
    tables = {line.split()[-1] for line in _run(["nft", "list", "tables", "bridge"]).splitlines()
              if line.startswith("table ")}
    return namespaces, links, tables


def _remove_namespace(namespace: str) -> None:
    """Kill what still runs inside (by pid), then unmount the namespace: it would live on,
    without a network, for as long as a process holds it."""
    for pid in _run(["ip", "netns", "pids", namespace]).split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    _run(["ip", "netns", "del", namespace])


def remove_isolated_networks(prefix: str) -> list[str]:
    """Remove every namespace, interface and faults table named with ``prefix``, whoever
    created them (a process killed before its ``destroy``); returns what was removed."""
    if not PREFIX_PATTERN.fullmatch(prefix):
        raise ValueError(f"name prefix {prefix!r}: 1-9 characters, a-z then a-z0-9")
    namespaces, links, tables = _existing_names()
    removed = []
    ours = re.compile(rf"{prefix}(br|v\d+|n\d+)")
    for link in sorted(link for link in links if ours.fullmatch(link)):
        _run(["ip", "link", "del", link])  # a veth takes its peer along
        removed.append(f"link {link}")
    for namespace in sorted(name for name in namespaces if name.startswith(f"{prefix}-")):
        _remove_namespace(namespace)
        removed.append(f"netns {namespace}")
    if f"{prefix}_faults" in tables:
        _run(["nft", "delete", "table", "bridge", f"{prefix}_faults"])
        removed.append(f"table bridge {prefix}_faults")
    return removed
