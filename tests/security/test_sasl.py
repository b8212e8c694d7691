"""SASL listeners (SASL_SSL, SASL_PLAINTEXT): SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN with the
real clients, users made by ``oncelog users add``; and the attacks: requests before
authentication, wrong passwords and unknown users (one answer for both, slowly), tampered
SCRAM nonces and proofs, malformed tokens; KIP-368 re-authentication."""

from __future__ import annotations

import asyncio
import base64
import shutil
import socket
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.protocol import messages
from tests.integration.raw import RawConnection

from .conftest import PASSWORDS, add_user


def _confluent(broker, ca, user: str, mechanism: str, **extra) -> dict:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(ca.certificate), "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": PASSWORDS.get(user, "x"), **extra}


def _round_trip(config: dict, topic: str, count: int = 100) -> list[bytes]:
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
    producer = Producer({**config, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=f"{topic}-{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    return values


@pytest.mark.parametrize("user, mechanism", [("alice", "SCRAM-SHA-512"),
                                             ("bob", "SCRAM-SHA-256"), ("alice", "PLAIN")])
def test_confluent_kafka_over_sasl_ssl(sasl_broker, ca, user, mechanism):
    broker = sasl_broker()
    topic = f"sasl-{mechanism.lower()}"
    values = _round_trip(_confluent(broker, ca, user, mechanism), topic)
    assert values == [f"{topic}-{i}".encode() for i in range(100)]


def test_kafka_python_aiokafka_and_kcat_over_sasl(sasl_broker, ca):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    from kafka import KafkaConsumer, KafkaProducer

    broker = sasl_broker()
    sasl = {"security_protocol": "SASL_SSL", "ssl_cafile": str(ca.certificate),
            "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
            "sasl_plain_password": PASSWORDS["alice"]}
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", **sasl)
    for i in range(20):
        producer.send("sasl-clients", value=f"kp-{i}".encode(), partition=0)
    producer.flush(20)
    producer.close()

    async def aiokafka_round() -> list[bytes]:
        options = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
                   "sasl_plain_username": "bob", "sasl_plain_password": PASSWORDS["bob"]}
        aio = AIOKafkaProducer(bootstrap_servers=broker.plaintext_bootstrap, **options)
        await aio.start()
        try:
            for i in range(20):
                await aio.send_and_wait("sasl-clients", f"aio-{i}".encode(), partition=0)
        finally:
            await aio.stop()
        consumer = AIOKafkaConsumer(
            "sasl-clients", bootstrap_servers=broker.bootstrap, security_protocol="SASL_SSL",
            ssl_context=create_ssl_context(cafile=str(ca.certificate)),
            sasl_mechanism="PLAIN", sasl_plain_username="alice",
            sasl_plain_password=PASSWORDS["alice"], auto_offset_reset="earliest")
        await consumer.start()
        try:
            values: list[bytes] = []
            while len(values) < 40:
                batch = await consumer.getmany(timeout_ms=10000)
                assert batch, f"aiokafka read {len(values)} of 40"
                values += [r.value for records in batch.values() for r in records]
            return values
        finally:
            await consumer.stop()

    expected = [f"kp-{i}".encode() for i in range(20)] + [f"aio-{i}".encode() for i in range(20)]
    assert asyncio.run(aiokafka_round()) == expected
    consumer = KafkaConsumer("sasl-clients", bootstrap_servers=broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000, **sasl)
    assert [r.value for _, r in zip(range(40), consumer)] == expected
    consumer.close()

    kcat = shutil.which("kcat")
    assert kcat, "make setup installs kcat"
    consumed = subprocess.run(
        [kcat, "-b", broker.bootstrap, "-X", "security.protocol=SASL_SSL",
         "-X", f"ssl.ca.location={ca.certificate}", "-X", "sasl.mechanism=SCRAM-SHA-256",
         "-X", "sasl.username=bob", "-X", f"sasl.password={PASSWORDS['bob']}",
         "-C", "-t", "sasl-clients", "-o", "beginning", "-c", "40", "-e"],
        capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == [v.decode() for v in expected]


@pytest.mark.slow
def test_the_java_client_over_sasl_ssl_with_scram(sasl_broker, ca, java_probe):
    broker = sasl_broker()
    probe = java_probe
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="alice" password="{PASSWORDS["alice"]}";')
    # KafkaClientProbe splits its words on spaces: the JAAS line's are written %20
    config = ("security.protocol=SASL_SSL ssl.truststore.type=PEM "
              f"ssl.truststore.location={ca.certificate} sasl.mechanism=SCRAM-SHA-512 "
              f"sasl.jaas.config={jaas.replace(' ', '%20')}")
    run = probe.run(broker.bootstrap,
                    f"producer name=p acks=all {config}",
                    "send producer=p topic=sasl-java count=10 partition=0",
                    f"consumer name=c topics=sasl-java auto.offset.reset=earliest {config}",
                    "poll consumer=c count=10")
    polled = [e for e in run.events if e.get("event") == "record"]
    assert [e["value"] for e in polled] == [f"value-{i}" for i in range(10)], run.explain()


def _scram_answer(bootstrap: str, user: str, password: str):
    """A whole SCRAM-SHA-512 exchange as ``user``: the broker's last answer."""
    client = _scram_client(user, password)
    with RawConnection(bootstrap) as raw:
        first = _sasl_exchange(raw, "SCRAM-SHA-512", client.first_message())
        assert first.error_code == 0, "the first message is answered for any user"
        client.process_server_first_message(bytes(first.auth_bytes))
        return raw.request(messages.SaslAuthenticateRequest(
            auth_bytes=client.final_message()), 1)


def test_a_wrong_password_and_an_unknown_user_get_the_same_answer(sasl_broker):
    broker = sasl_broker()
    wrong = _scram_answer(broker.plaintext_bootstrap, "alice", "Guess-1234")
    unknown = _scram_answer(broker.plaintext_bootstrap, "mallory", "Guess-1234")
    assert (wrong.error_code, wrong.error_message) == (unknown.error_code,
                                                       unknown.error_message) == (
        58, "Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-512")
    plain = []
    for token in (b"\x00alice\x00Guess-1234", b"\x00mallory\x00Guess-1234"):
        with RawConnection(broker.plaintext_bootstrap) as raw:
            answer = _sasl_exchange(raw, "PLAIN", token)
            plain.append((answer.error_code, answer.error_message))
    assert plain == [(58, "Authentication failed: Invalid username or password")] * 2
    text = broker.log_path.read_text()
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in text
    assert "Guess-1234" not in text and "alice-secret" not in text and "mallory" not in text


def _sasl_exchange(raw: RawConnection, mechanism: str, token: bytes, version: int = 1):
    handshake = raw.request(messages.SaslHandshakeRequest(mechanism=mechanism), 1)
    assert handshake.error_code == 0, handshake
    return raw.request(messages.SaslAuthenticateRequest(auth_bytes=token), version)


def _closed(raw: RawConnection) -> bool:
    raw.sock.settimeout(5)
    try:
        return raw.sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_requests_before_authentication_close_the_connection(sasl_broker):
    broker = sasl_broker()
    with RawConnection(broker.plaintext_bootstrap) as raw:
        versions = raw.request(messages.ApiVersionsRequest(), 0)  # allowed first
        assert versions.error_code == 0
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[17] == (0, 1) and keys[36] == (0, 2)
        raw.send_frame(raw.header(3, 1) + bytes(messages.MetadataRequest(topics=None).encode(
            version=1)))
        assert _closed(raw)
    with RawConnection(broker.plaintext_bootstrap) as raw:
        # SaslAuthenticate with no handshake first
        raw.send_frame(raw.header(36, 1) + bytes(messages.SaslAuthenticateRequest(
            auth_bytes=b"\x00alice\x00alice-secret").encode(version=1)))
        assert _closed(raw)
    assert "METADATA before SASL authentication (ILLEGAL_SASL_STATE)" in \
        broker.log_path.read_text()


def test_plain_failures_are_answered_after_the_delay_then_closed(sasl_broker):
    broker = sasl_broker({"connection.failed.authentication.delay.ms": "300"})
    for token in (b"\x00alice\x00wrong", b"\x00mallory\x00wrong", b"garbage",
                  b"bob\x00alice\x00alice-secret"):
        with RawConnection(broker.plaintext_bootstrap) as raw:
            started = time.monotonic()
            answer = _sasl_exchange(raw, "PLAIN", token)
            waited = time.monotonic() - started
            assert answer.error_code == 58, answer  # SASL_AUTHENTICATION_FAILED
            assert waited >= 0.3, waited
            assert _closed(raw)
    with RawConnection(broker.plaintext_bootstrap) as raw:
        started = time.monotonic()
        answer = _sasl_exchange(raw, "PLAIN", b"\x00alice\x00alice-secret")
        assert answer.error_code == 0 and time.monotonic() - started < 0.3
        metadata = raw.request(messages.MetadataRequest(topics=None), 1)
        assert [b.node_id for b in metadata.brokers] == [1]


def test_an_unsupported_mechanism_is_refused_naming_the_enabled_ones(sasl_broker):
    broker = sasl_broker()
    with RawConnection(broker.plaintext_bootstrap) as raw:
        answer = raw.request(messages.SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert answer.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert list(answer.mechanisms) == ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]


def _scram_client(user: str, password: str):
    from kafka.net.sasl.scram import ScramClient
    return ScramClient(user, password, "SCRAM-SHA-512")


@pytest.mark.parametrize("tamper", ["nonce", "proof", "channel-binding"])
def test_a_tampered_scram_exchange_fails(sasl_broker, tamper):
    broker = sasl_broker({"connection.failed.authentication.delay.ms": "0"})
    client = _scram_client("alice", PASSWORDS["alice"])
    with RawConnection(broker.plaintext_bootstrap) as raw:
        first = _sasl_exchange(raw, "SCRAM-SHA-512", client.first_message())
        assert first.error_code == 0
        client.process_server_first_message(bytes(first.auth_bytes))
        final = client.final_message()
        if tamper == "nonce":
            final = final.replace(b",r=", b",r=x", 1)
        elif tamper == "proof":
            head, proof = final.rsplit(b",p=", 1)
            flipped = bytearray(base64.b64decode(proof))
            flipped[0] ^= 1
            final = head + b",p=" + base64.b64encode(bytes(flipped))
        else:
            final = final.replace(b"c=biws", b"c=cD10bHMtdW5pcXVlLCw=", 1)
        answer = raw.request(messages.SaslAuthenticateRequest(auth_bytes=final), 1)
        assert answer.error_code == 58, answer
        assert _closed(raw)


def test_the_scram_exchange_proves_the_broker_knows_the_credential(sasl_broker):
    broker = sasl_broker()
    client = _scram_client("alice", PASSWORDS["alice"])
    with RawConnection(broker.plaintext_bootstrap) as raw:
        first = _sasl_exchange(raw, "SCRAM-SHA-512", client.first_message())
        client.process_server_first_message(bytes(first.auth_bytes))
        final = raw.request(messages.SaslAuthenticateRequest(
            auth_bytes=client.final_message()), 1)
        assert final.error_code == 0
        client.process_server_final_message(bytes(final.auth_bytes))  # checks the signature
        assert final.session_lifetime_ms == 0  # connections.max.reauth.ms unset


def test_a_session_ends_after_connections_max_reauth_ms_and_librdkafka_reauthenticates(
        sasl_broker, ca):
    broker = sasl_broker({"connections.max.reauth.ms": "1500"})
    with RawConnection(broker.plaintext_bootstrap) as raw:
        answer = _sasl_exchange(raw, "PLAIN", b"\x00alice\x00alice-secret")
        assert answer.error_code == 0 and answer.session_lifetime_ms == 1500
        assert raw.request(messages.MetadataRequest(topics=None), 1).brokers
        time.sleep(1.7)
        raw.send_frame(raw.header(3, 1) + bytes(messages.MetadataRequest(topics=None).encode(
            version=1)))
        assert _closed(raw), "a request after the session's end was served"
    # a producer sending for three sessions' lifetime re-authenticates and loses nothing
    config = _confluent(broker, ca, "alice", "SCRAM-SHA-512")
    producer = Producer({**config, "acks": "all"})
    failures: list = []
    deadline = time.monotonic() + 5
    sent = 0
    while time.monotonic() < deadline:
        producer.produce("reauth", value=str(sent).encode(),
                         on_delivery=lambda err, _m: err and failures.append(err))
        sent += 1
        producer.poll(0.05)
    assert producer.flush(20) == 0 and not failures, failures
    consumer = Consumer({**config, "group.id": "reauth", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("reauth", 0, 0)])
    values = []
    while len(values) < sent:
        message = consumer.poll(5)
        assert message is not None, f"read {len(values)} of {sent}"
        if message.error() is None:
            values.append(int(message.value()))
    consumer.close()
    assert values == list(range(sent))


def test_users_commands_keep_no_password_and_refuse_a_running_brokers_data(sasl_broker,
                                                                          tmp_path):
    data_dir = tmp_path / "users"
    add_user(data_dir, "carol", "SCRAM-SHA-256", "carol-pw")
    add_user(data_dir, "carol", "SCRAM-SHA-512", "carol-pw")
    stored = (data_dir / "scram-credentials.json").read_text()
    assert "carol-pw" not in stored and "stored_key=" in stored
    assert (data_dir / "scram-credentials.json").stat().st_mode & 0o077 == 0
    oncelog = [sys.executable, "-m", "oncelog", "users"]
    listed = subprocess.run([*oncelog, "list", "--data-dir", str(data_dir)],
                            capture_output=True, text=True, timeout=60)
    assert listed.stdout.splitlines() == ["USER\tMECHANISM\tITERATIONS",
                                          "carol\tSCRAM-SHA-256\t4096",
                                          "carol\tSCRAM-SHA-512\t4096"]
    deleted = subprocess.run([*oncelog, "delete", "carol", "--mechanism", "SCRAM-SHA-256",
                              "--data-dir", str(data_dir)], capture_output=True, text=True,
                             timeout=60)
    assert deleted.returncode == 0, deleted.stderr
    missing = subprocess.run([*oncelog, "delete", "dave", "--data-dir", str(data_dir)],
                             capture_output=True, text=True, timeout=60)
    assert (missing.returncode, missing.stderr.strip()) == (1, "oncelog: no user dave")
    broker = sasl_broker()
    running = subprocess.run([*oncelog, "add", "erin", "--data-dir",
                              str(broker.data_dir)], input="pw\n", capture_output=True,
                             text=True, timeout=60)
    assert running.returncode == 1
    assert running.stderr.strip() == (f"oncelog: a broker is running on {broker.data_dir}; "
                                      "stop it first (a broker reads its users as it starts)")


def test_a_sasl_listener_with_a_mechanism_oncelog_does_not_serve_stops_the_broker(tmp_path):
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    number = port.getsockname()[1]
    port.close()
    result = subprocess.run(
        [sys.executable, "-m", "oncelog", "broker", "--data-dir", str(tmp_path / "d"),
         "--set", f"listeners=SASL_PLAINTEXT://127.0.0.1:{number}",
         "--set", "sasl.enabled.mechanisms=GSSAPI"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "oncelog: listener SASL_PLAINTEXT: sasl.enabled.mechanisms GSSAPI: oncelog serves "
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (not GSSAPI)")


def test_an_admin_client_adds_describes_and_deletes_users_that_then_log_in(sasl_broker, ca):
    """DescribeUserScramCredentials and AlterUserScramCredentials through confluent-kafka's
    AdminClient (which salts the password itself), on the running broker."""
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)

    broker = sasl_broker()
    admin = AdminClient(_confluent(broker, ca, "alice", "SCRAM-SHA-512"))
    described = admin.describe_user_scram_credentials()
    assert {user: sorted((i.mechanism, i.iterations)
                         for i in description.scram_credential_infos)
            for user, description in described.result(15).items()} == {
        "alice": [(ScramMechanism.SCRAM_SHA_512, 4096)],
        "bob": [(ScramMechanism.SCRAM_SHA_256, 4096)]}
    altered = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_256, 8192), b"carol-secret"),
        UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)])
    for future in altered.values():
        future.result(15)
    PASSWORDS["carol"] = "carol-secret"
    try:
        carol = _confluent(broker, ca, "carol", "SCRAM-SHA-256")
        assert AdminClient(carol).list_topics(timeout=10).brokers
        with RawConnection(broker.plaintext_bootstrap) as raw:  # bob is gone
            answer = _sasl_exchange(raw, "PLAIN", b"\x00bob\x00bob-secret")
            assert answer.error_code == 58
        one = admin.describe_user_scram_credentials(["carol", "bob"])
        assert one["carol"].result(15).scram_credential_infos[0].iterations == 8192
        with pytest.raises(KafkaException, match="does not exist: bob"):
            one["bob"].result(15)
        refused = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 1000), b"pw")])
        with pytest.raises(KafkaException, match="Too few iterations"):
            refused["dave"].result(15)
        stored = (broker.data_dir / "scram-credentials.json").read_text()
        assert "carol-secret" not in stored and '"carol"' in stored
    finally:
        PASSWORDS.pop("carol", None)


def test_a_v0_handshake_takes_bare_tokens_as_kafka_does(sasl_broker):
    """After SaslHandshake v0 the tokens are size-prefixed frames with no request header; a
    wrong one closes the connection with no answer."""
    broker = sasl_broker({"connection.failed.authentication.delay.ms": "0"})
    with RawConnection(broker.plaintext_bootstrap) as raw:
        assert raw.request(messages.SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        raw.send_frame(b"\x00alice\x00alice-secret")
        assert raw.read_frame() == b""  # PLAIN's (empty) answer, bare
        assert [b.node_id for b in raw.request(messages.MetadataRequest(topics=None),
                                               1).brokers] == [1]
    from kafka.net.sasl.scram import ScramClient
    client = ScramClient("bob", PASSWORDS["bob"], "SCRAM-SHA-256")
    with RawConnection(broker.plaintext_bootstrap) as raw:
        assert raw.request(messages.SaslHandshakeRequest(mechanism="SCRAM-SHA-256"),
                           0).error_code == 0
        raw.send_frame(client.first_message())
        client.process_server_first_message(raw.read_frame())
        raw.send_frame(client.final_message())
        client.process_server_final_message(raw.read_frame())  # the server's signature
        assert raw.request(messages.MetadataRequest(topics=None), 1).brokers
    with RawConnection(broker.plaintext_bootstrap) as raw:
        assert raw.request(messages.SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        raw.send_frame(b"\x00alice\x00wrong!")
        assert _closed(raw)
