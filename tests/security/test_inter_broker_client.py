"""The connections a broker opens to other brokers (``net.Connector`` / ``BrokerClient``),
against a real broker's SASL_SSL and SSL listeners: TLS trusting the broker's authority, the
host name checked, SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN logins, and a refused login not
tried again at once."""

from __future__ import annotations

import asyncio
import time

import pytest

from oncelog.broker.process import free_port
from oncelog.config import BrokerConfig
from oncelog.net.connector import AuthenticationError, inter_broker
from oncelog.protocol import messages

from .conftest import PASSWORDS


def _connector(ca, mechanism: str, user: str, password: str, **settings: str):
    config = BrokerConfig({
        "listeners": "SASL_SSL://127.0.0.1:9092", "ssl.truststore.location": str(ca.certificate),
        "sasl.enabled.mechanisms": mechanism, "sasl.mechanism.inter.broker.protocol": mechanism,
        "sasl.jaas.config": f'M required username="{user}" password="{password}";', **settings})
    return inter_broker(config, "SASL_SSL", "SASL_SSL")


def _metadata(connector, broker, host: str = "127.0.0.1"):
    async def ask():
        client = connector.client(host, broker.port, timeout_s=10)
        try:
            return await client.request(messages.MetadataRequest(topics=None), 1)
        finally:
            client.close()
    return asyncio.run(ask())


@pytest.mark.parametrize("mechanism, user", [("SCRAM-SHA-512", "alice"),
                                             ("SCRAM-SHA-256", "bob"), ("PLAIN", "alice")])
def test_a_broker_logs_in_over_sasl_ssl(sasl_broker, ca, mechanism, user):
    broker = sasl_broker()
    answer = _metadata(_connector(ca, mechanism, user, PASSWORDS[user]), broker)
    assert [b.node_id for b in answer.brokers] == [1]


def test_a_refused_login_is_said_once_and_not_tried_again_at_once(sasl_broker, ca):
    """The server answers a wrong password after connection.failed.authentication.delay.ms
    (100 ms): the second request is refused without a connection, at once."""
    broker = sasl_broker()
    connector = _connector(ca, "SCRAM-SHA-512", "alice", "wrong")
    with pytest.raises(AuthenticationError) as first:
        _metadata(connector, broker)
    assert "SASL authentication as 'alice' with SCRAM-SHA-512 refused: Authentication " \
           "failed during authentication due to invalid credentials" in str(first.value)
    assert "wrong" not in str(first.value)
    started = time.monotonic()
    with pytest.raises(AuthenticationError):
        _metadata(connector, broker)
    assert time.monotonic() - started < 0.09


def test_the_host_name_is_checked_unless_identification_is_off(broker_factory, ca):
    """A broker whose certificate names localhost only: reached as 127.0.0.1 it is refused,
    as Kafka's https identification refuses it, and accepted with identification off."""
    port = free_port()
    broker = broker_factory(port=port, settings={
        "listeners": f"SSL://127.0.0.1:{port}",
        "ssl.keystore.location": str(ca.issue("named", hosts=["localhost"]).keystore)})
    config = {"listeners": "SSL://127.0.0.1:9093", "ssl.truststore.location": str(ca.certificate)}
    connector = inter_broker(BrokerConfig(config), "SSL", "SSL")
    assert _metadata(connector, broker, "localhost").brokers
    with pytest.raises(ConnectionError) as refused:
        _metadata(connector, broker, "127.0.0.1")
    assert str(refused.value) == (
        f"127.0.0.1:{port}: TLS handshake failed: CERTIFICATE_VERIFY_FAILED: IP address "
        "mismatch, certificate is not valid for '127.0.0.1'. (the inter-broker listener's "
        "ssl.truststore.location, ssl.keystore.location, ssl.endpoint.identification."
        "algorithm)")
    off = inter_broker(BrokerConfig({**config, "ssl.endpoint.identification.algorithm": ""}),
                       "SSL", "SSL")
    assert _metadata(off, broker, "127.0.0.1").brokers


def test_a_session_the_broker_limits_is_ended_before_it_runs_out(sasl_broker, ca):
    """KIP-368: the broker limits sessions to a second; a request after it on the same
    connection would close it. The client opens a new connection and logs in again first."""
    broker = sasl_broker({"connections.max.reauth.ms": "1000"})
    connector = _connector(ca, "SCRAM-SHA-512", "alice", PASSWORDS["alice"])

    async def twice():
        client = connector.client("127.0.0.1", broker.port, timeout_s=10)
        try:
            await client.request(messages.MetadataRequest(topics=None), 1)
            first = client._transport
            await asyncio.sleep(1.2)
            answer = await client.request(messages.MetadataRequest(topics=None), 1)
            return answer, first is not client._transport
        finally:
            client.close()
    answer, reconnected = asyncio.run(twice())
    assert [b.node_id for b in answer.brokers] == [1] and reconnected
