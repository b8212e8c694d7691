"""Fixtures of the security tests: a certificate authority and brokers on TLS listeners."""

from __future__ import annotations

import pytest

from oncelog.broker.process import free_port
from oncelog.testing.certificates import CertificateAuthority


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
