"""TLS listeners (Kafka's SSL security protocol, PEM files as KIP-651 reads them) with the
real clients: confluent-kafka, kafka-python, aiokafka, kcat and the Java client; mutual TLS
(``ssl.client.auth=required``); and what a TLS port does with clients that do not speak TLS
and with TLS settings that cannot be used."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import sys
import time
import warnings

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.broker.process import free_port

RECORDS = 300
VALUE = b"x" * 2000  # ~600 KB a fetch: the fetch path that sends log ranges without sendfile


def _confluent(bootstrap: str, ca, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(ca.certificate), **extra}


def _produce_and_read_back(config: dict, topic: str) -> list[bytes]:
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
    producer = Producer({**config, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, key=str(i).encode(), value=VALUE)
    assert producer.flush(20) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    keys = []
    deadline = time.monotonic() + 30
    while len(keys) < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            assert message.value() == VALUE
            keys.append(message.key())
    consumer.close()
    return keys


def test_confluent_kafka_produces_and_consumes_over_tls(tls_broker, ca):
    broker = tls_broker()
    keys = _produce_and_read_back(_confluent(broker.bootstrap, ca), "tls-confluent")
    assert keys == [str(i).encode() for i in range(RECORDS)]


def test_kafka_python_and_aiokafka_over_tls(tls_broker, ca):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    from kafka import KafkaConsumer, KafkaProducer

    broker = tls_broker()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, security_protocol="SSL",
                             ssl_cafile=str(ca.certificate), acks="all")
    for i in range(50):
        producer.send("tls-python", value=f"kp-{i}".encode(), partition=0)
    producer.flush(20)
    producer.close()

    async def aiokafka_round() -> list[bytes]:
        context = create_ssl_context(cafile=str(ca.certificate))
        aio_producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                        security_protocol="SSL", ssl_context=context)
        await aio_producer.start()
        try:
            for i in range(50):
                await aio_producer.send_and_wait("tls-python", f"aio-{i}".encode(), partition=0)
        finally:
            await aio_producer.stop()
        consumer = AIOKafkaConsumer("tls-python", bootstrap_servers=broker.bootstrap,
                                    security_protocol="SSL", ssl_context=context,
                                    auto_offset_reset="earliest", group_id=None)
        await consumer.start()
        try:
            values = []
            while len(values) < 100:
                batch = await consumer.getmany(timeout_ms=10000)
                assert batch, f"aiokafka read {len(values)} of 100 over TLS"
                values += [r.value for records in batch.values() for r in records]
            return values
        finally:
            await consumer.stop()

    values = asyncio.run(aiokafka_round())
    expected = [f"kp-{i}".encode() for i in range(50)] + [f"aio-{i}".encode() for i in range(50)]
    assert values == expected
    consumer = KafkaConsumer("tls-python", bootstrap_servers=broker.bootstrap,
                             security_protocol="SSL", ssl_cafile=str(ca.certificate),
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    assert [r.value for _, r in zip(range(100), consumer)] == expected
    consumer.close()


def test_kcat_over_tls(tls_broker, ca):
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is missing: `make setup` installs it"
    broker = tls_broker()
    tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={ca.certificate}"]
    produced = subprocess.run([kcat, "-b", broker.bootstrap, *tls, "-P", "-t", "tls-kcat"],
                              input="one\ntwo\nthree\n", capture_output=True, text=True,
                              timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run([kcat, "-b", broker.bootstrap, *tls, "-C", "-t", "tls-kcat",
                               "-o", "beginning", "-c", "3", "-e"],
                              capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["one", "two", "three"]


@pytest.mark.slow
def test_the_java_client_over_tls_with_a_pem_truststore(tls_broker, ca, java_probe):
    broker = tls_broker()
    probe = java_probe
    tls = ("security.protocol=SSL ssl.truststore.type=PEM "
           f"ssl.truststore.location={ca.certificate}")
    run = probe.run(broker.bootstrap,
                    f"producer name=p acks=all {tls}",
                    "send producer=p topic=tls-java count=20 partition=0",
                    f"consumer name=c topics=tls-java auto.offset.reset=earliest {tls}",
                    "poll consumer=c count=20")
    polled = [e for e in run.events if e.get("event") == "record"]
    assert [e["value"] for e in polled] == [f"value-{i}" for i in range(20)], run.explain()


def test_mutual_tls_admits_a_client_with_a_certificate_and_refuses_one_without(tls_broker, ca):
    broker = tls_broker({"ssl.client.auth": "required"})
    alice = ca.issue("alice", client=True)
    with_certificate = _confluent(broker.bootstrap, ca, **{
        "ssl.certificate.location": str(alice.certificate),
        "ssl.key.location": str(alice.key)})
    assert AdminClient(with_certificate).list_topics(timeout=10).brokers
    without = AdminClient(_confluent(broker.bootstrap, ca))
    with pytest.raises(KafkaException):
        without.list_topics(timeout=3)
    log = broker.log_path.read_text()
    assert "TLS handshake failed" in log and "PEER_DID_NOT_RETURN_A_CERTIFICATE" in log, log


def test_a_client_that_does_not_trust_the_brokers_authority_cannot_connect(tls_broker, ca,
                                                                           tmp_path):
    from oncelog.testing.certificates import CertificateAuthority

    broker = tls_broker()
    stranger = CertificateAuthority(tmp_path / "other", name="another CA")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL",
                         "ssl.ca.location": str(stranger.certificate)})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def _kafka_request_bytes() -> bytes:
    """An ApiVersions v0 request as a PLAINTEXT client sends it first."""
    body = (18).to_bytes(2, "big") + (0).to_bytes(2, "big") + (1).to_bytes(4, "big") + \
        (4).to_bytes(2, "big") + b"test"
    return len(body).to_bytes(4, "big") + body


def _closed_by_the_broker(client: socket.socket) -> bool:
    """Read (a TLS alert, at most) until the broker closes; False if it has not in 5 s."""
    try:
        while client.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


def test_plaintext_garbage_and_half_handshakes_are_closed_and_the_broker_serves_on(tls_broker,
                                                                                   ca):
    broker = tls_broker({"socket.request.read.timeout.ms": "1000"})
    attempts = [_kafka_request_bytes(), b"\xff" * 64, b"\x16\x03\x01\x00\xc8\x01\x00"]
    for payload in attempts * 5:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as client:
            client.sendall(payload)
            if payload.startswith(b"\x16"):
                client.shutdown(socket.SHUT_WR)  # half a client hello, then nothing
            assert _closed_by_the_broker(client), payload
    stalled = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    started = time.monotonic()
    stalled.settimeout(10)
    try:
        assert stalled.recv(1) == b""  # the broker closes it: no handshake within 1 s
    except ConnectionResetError:
        pass
    waited = time.monotonic() - started
    stalled.close()
    assert 0.8 <= waited < 5, waited
    # still serving TLS clients
    assert AdminClient(_confluent(broker.bootstrap, ca)).list_topics(timeout=10).brokers
    log = broker.log_path.read_text()
    assert "not a TLS client hello (WRONG_VERSION_NUMBER: a PLAINTEXT client?)" in log, log
    assert ("no handshake finished within 1000 ms (socket.request.read.timeout.ms)"
            in log), log
    # fifteen bad connections from one address: logged once for each kind, not each time
    assert log.count("WRONG_VERSION_NUMBER") <= 2, log


def _start_failure(tmp_path, settings: dict[str, str]) -> str:
    port = free_port()
    args = [sys.executable, "-m", "oncelog", "broker", "--data-dir", str(tmp_path / "data"),
            "--set", f"listeners=SSL://127.0.0.1:{port}"]
    for name, value in settings.items():
        args += ["--set", f"{name}={value}"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_tls_settings_that_cannot_be_used_stop_the_broker_in_one_line(tmp_path, ca):
    keystore = ca.issue("broker").keystore
    locked = ca.issue("locked", key_password="s3cret-pass").keystore
    assert _start_failure(tmp_path, {}) == (
        "oncelog: listener SSL: ssl.keystore.location is not set; give a PEM file with the "
        "broker's private key and its certificate chain")
    assert _start_failure(tmp_path, {"ssl.keystore.location": str(tmp_path / "none.pem")}) == (
        f"oncelog: listener SSL: ssl.keystore.location {tmp_path / 'none.pem'}: "
        "no such file or directory")
    assert "ssl.keystore.type=JKS: oncelog reads PEM files only" in _start_failure(
        tmp_path, {"ssl.keystore.location": str(keystore), "ssl.keystore.type": "JKS"})
    wrong = _start_failure(tmp_path, {"ssl.keystore.location": str(locked),
                                      "ssl.key.password": "not-it"})
    assert "the private key is encrypted and ssl.key.password is wrong or not set" in wrong
    assert "not-it" not in wrong
    assert "needs ssl.truststore.location" in _start_failure(
        tmp_path, {"ssl.keystore.location": str(keystore), "ssl.client.auth": "required"})
    assert "oncelog serves TLSv1.2 and TLSv1.3 only" in _start_failure(
        tmp_path, {"ssl.keystore.location": str(keystore), "ssl.enabled.protocols": "TLSv1.1"})


def test_an_encrypted_key_with_its_password_serves_and_the_password_is_not_described(
        broker_factory, ca):
    locked = ca.issue("locked", key_password="s3cret-pass")
    port = free_port()
    broker = broker_factory(port=port, settings={
        "listeners": f"SSL://127.0.0.1:{port}",
        "ssl.keystore.location": str(locked.keystore), "ssl.key.password": "s3cret-pass"})
    from confluent_kafka.admin import ConfigResource
    admin = AdminClient(_confluent(broker.bootstrap, ca))
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    described = admin.describe_configs([resource])[resource].result(timeout=10)
    entry = described["ssl.key.password"]
    assert entry.is_sensitive and entry.value is None
    assert "s3cret-pass" not in broker.log_path.read_text()


def test_tls_1_1_is_refused_at_the_handshake(tls_broker):
    broker = tls_broker()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_ciphers("DEFAULT:@SECLEVEL=0")  # so that this client offers TLS 1.1 at all
    with warnings.catch_warnings():  # Python deprecates offering it, which is the point
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = ssl.TLSVersion.TLSv1_1
        context.maximum_version = ssl.TLSVersion.TLSv1_1
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            with context.wrap_socket(raw, server_hostname="127.0.0.1"):
                pass
    deadline = time.monotonic() + 5
    while "UNSUPPORTED_PROTOCOL" not in broker.log_path.read_text():
        assert time.monotonic() < deadline, broker.log_path.read_text()
        time.sleep(0.1)
