"""Fixtures of the security tests: a certificate authority and brokers on TLS listeners."""

from __future__ import annotations

import pytest

from oncelog.broker.process import free_port
from oncelog.testing.certificates import CertificateAuthority


@pytest.fixture(scope="session")
def java_probe(tmp_path_factory):
    """The Java client's probe (tests/integration/java_client.py), compiled once."""
    from tests.integration.java_client import JavaProbe
    return JavaProbe.compile(tmp_path_factory.mktemp("java-probe"))


@pytest.fixture
def ca(tmp_path) -> CertificateAuthority:
    return CertificateAuthority(tmp_path / "tls")


@pytest.fixture
def tls_broker(broker_factory, ca):
    """Start a broker whose only listener is SSL on 127.0.0.1, with ``settings`` on top."""
    keystore = ca.issue("broker").keystore

    def start(settings: dict[str, str] | None = None, **kwargs):
        port = free_port()
        return broker_factory(port=port, settings={
            "listeners": f"SSL://127.0.0.1:{port}",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(ca.certificate),
            **(settings or {})}, **kwargs)
    return start


PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}


def add_user(data_dir, name: str, mechanism: str, password: str | None = None) -> None:
    """``oncelog users add`` as a user types it: the password on standard input."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "oncelog", "users", "add", name,
                           "--mechanism", mechanism, "--data-dir", str(data_dir)],
                          input=(password or PASSWORDS[name]) + "\n", capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def sasl_broker(broker_factory, ca, tmp_path):
    """Start a broker with one SASL_SSL listener (SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN)
    and a SASL_PLAINTEXT one, whose users are alice (SCRAM-SHA-512) and bob (SCRAM-SHA-256),
    made with ``oncelog users add`` before it starts; ``settings`` on top."""
    keystore = ca.issue("broker").keystore

    def start(settings: dict[str, str] | None = None, **kwargs):
        data_dir = tmp_path / "sasl" / "data"
        add_user(data_dir, "alice", "SCRAM-SHA-512")
        add_user(data_dir, "bob", "SCRAM-SHA-256")
        port, plain_port = free_port(), free_port()
        broker = broker_factory(port=port, name="sasl", settings={
            "listeners": f"SASL_SSL://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{plain_port}",
            "ssl.keystore.location": str(keystore),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
            "inter.broker.listener.name": "SASL_SSL",
            **(settings or {})}, **kwargs)
        broker.plaintext_bootstrap = f"127.0.0.1:{plain_port}"
        return broker
    return start
