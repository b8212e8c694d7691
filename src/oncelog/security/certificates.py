"""A throwaway certificate authority for TLS listeners on one machine (the test kit's, as
``oncelog.testing.certificates``, and ``oncelog cluster start --secure``'s) and the PEM
files Kafka's settings name (``ssl.keystore.location``: the private key and the certificate
chain in one file; ``ssl.truststore.location``: the authority).

    ca = CertificateAuthority(tmp_path / "tls")
    broker = ca.issue("broker", hosts=["127.0.0.1", "localhost"])
    alice = ca.issue("alice", client=True)
    settings = {"ssl.keystore.location": str(broker.keystore),
                "ssl.truststore.location": str(ca.certificate)}

Keys are EC (P-256): made in a millisecond, where RSA takes tens. ``key_password`` encrypts a
keystore's key (PKCS #8), as ``ssl.key.password`` then decrypts it. Certificates are valid
for ``valid_days`` (2 by default). The authority's key is kept in memory only, never written:
an authority issues what it is asked for while it lives, and nothing afterwards. Nothing here
is fit for production: a deployment's authority is its own.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID



@dataclass(frozen=True)
class Issued:
    """One party's files: ``keystore`` (key and chain, as ``ssl.keystore.location`` wants
    it), and the key and the certificate apart (as librdkafka's ``ssl.key.location`` and
    ``ssl.certificate.location``, kafka-python's ``ssl_keyfile``/``ssl_certfile`` want them)."""
    name: str
    keystore: Path
    key: Path
    certificate: Path


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "oncelog test CA",
                 valid_days: int = 2) -> None:
        self.directory = Path(directory)
        self._valid = datetime.timedelta(days=valid_days)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self._certificate = (
            x509.CertificateBuilder().subject_name(self._name).issuer_name(self._name)
            .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + self._valid)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256()))
        self.certificate = self.directory / "ca.pem"  # ssl.truststore.location, ssl.ca.location
        self.certificate.write_bytes(self._certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, *, hosts: list[str] | tuple[str, ...] = ("127.0.0.1", "localhost"),
              client: bool = False, key_password: str | None = None,
              subject: list[tuple[str, str]] | None = None) -> Issued:
        """A key and a certificate signed by this authority: for a server at ``hosts`` (its
        subject alternative names), or with ``client`` for a client whose subject is
        ``CN=name`` (or ``subject``, (attribute, value) pairs from the most general, e.g.
        ``[("O", "acme"), ("CN", "alice")]``)."""
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = {"CN": NameOID.COMMON_NAME, "O": NameOID.ORGANIZATION_NAME,
                      "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "C": NameOID.COUNTRY_NAME,
                      "L": NameOID.LOCALITY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME}
        subject_name = x509.Name([x509.NameAttribute(attributes[a], v)
                                  for a, v in (subject or [("CN", name)])])
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder().subject_name(subject_name).issuer_name(self._name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + self._valid)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.CLIENT_AUTH] if client else
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False))
        if not client:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(key_password.encode()) if key_password
            else serialization.NoEncryption())
        key_pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8, encryption)
        chain_pem = (certificate.public_bytes(serialization.Encoding.PEM)
                     + self._certificate.public_bytes(serialization.Encoding.PEM))
        paths = Issued(name, self.directory / f"{name}.keystore.pem",
                       self.directory / f"{name}.key.pem", self.directory / f"{name}.pem")
        for path, content in ((paths.keystore, key_pem + chain_pem), (paths.key, key_pem),
                              (paths.certificate, chain_pem)):
            path.touch(mode=0o600)
            path.write_bytes(content)
        return paths
