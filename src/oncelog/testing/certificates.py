"""Certificates for tests of TLS listeners: the certificate authority of
``oncelog.security.certificates``, under the kit's name.

    ca = CertificateAuthority(tmp_path / "tls")
    broker = ca.issue("broker", hosts=["127.0.0.1", "localhost"])
    alice = ca.issue("alice", client=True)
    settings = {"ssl.keystore.location": str(broker.keystore),
                "ssl.truststore.location": str(ca.certificate)}
"""

from __future__ import annotations

from ..security.certificates import CertificateAuthority, Issued

__all__ = ["CertificateAuthority", "Issued"]
