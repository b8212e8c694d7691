"""A real ZooKeeper for the tests, and helpers to use it.

The ``zookeeper`` fixture (``tests/conftest.py``) starts one ``ZooKeeperProcess`` (Debian's
ZooKeeper 3.8, installed by ``scripts/setup.sh``) for the whole run and stops it by pid; the
``zookeeper_connect`` fixture gives each test a ``zookeeper.connect`` string with a fresh
chroot (``/test-<uuid>``), so tests never see each other's znodes. Its tick is 100 ms, so
sessions of 1 s are granted.

``expire_session(store)`` ends a store's session from outside the way ZooKeeper's own tests do:
a second client attaches to the same session id and password and closes it. The store learns
of it as after a pause longer than its session timeout: on its next reconnection the server
answers "session expired".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kazoo.client import KazooClient

from oncelog.cluster.zookeeper_ensemble import ZooKeeperEnsemble
from oncelog.cluster.zookeeper_process import ZooKeeperProcess


def start_zookeeper(directory: Path) -> ZooKeeperProcess:
    return ZooKeeperProcess(directory).start()


def start_zookeeper_ensemble(directory: Path, nodes: int = 3) -> ZooKeeperEnsemble:
    """``nodes`` ZooKeeper servers, started, once one leads and the others follow."""
    return ZooKeeperEnsemble(directory, nodes).start()


def fresh_chroot() -> str:
    return f"/test-{uuid.uuid4().hex[:12]}"


def raw_client(connect: str, timeout_s: float = 2.0) -> KazooClient:
    """A plain kazoo client (no chroot handling of ours), started."""
    client = KazooClient(hosts=connect, timeout=timeout_s)
    client.start(timeout=10)
    return client


def expire_session(store) -> None:
    """End ``store``'s current session (a ``ZooKeeperMetadataStore``) from another client."""
    session_id, password = store.client.client_id
    other = KazooClient(hosts=store.hosts, client_id=(session_id, password),
                        timeout=store.session_timeout_ms / 1000)
    other.start(timeout=10)
    other.stop()
    other.close()


def wait_for(predicate: Callable[[], object], timeout_s: float = 10.0,
             what: str = "condition", interval_s: float = 0.02) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"{what} did not hold within {timeout_s} s")
