"""What ``oncelog cluster start`` leaves in its data directory for the commands run beside it.

``cluster.json``, the running cluster: the pid of the ``cluster start`` that owns it (with the
time that process started, so a later process that reused the pid is not taken for it),
ZooKeeper's connect string and per node its address, pid and log, per broker its pid,
address, log and command line, and for a cluster started with ``--isolated`` its network: the
name prefix of its namespaces, its subnet, each node's address and the faults applied now
(``network`` is null otherwise). It is written after the cluster started and after every
change, atomically (a temporary file renamed over it), and read by:

- ``cluster restart-broker N``, which asks the owner to restart broker N;
- ``cluster status``, which asks each ZooKeeper node its mode (leader, follower, standalone);
- ``cluster stop``, which asks the owner to stop (SIGTERM, as Ctrl-C) and waits until it has;
- the next ``cluster start`` on the folder, which refuses to run while the owner lives (two
  ZooKeepers on one data directory would corrupt it), and with ``--port 0`` gives the brokers
  their last ports back when they are free: a broker back after a crash finds its previous
  registration in ZooKeeper until that session expires, and only one on the same address is
  recognised as itself (one on another address is refused as a duplicate ``node.id``).

``restart-broker-N-<token>.request`` is how ``cluster restart-broker N`` asks. The owner's
loop restarts broker N itself - so the broker stays its child: Ctrl-C stops it with the
others, and it dies with the owner - then writes ``restart-broker-N-<token>.result`` (JSON:
``{"pid": ..., "bootstrap": ...}`` or ``{"error": "one sentence"}``) and removes the
request. Files rather than a Unix socket, whose path may not exceed 107 bytes.

``network-<token>.request`` is how ``cluster partition ...``, ``cluster heal`` and ``cluster
partition list`` ask, the same way: the request holds one JSON object (``{"action":
"isolate", "nodes": ["broker-2"]}``, written to a temporary file and renamed, so the owner
never reads half of one), the owner applies it to the network it created - the nftables rules
and the delay relays live in that process - and answers ``{"caption": ...}``, ``{"faults":
[...]}`` or ``{"error": "one sentence"}`` in ``network-<token>.result``.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

STATE_FILE = "cluster.json"
REQUEST_SUFFIX = ".request"
RESULT_SUFFIX = ".result"


def process_start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, from /proc), or None if unknown."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid: int | None, started: int | None = None) -> bool:
    """Whether ``pid`` runs and, when ``started`` is known, is still the process that started
    then (not a zombie either)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return started is None  # no /proc: the signal check is all there is
    return fields[0] != "Z" and (started is None or int(fields[19]) == started)


# -- cluster.json ---------------------------------------------------------------------------

def write_state(data_dir: Path, local) -> None:
    """``local`` (a started ``LocalCluster``) as owned by this process."""
    state = {
        "owner": {"pid": os.getpid(), "started": process_start_time(os.getpid())},
        # SASL_SSL for a cluster started with --secure (its files in <data-dir>/secure)
        "security_protocol": local.security_protocol,
        "zookeeper": None if local.ensemble is None else {
            "connect": local.zookeeper_connect,
            "nodes": {str(server_id): {"address": node.connect_string, "pid": node.pid,
                                       "log": str(node.log_path)}
                      for server_id, node in local.ensemble.nodes.items()}},
        "brokers": {str(node_id): {
            "pid": process.pid, "bootstrap": process.bootstrap, "port": process.port,
            "log": str(process.log_path), "command": process.command()}
            for node_id, process in local.brokers.items()},
        "network": None if local.network is None else {
            "prefix": local.network.prefix, "subnet": str(local.network.subnet),
            "bridge": local.network.bridge,
            "nodes": {node: local.network.address(node) for node in local.network.nodes},
            "faults": [fault.caption for fault in local.network.faults()]},
    }
    temporary = data_dir / f".{STATE_FILE}.{os.getpid()}"
    temporary.write_text(json.dumps(state, indent=1) + "\n")
    temporary.replace(data_dir / STATE_FILE)


def read_state(data_dir: Path) -> dict | None:
    try:
        return json.loads((data_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def running_owner(data_dir: Path) -> int | None:
    """The pid of the ``cluster start`` running the cluster in ``data_dir``, if one does."""
    state = read_state(data_dir)
    owner = (state or {}).get("owner") or {}
    return owner["pid"] if alive(owner.get("pid"), owner.get("started")) else None


def zookeeper_nodes(data_dir: Path) -> dict[int, dict]:
    """Per ZooKeeper node the cluster in ``data_dir`` started: its address, pid and log (none
    when no cluster was started there, or it was given an ensemble of its own)."""
    recorded = ((read_state(data_dir) or {}).get("zookeeper") or {}).get("nodes") or {}
    return {int(server_id): node for server_id, node in recorded.items()
            if str(server_id).isdigit()}


def wait_for_exit(pid: int, started: int | None, timeout_s: float) -> bool:
    """True once ``pid`` (the process that started at ``started``) is gone."""
    deadline = time.monotonic() + timeout_s
    while alive(pid, started):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def network(data_dir: Path) -> dict | None:
    """The network of the isolated cluster started in ``data_dir`` (prefix, subnet, bridge,
    node -> address, the faults' captions), or None."""
    return (read_state(data_dir) or {}).get("network")


def previous_ports(data_dir: Path, brokers: int) -> list[int | None]:
    """Per broker 1..``brokers``: the port it had when the cluster last ran here, or None."""
    recorded = ((read_state(data_dir) or {}).get("brokers")) or {}
    return [recorded.get(str(node_id), {}).get("port") for node_id in range(1, brokers + 1)]


# -- restart requests -----------------------------------------------------------------------

class _RequestFile:
    """A request file and its result beside it (``<name>.request``, ``<name>.result``)."""
    path: Path

    @property
    def result_path(self) -> Path:
        return self.path.with_suffix(RESULT_SUFFIX)

    def answer(self, result: dict) -> None:
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(result) + "\n")
        temporary.replace(self.result_path)
        self.path.unlink(missing_ok=True)


@dataclass(frozen=True)
class RestartRequest(_RequestFile):
    node_id: int
    path: Path

    @property
    def what(self) -> str:
        return f"restart broker {self.node_id}"


def ask_restart(data_dir: Path, node_id: int) -> RestartRequest:
    request = RestartRequest(node_id, data_dir / f"restart-broker-{node_id}-"
                                                 f"{secrets.token_hex(4)}{REQUEST_SUFFIX}")
    request.path.write_text(f"{os.getpid()}\n")
    return request


def pending_requests(data_dir: Path) -> list[RestartRequest]:
    requests = []
    for path in sorted(data_dir.glob(f"restart-broker-*{REQUEST_SUFFIX}")):
        node = path.name[len("restart-broker-"):].split("-", 1)[0]
        if node.isdigit():
            requests.append(RestartRequest(int(node), path))
    return requests


# -- network requests -----------------------------------------------------------------------

NETWORK_REQUEST = "network-"


@dataclass(frozen=True)
class NetworkRequest(_RequestFile):
    """One ``cluster partition ...``/``cluster heal`` request: ``action`` is the JSON object
    the asking command wrote (``{}`` when the file could not be read as one)."""
    action: dict
    path: Path

    @property
    def what(self) -> str:
        return f"apply {self.action.get('action', 'a network request')}"


def ask_network(data_dir: Path, action: dict) -> NetworkRequest:
    path = data_dir / f"{NETWORK_REQUEST}{secrets.token_hex(4)}{REQUEST_SUFFIX}"
    temporary = path.with_suffix(".asking")
    temporary.write_text(json.dumps(action) + "\n")
    temporary.replace(path)
    return NetworkRequest(action, path)


def pending_network_requests(data_dir: Path) -> list[NetworkRequest]:
    requests = []
    for path in sorted(data_dir.glob(f"{NETWORK_REQUEST}*{REQUEST_SUFFIX}")):
        try:
            action = json.loads(path.read_text())
        except (OSError, ValueError):
            action = {}
        requests.append(NetworkRequest(action if isinstance(action, dict) else {}, path))
    return requests


def wait_for_answer(request: RestartRequest | NetworkRequest, owner_pid: int,
                    timeout_s: float) -> dict:
    """The owner's answer; ``{"error": ...}`` if the owner died or did not answer in time
    (the request is then withdrawn)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            result = json.loads(request.result_path.read_text())
        except (OSError, ValueError):
            result = None
        if result is not None:
            request.result_path.unlink(missing_ok=True)
            return result
        if not alive(owner_pid):
            request.path.unlink(missing_ok=True)
            return {"error": f"the oncelog cluster start that ran the cluster (pid "
                             f"{owner_pid}) exited"}
        time.sleep(0.2)
    request.path.unlink(missing_ok=True)
    return {"error": f"the oncelog cluster start that runs the cluster (pid {owner_pid}) did "
                     f"not {request.what} within {timeout_s:g} s; its terminal may say why"}


# -- applying a network request (in the owner) ---------------------------------------------

NOT_ISOLATED = "this cluster was not started with --isolated"


def answer_network_request(local, action: dict) -> dict:
    """What the owner answers to one network request, after applying it to ``local`` (a
    started ``LocalCluster``): ``{"caption": ..., "faults": [...]}`` for a new fault,
    ``{"healed": [...], "faults": []}`` for heal, ``{"faults": [...]}`` for list, or
    ``{"error": "one sentence"}`` (nothing applied). Nodes are named as the user typed them:
    a broker id (``2``), ``broker-N`` or ``zookeeper-N``."""
    from .isolation import IsolationError
    if local.network is None:
        return {"error": NOT_ISOLATED}
    kind = action.get("action")
    try:
        if kind == "list":
            return {"faults": [fault.caption for fault in local.faults()]}
        if kind == "heal":
            healed = [fault.caption for fault in local.faults()]
            local.heal()
            return {"healed": healed, "faults": []}
        fault = _apply_fault(local, kind, action)
    except _Refused as refused:
        return {"error": str(refused)}
    except (ValueError, IsolationError, TypeError, KeyError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        return {"error": f"the {kind} request lacks {message}" if isinstance(error, KeyError)
                else message}
    return {"caption": fault.caption, "faults": [f.caption for f in local.faults()]}


class _Refused(Exception):
    """A request the owner turns down before touching the network: one sentence."""


def _apply_fault(local, kind, action: dict):
    if kind == "isolate":
        return local.isolate(_node(local, action["node"]))
    if kind == "split":
        side_a, side_b = ([_node(local, node) for node in side] for side in action["sides"])
        both = [node for node in side_a if node in side_b]
        if both:
            raise _Refused(f"{', '.join(dict.fromkeys(both))} on both sides of the split: "
                           f"name each node on one side only")
        if not side_a or not side_b:
            raise _Refused("a split needs a node on each side")
        return local.split(side_a, side_b)
    if kind == "cut":
        return local.cut(_node(local, action["from"]), _node(local, action["to"]))
    if kind == "cut_from_zookeeper":
        broker = _node(local, action["broker"])
        if not broker.startswith("broker-"):
            raise _Refused(f"{broker} is not a broker: only a broker is cut from ZooKeeper")
        return local.cut_from_zookeeper(broker)
    if kind == "slow":
        other = action.get("to")
        return local.slow(_node(local, action["node"]),
                          None if other is None else _node(local, other),
                          delay_ms=float(action.get("delay_ms", 0)),
                          jitter_ms=float(action.get("jitter_ms", 0)),
                          loss_percent=float(action.get("loss_percent", 0)))
    raise _Refused(f"unknown network request {kind!r} (from another oncelog version?)")


def _node(local, typed) -> str:
    """``broker-N`` for a broker id, else the name as typed, once the network has it."""
    name = f"broker-{typed}" if str(typed).isdigit() else str(typed)
    nodes = local.network.nodes
    if name not in nodes:
        raise _Refused(f"this cluster has no node {typed} (its nodes: {', '.join(nodes)}; a "
                       f"number is a broker id)")
    return name
