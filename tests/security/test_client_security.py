"""oncelog's own clients on a secured broker: ``--command-config FILE`` (Kafka's names and
librdkafka's, ``oncelog.client.security``) read by every client command and by ``oncelog
verify``, the bootstrap probe over TLS, and the one-line errors of a file that cannot be used -
never echoing a password.

The broker is the test kit's (``oncelog.testing.broker(security="SASL_SSL")``: a CA of its
own, a SCRAM user), one for the module; the commands run as a user runs them, as
subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from oncelog.client.security import SecurityConfigError, client_security, translate
from oncelog.testing import broker as kit_broker
from oncelog.testing.broker import Broker
from oncelog.testing.certificates import CertificateAuthority

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="{user}" password="{password}";')


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A SASL_SSL broker (SCRAM-SHA-512) and a --command-config file in Kafka's names: a
    JAAS line and a PEM truststore, as a Java client's client.properties has them."""
    with kit_broker(security="SASL_SSL") as started:
        kafka_names = tmp_path_factory.mktemp("client") / "client.properties"
        kafka_names.write_text(
            "# written as for kafka-topics.sh --command-config\n"
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=" + JAAS.format(user=started.username,
                                              password=started.password) + "\n"
            f"ssl.truststore.location={started.ca_file}\n"
            "ssl.truststore.type=PEM\n")
        started.kafka_names = kafka_names  # type: ignore[attr-defined]
        yield started


def oncelog(*args: str, input: str | None = None, cwd: Path | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oncelog", *args], input=input,
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def one_line_error(done: subprocess.CompletedProcess, secret: str | None = None) -> str:
    """The command failed with exactly one ``oncelog:`` line, no traceback, no secret."""
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("oncelog: "), done.stderr
    if secret is not None:
        assert secret not in done.stdout + done.stderr
    return lines[0]


# -- the file, translated -----------------------------------------------------------------

def test_kafkas_names_become_librdkafkas(tmp_path):
    ca = CertificateAuthority(tmp_path)
    client = ca.issue("client", client=True)
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=sasl_ssl\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n"
        '    required username="alice" password="p\\"w=;d";\n'
        f"ssl.truststore.location={ca.certificate}\n"
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.password=unused-for-pem\n"
        f"ssl.keystore.location={client.keystore}\n"
        "ssl.keystore.type=PEM\n"
        "ssl.endpoint.identification.algorithm=\n")
    assert client_security(path) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice", "sasl.password": 'p"w=;d',
        "ssl.ca.location": str(ca.certificate), "ssl.key.location": str(client.keystore),
        "ssl.certificate.location": str(client.keystore),
        "ssl.endpoint.identification.algorithm": "none"}
    # PlainLoginModule says its mechanism; librdkafka's own names pass as they are
    assert translate({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config":
                      'org.apache.kafka.common.security.plain.PlainLoginModule required '
                      'username="bob" password="x";'}, "f") == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "bob", "sasl.password": "x"}
    assert translate({"security.protocol": "SSL", "ssl.ca.location": str(ca.certificate)},
                     "f") == {"security.protocol": "SSL", "ssl.ca.location": str(ca.certificate)}


@pytest.mark.parametrize("text, message", [
    ("security.protocol=TLS\n", "security.protocol 'TLS' is not one of PLAINTEXT, SSL, "
                                "SASL_PLAINTEXT, SASL_SSL"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n", "sasl.mechanism 'GSSAPI' is not"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "SASL needs a user"),
    ("security.protocol=SASL_SSL\nsasl.username=a\nsasl.password=hunter2\n",
     "needs sasl.mechanism"),
    ("security.protocol=SSL\nssl.truststore.location=/etc/hostname\n",
     "ssl.truststore.type JKS (the default) is not supported: set ssl.truststore.type=PEM"),
    ("security.protocol=SSL\nssl.ca.location=/no/such/ca.pem\n",
     "ssl.ca.location /no/such/ca.pem: no such file"),
    ("security.protocl=SSL\n", "unknown setting security.protocl"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
     "sasl.jaas.config=ScramLoginModule username=alice password=hunter2\n",
     "sasl.jaas.config is not '<LoginModule> required"),
    ("security.protocol=SASL_SSL\nsasl.jaas.config="
     + JAAS.format(user="a", password="hunter2") + "\n",
     "ScramLoginModule needs sasl.mechanism (SCRAM-SHA-256 or SCRAM-SHA-512)"),
    ("just words\n", "line 1: expected name=value"),
])
def test_a_file_that_cannot_be_used_is_one_sentence_without_its_secrets(tmp_path, text,
                                                                         message):
    path = tmp_path / "client.properties"
    path.write_text(text)
    with pytest.raises(SecurityConfigError) as raised:
        client_security(path)
    assert str(raised.value).startswith(f"{path}: ") or str(raised.value).startswith(
        f"{path}, line"), raised.value
    assert message in str(raised.value)
    assert "hunter2" not in str(raised.value)


# -- the CLI --------------------------------------------------------------------------------

def test_every_client_command_works_through_a_kafka_style_command_config(secured, tmp_path):
    """Topics, records, a group, producers: each command on SASL_SSL with SCRAM-SHA-512,
    configured with Kafka's names (JAAS, a PEM truststore); a relative path to the file works
    from the folder it is relative to."""
    secure = ("-b", secured.bootstrap, "--command-config", "client.properties")
    folder = secured.kafka_names.parent
    run = lambda *args, **kw: oncelog(*args, cwd=folder, **kw)  # noqa: E731
    topic = f"cli-{tmp_path.name[-12:]}"
    done = run("topics", "create", topic, "--partitions", "2", *secure)
    assert done.returncode == 0 and f"created topic {topic}" in done.stdout, done.stderr
    assert topic in run("topics", "list", *secure).stdout
    done = run("produce", topic, "-K", ":", *secure, input="".join(
        f"k{i}:v{i}\n" for i in range(20)))
    assert done.returncode == 0 and "produced 20 records" in done.stderr, done.stderr
    done = run("consume", topic, "--format", "json", "--group", "cli-readers", *secure)
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(line)["value"] for line in done.stdout.splitlines()) == \
        sorted(f"v{i}" for i in range(20))
    done = run("groups", "describe", "cli-readers", *secure)
    assert done.returncode == 0 and f"{topic}\t0\t" in done.stdout, done.stderr
    assert "cli-readers" in run("groups", "list", *secure).stdout
    done = run("topics", "describe", topic, *secure)
    assert done.returncode == 0 and f"topic {topic}: 2 partitions" in done.stdout, done.stderr
    done = run("producers", "describe", topic, *secure)
    assert done.returncode == 0 and "producer id" in done.stdout, done.stderr
    assert secured.password not in "".join(
        run(*args, *secure).stdout for args in (["topics", "list"], ["groups", "list"]))


def test_command_config_errors_are_one_line(secured, tmp_path):
    """A missing file, an unknown protocol, a TLS port reached without the file, a CA that
    did not sign the broker's certificate, and a wrong password: one ``oncelog:`` line each,
    naming the cause, never the password."""
    bootstrap = ("-b", secured.bootstrap)
    line = one_line_error(oncelog("topics", "list", *bootstrap, "--command-config",
                                  str(tmp_path / "missing.properties")))
    assert f"cannot read the client config {tmp_path / 'missing.properties'}: no such file" \
        in line
    unknown = tmp_path / "unknown.properties"
    unknown.write_text("security.protocol=SASL_TLS\nsasl.password=hunter2\n")
    line = one_line_error(oncelog("topics", "list", *bootstrap, "--command-config",
                                  str(unknown)), secret="hunter2")
    assert "security.protocol 'SASL_TLS' is not one of" in line
    line = one_line_error(oncelog("topics", "list", *bootstrap))
    assert "does not answer as a Kafka broker (a TLS listener answers only " \
        "security.protocol=SSL or SASL_SSL, set in --command-config)" in line
    stranger = CertificateAuthority(tmp_path / "other-ca")
    untrusted = tmp_path / "untrusted.properties"
    untrusted.write_text(secured.kafka_names.read_text().replace(
        str(secured.ca_file), str(stranger.certificate)))
    line = one_line_error(oncelog("topics", "list", *bootstrap, "--command-config",
                                  str(untrusted)), secret=secured.password)
    assert "its TLS certificate is not trusted: " in line
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(secured.kafka_names.read_text().replace(secured.password, "hunter2"))
    line = one_line_error(oncelog("topics", "list", *bootstrap, "--command-config",
                                  str(wrong)), secret="hunter2")
    assert f"cannot log in to a broker at {secured.bootstrap}: SASL authentication of " \
        f"{secured.username} with SCRAM-SHA-512 failed: Authentication failed" in line


def test_mutual_tls_with_a_pem_or_pkcs12_keystore(tls_broker, ca, tmp_path):
    """A listener with ``ssl.client.auth=required``: the commands present the client's
    certificate from Kafka's ``ssl.keystore.*`` - a PEM file (key and chain) or a PKCS#12
    store with its password (librdkafka's own meaning) - and without one are refused in one
    line at the probe's handshake."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import (BestAvailableEncryption,
                                                              load_pem_private_key, pkcs12)
    broker = tls_broker({"ssl.client.auth": "required"})
    alice = ca.issue("alice", client=True)
    store = tmp_path / "alice.p12"
    store.write_bytes(pkcs12.serialize_key_and_certificates(
        b"alice", load_pem_private_key(alice.key.read_bytes(), None),
        x509.load_pem_x509_certificate(alice.certificate.read_bytes()), None,
        BestAvailableEncryption(b"store-secret")))
    trust = f"security.protocol=SSL\nssl.truststore.location={ca.certificate}\n"
    for name, keystore in (("pem", f"ssl.keystore.location={alice.keystore}\n"
                                   "ssl.keystore.type=PEM\n"),
                           ("pkcs12", f"ssl.keystore.location={store}\n"
                                      "ssl.keystore.type=PKCS12\n"
                                      "ssl.keystore.password=store-secret\n")):
        config = tmp_path / f"{name}.properties"
        config.write_text(trust + keystore)
        done = oncelog("topics", "create", f"mtls-{name}", "-b", broker.bootstrap,
                       "--command-config", str(config))
        assert done.returncode == 0, (name, done.stderr)
    without = tmp_path / "without.properties"
    without.write_text(trust)
    line = one_line_error(oncelog("topics", "list", "-b", broker.bootstrap,
                                  "--command-config", str(without)))
    assert line == (f"oncelog: cannot reach a broker at {broker.bootstrap}: it closed the TLS "
                    "connection without answering, as a listener with ssl.client.auth=required "
                    "does to a client without a certificate (ssl.keystore.location)")
    bad = tmp_path / "bad.properties"
    bad.write_text(trust + f"ssl.keystore.location={store}\nssl.keystore.type=PKCS12\n"
                           "ssl.keystore.password=not-it\n")
    line = one_line_error(oncelog("topics", "list", "-b", broker.bootstrap,
                                  "--command-config", str(bad)), secret="not-it")
    assert f"cannot read the PKCS#12 keystore {store} (a wrong ssl.keystore.password?)" in line


def test_transactions_and_leader_epochs_over_sasl_ssl(secured):
    """``oncelog transactions`` and the leader epochs of ``topics describe`` send their own
    requests (net.client): over the file's SASL_SSL too - an open transaction listed,
    described and aborted through its coordinator; the epoch a number, not "?"."""
    from confluent_kafka import Producer
    config = {**secured.client_config(), "transactional.id": "cs-txn"}
    created = oncelog("topics", "create", "cs-payments", "-b", secured.bootstrap,
                      "--command-config", str(secured.kafka_names))
    assert created.returncode == 0, created.stderr
    producer = Producer(config)
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce("cs-payments", b"open", partition=0)
    assert producer.flush(15) == 0
    settings = ["-b", secured.bootstrap, "--command-config", str(secured.kafka_names)]
    listed = oncelog("transactions", "list", *settings)
    assert listed.returncode == 0 and "cs-txn" in listed.stdout and "Ongoing" in listed.stdout, \
        listed
    described = oncelog("transactions", "describe", "cs-txn", *settings)
    assert "partitions:       cs-payments-0" in described.stdout, described
    aborted = oncelog("transactions", "abort", "--topic", "cs-payments", "--partition", "0",
                      "--start-offset", "0", *settings)
    assert aborted.returncode == 0 and "through its coordinator" in aborted.stdout, aborted
    topic = oncelog("topics", "describe", "cs-payments", *settings)
    [row] = [line.split("\t") for line in topic.stdout.splitlines() if line.startswith("0\t")]
    assert topic.returncode == 0 and row[2].isdigit(), topic.stdout  # the leader epoch


def test_the_test_kits_client_config_file_is_a_command_config(secured):
    """``Broker.command_config``: librdkafka's names, mode 0600 (it holds the password)."""
    assert secured.command_config.stat().st_mode & 0o077 == 0
    done = oncelog("topics", "list", "-b", secured.bootstrap, "--command-config",
                   str(secured.command_config))
    assert done.returncode == 0, done.stderr


# -- oncelog verify ----------------------------------------------------------------------

@pytest.mark.slow
def test_verify_runs_against_a_sasl_ssl_broker(secured, tmp_path):
    """``oncelog verify --bootstrap --command-config``: producers, the at-least-once consumer
    (killed between processing and committing) and the run's own topic and offset lookups
    all on SASL_SSL; the contract kept, the kill landed, the broker left running."""
    from tests.fault.test_verify import landed
    from tests.fault.verify_run import run_verify
    run = run_verify(tmp_path / "out", "--bootstrap", secured.bootstrap, "--command-config",
                     str(secured.kafka_names), "--semantics", "at-least-once", "--faults",
                     "kill-consumer", "--duration", "8", "--seed", "3", "--rate", "300",
                     timeout=180)
    assert run.returncode == 0, run.explain()
    result = run.result["results"]["at_least_once"]
    assert result["contract_kept"] and result["counts"]["lost"] == 0, run.explain()
    assert result["counts"]["acknowledged"] > 500, run.explain()
    assert landed(run.result, "at_least_once", "kill-consumer"), run.explain()
    assert secured.is_running()
    assert secured.password not in run.stdout + run.stderr + (
        run.out / "result.json").read_text()


def test_verify_refuses_what_a_secured_run_cannot_do(secured, tmp_path):
    """drop-acks's proxy reads Kafka's frames; the brokers verify starts are PLAINTEXT."""
    from tests.fault.verify_run import run_verify
    config = ("--command-config", str(secured.kafka_names))
    run = run_verify(tmp_path / "a", "--bootstrap", secured.bootstrap, *config,
                     "--semantics", "at-least-once", "--faults", "drop-acks", timeout=60)
    assert run.returncode == 2, run.explain()
    assert "drop-acks is not available with security.protocol SASL_SSL" in run.stderr
    run = run_verify(tmp_path / "b", *config, "--semantics", "at-least-once", timeout=60)
    assert run.returncode == 2, run.explain()
    assert "--command-config is for a broker the run did not start" in run.stderr


def test_pipeline_run_reads_the_command_config_before_spark_starts(secured, tmp_path):
    """``oncelog pipeline run``: the file needs --bootstrap (its own broker is PLAINTEXT),
    and a wrong password is one line before any Spark starts."""
    config = ("--command-config", str(secured.kafka_names))
    line = one_line_error(oncelog("pipeline", "run", *config, "--work-dir",
                                  str(tmp_path / "a")))
    assert "--command-config is for a broker of yours (--bootstrap)" in line
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(secured.kafka_names.read_text().replace(secured.password, "hunter2"))
    line = one_line_error(oncelog("pipeline", "run", "-b", secured.bootstrap, "--command-config",
                                  str(wrong), "--work-dir", str(tmp_path / "b")),
                          secret="hunter2")
    assert "SASL authentication of oncelog-test with SCRAM-SHA-512 failed" in line


def test_an_unknown_security_protocol_for_the_kit_is_refused():
    with pytest.raises(ValueError, match="security must be one of SSL, SASL_SSL, "
                                         "SASL_PLAINTEXT, not 'TLS'"):
        Broker(security="TLS")
