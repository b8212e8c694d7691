"""What ``oncelog cluster start`` leaves in its data directory for the commands run beside it.

``cluster.json``, the running cluster: the pid of the ``cluster start`` that owns it (with the
time that process started, so a later process that reused the pid is not taken for it),
ZooKeeper's connect string and per node its address, pid and log, and per broker its pid,
address, log and command line. It is written after the cluster started and after every
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
        "zookeeper": None if local.ensemble is None else {
            "connect": local.zookeeper_connect,
            "nodes": {str(server_id): {"address": node.connect_string, "pid": node.pid,
                                       "log": str(node.log_path)}
                      for server_id, node in local.ensemble.nodes.items()}},
        "brokers": {str(node_id): {
            "pid": process.pid, "bootstrap": process.bootstrap, "port": process.port,
            "log": str(process.log_path), "command": process.command()}
            for node_id, process in local.brokers.items()},
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


def previous_ports(data_dir: Path, brokers: int) -> list[int | None]:
    """Per broker 1..``brokers``: the port it had when the cluster last ran here, or None."""
    recorded = ((read_state(data_dir) or {}).get("brokers")) or {}
    return [recorded.get(str(node_id), {}).get("port") for node_id in range(1, brokers + 1)]


# -- restart requests -----------------------------------------------------------------------

@dataclass(frozen=True)
class RestartRequest:
    node_id: int
    path: Path

    @property
    def result_path(self) -> Path:
        return self.path.with_suffix(RESULT_SUFFIX)

    def answer(self, result: dict) -> None:
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(result) + "\n")
        temporary.replace(self.result_path)
        self.path.unlink(missing_ok=True)


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


def wait_for_answer(request: RestartRequest, owner_pid: int, timeout_s: float) -> dict:
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
                     f"not restart broker {request.node_id} within {timeout_s:g} s; its "
                     f"terminal may say why"}
