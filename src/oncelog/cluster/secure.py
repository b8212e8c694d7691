"""A cluster secured end to end on one machine: every broker's one listener is SASL_SSL, for
clients and for the brokers themselves (``oncelog cluster start --secure``, the security
tests).

``prepare(directory)`` writes, in ``directory`` (the cluster's ``secure/``):

- ``tls/``: a certificate authority's certificate (``ca.pem``) and the brokers' keystore
  (one certificate for 127.0.0.1 and localhost; the authority's key is never written);
- ``passwords.json``: the SCRAM-SHA-512 passwords of the ``broker`` user (brokers log in to
  each other as it) and the ``admin`` user (for people and tools), made once and kept for the
  next start;
- ``broker.properties``: the brokers' settings, the inter-broker login among them (read with
  ``--config``, never given on a command line);
- ``client.properties``: librdkafka's settings for the admin (confluent-kafka, ``kcat -F``);
- ``client-java.properties``: the same for Kafka's tools and the Java client
  (``--command-config``).

Every file holding a password is the user's alone (0600). ``add_users`` writes both users'
credentials into the cluster's ZooKeeper (salted: ZooKeeper never sees a password) before the
brokers start. ZooKeeper itself stays on loopback without authentication: only this machine
reaches it.
"""

from __future__ import annotations

import json
import secrets
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from ..net.connector import Connector
from ..security.acl import AUTHORIZER_CLASSES
from ..security.certificates import CertificateAuthority
from ..security.login import SaslLogin
from ..security.scram import ScramCredential

MECHANISM = "SCRAM-SHA-512"
BROKER_USER = "broker"
ADMIN_USER = "admin"
PROTOCOL = "SASL_SSL"
_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class SecureFiles:
    directory: Path
    ca_file: Path
    keystore: Path
    broker_properties: Path
    client_properties: Path
    java_properties: Path
    passwords: dict[str, str] = field(repr=False)

    @property
    def admin_password(self) -> str:
        return self.passwords[ADMIN_USER]

    def client_config(self) -> dict[str, str]:
        """librdkafka's settings for the admin user (as ``client.properties`` holds them)."""
        return {"security.protocol": PROTOCOL, "sasl.mechanism": MECHANISM,
                "sasl.username": ADMIN_USER, "sasl.password": self.admin_password,
                "ssl.ca.location": str(self.ca_file)}

    def connector(self) -> Connector:
        """oncelog's own client (``cluster status``) logged in as the admin."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        return Connector(PROTOCOL, context, SaslLogin(MECHANISM, ADMIN_USER,
                                                      self.admin_password))

    def add_users(self, zookeeper_connect: str) -> None:
        """Both users' SCRAM credentials in the cluster's ZooKeeper (``/config/users``)."""
        from ..controller.zookeeper_store import ZooKeeperMetadataStore
        store = ZooKeeperMetadataStore(zookeeper_connect, session_timeout_ms=6000).connect()
        try:
            for user, password in sorted(self.passwords.items()):
                credential = ScramCredential.from_password(MECHANISM, password)
                store.alter_scram_credential(user, MECHANISM, credential.to_text())
        finally:
            store.close()


def load(directory: Path) -> SecureFiles | None:
    """The files ``prepare`` wrote in ``directory``, or None when it wrote none there."""
    directory = Path(directory).absolute()
    try:
        passwords = {k: str(v) for k, v in
                     json.loads((directory / "passwords.json").read_text()).items()}
    except (OSError, ValueError):
        return None
    return SecureFiles(directory, directory / "tls" / "ca.pem",
                       directory / "tls" / "broker.keystore.pem",
                       directory / "broker.properties", directory / "client.properties",
                       directory / "client-java.properties", passwords)


def jaas(user: str, password: str) -> str:
    return f'{_MODULE} required username="{user}" password="{password}";'


def prepare(directory: Path, passwords: dict[str, str] | None = None) -> SecureFiles:
    """The secured cluster's files in ``directory`` (new certificates every time; the
    passwords of an earlier run, or ``passwords``, or new ones)."""
    directory = Path(directory).absolute()  # the files name each other from any folder
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    ca = CertificateAuthority(directory / "tls", name="oncelog cluster CA", valid_days=365)
    keystore = ca.issue("broker").keystore
    stored = directory / "passwords.json"
    if passwords is None:
        try:
            passwords = {k: str(v) for k, v in json.loads(stored.read_text()).items()}
        except (OSError, ValueError):
            passwords = {}
        for user in (BROKER_USER, ADMIN_USER):
            passwords.setdefault(user, secrets.token_urlsafe(18))
    _private(stored, json.dumps(passwords, indent=1) + "\n")
    files = SecureFiles(directory, ca.certificate, keystore, directory / "broker.properties",
                        directory / "client.properties",
                        directory / "client-java.properties", dict(passwords))
    _private(files.broker_properties, broker_properties(files, passwords[BROKER_USER]))
    _private(files.client_properties, "".join(
        f"{k}={v}\n" for k, v in files.client_config().items()))
    _private(files.java_properties, (
        f"security.protocol={PROTOCOL}\nsasl.mechanism={MECHANISM}\n"
        f"sasl.jaas.config={jaas(ADMIN_USER, files.admin_password)}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca.certificate}\n"))
    return files


def broker_properties(files: SecureFiles, broker_password: str) -> str:
    """Every broker's security settings (its listener itself is given per broker)."""
    return (f"security.inter.broker.protocol={PROTOCOL}\n"
            f"sasl.enabled.mechanisms={MECHANISM}\n"
            f"sasl.mechanism.inter.broker.protocol={MECHANISM}\n"
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config="
            f"{jaas(BROKER_USER, broker_password)}\n"
            f"ssl.keystore.location={files.keystore}\n"
            f"ssl.truststore.location={files.ca_file}\n"
            # ACLs on: the brokers and the admin are super users, as Kafka's would be
            f"authorizer.class.name={AUTHORIZER_CLASSES[1]}\n"
            f"super.users=User:{BROKER_USER};User:{ADMIN_USER}\n")


def _private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (from the first byte)."""
    path.unlink(missing_ok=True)
    path.touch(mode=0o600)
    path.write_text(text)
