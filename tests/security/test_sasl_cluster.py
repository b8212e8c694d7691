"""SCRAM users on a cluster: kept in ZooKeeper (``/config/users/<name>``, Kafka's layout), made
and deleted with ``oncelog users --zookeeper`` while the brokers run, and taking effect on every
broker's SASL listener."""

from __future__ import annotations

import subprocess
import sys
import time

from oncelog.broker.process import free_port
from oncelog.controller.store import MetadataChange
from oncelog.controller.zookeeper_store import ZooKeeperMetadataStore
from oncelog.protocol import messages
from oncelog.security.scram import ScramCredential
from tests.cluster.helpers import FAST
from tests.integration.raw import RawConnection


def test_credentials_written_by_one_store_are_read_and_announced_to_another(zookeeper_connect):
    writer = ZooKeeperMetadataStore(zookeeper_connect, session_timeout_ms=2000).connect()
    reader = ZooKeeperMetadataStore(zookeeper_connect, session_timeout_ms=2000).connect()
    try:
        events: list = []
        reader.watch(events.append)
        reader.watch_users()
        credential = ScramCredential.from_password("SCRAM-SHA-512", "pw").to_text()
        writer.alter_scram_credential("alice", "SCRAM-SHA-512", credential)
        deadline = time.monotonic() + 10
        while not any(e.change is MetadataChange.USERS for e in events):
            assert time.monotonic() < deadline, events
            time.sleep(0.05)
        assert reader.scram_credentials() == {"alice": {"SCRAM-SHA-512": credential}}
        events.clear()
        writer.alter_scram_credential("alice", "SCRAM-SHA-512", None)
        while not any(e.change is MetadataChange.USERS for e in events):
            assert time.monotonic() < deadline, events
            time.sleep(0.05)
        assert reader.scram_credentials() == {}
    finally:
        writer.close()
        reader.close()


def _authenticates(bootstrap: str, user: str, password: str) -> bool:
    with RawConnection(bootstrap) as raw:
        handshake = raw.request(messages.SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert handshake.error_code == 0
        answer = raw.request(messages.SaslAuthenticateRequest(
            auth_bytes=f"\x00{user}\x00{password}".encode()), 1)
        return answer.error_code == 0


def _users(*args: str, password: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oncelog", "users", *args],
                          input=password and password + "\n", capture_output=True, text=True,
                          timeout=60)


def test_a_user_added_and_deleted_at_run_time_counts_on_every_broker(broker_factory,
                                                                     zookeeper_connect):
    sasl_listeners = []
    for node_id in (1, 2):
        port, sasl_port = free_port(), free_port()
        broker_factory(port=port, name=f"b{node_id}", settings={
            **FAST, "zookeeper.connect": zookeeper_connect, "node.id": str(node_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "sasl.enabled.mechanisms": "PLAIN"})
        sasl_listeners.append(f"127.0.0.1:{sasl_port}")
    assert not any(_authenticates(b, "alice", "alice-pw") for b in sasl_listeners)
    added = _users("add", "alice", "--zookeeper", zookeeper_connect, password="alice-pw")
    assert added.returncode == 0, added.stderr
    deadline = time.monotonic() + 15
    while not all(_authenticates(b, "alice", "alice-pw") for b in sasl_listeners):
        assert time.monotonic() < deadline, "a broker did not learn of the new user"
        time.sleep(0.2)
    assert not any(_authenticates(b, "alice", "wrong") for b in sasl_listeners)
    listed = _users("list", "--zookeeper", zookeeper_connect)
    assert "alice\tSCRAM-SHA-512\t4096" in listed.stdout, listed
    deleted = _users("delete", "alice", "--zookeeper", zookeeper_connect)
    assert deleted.returncode == 0, deleted.stderr
    while any(_authenticates(b, "alice", "alice-pw") for b in sasl_listeners):
        assert time.monotonic() < deadline, "a broker still lets a deleted user in"
        time.sleep(0.2)
