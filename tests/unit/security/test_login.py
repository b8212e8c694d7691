"""The inter-broker login and connector read from Kafka's settings
(``sasl.mechanism.inter.broker.protocol``, ``listener.name.<l>.<mechanism>.sasl.jaas.config``,
``sasl.jaas.config``), and the one-line refusals of configs that cannot work."""

from __future__ import annotations

import pytest

from oncelog.config import BrokerConfig, ConfigError
from oncelog.net.connector import inter_broker
from oncelog.security.login import inter_broker_login, parse_jaas_options

SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" ' \
        'password="s3cret";'


def _config(**settings: str) -> BrokerConfig:
    return BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:9092",
                         "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN", **settings})


def test_the_per_listener_and_mechanism_login_wins_over_sasl_jaas_config():
    config = _config(**{
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.jaas.config": SCRAM.replace("broker", "other"),
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM})
    login = inter_broker_login(config, "SASL_PLAINTEXT")
    assert (login.mechanism, login.username, login.password) == ("SCRAM-SHA-512", "broker",
                                                                 "s3cret")
    assert "s3cret" not in repr(login)
    assert "scram-sha-512.sasl.jaas.config" not in " ".join(config.ignored)


def test_sasl_jaas_config_serves_when_no_listener_gives_one():
    config = _config(**{"sasl.mechanism.inter.broker.protocol": "PLAIN",
                        "sasl.jaas.config": SCRAM.replace("scram.ScramLoginModule",
                                                          "plain.PlainLoginModule")})
    assert inter_broker_login(config, "SASL_PLAINTEXT").mechanism == "PLAIN"


@pytest.mark.parametrize("settings, says", [
    ({}, "sasl.mechanism.inter.broker.protocol is GSSAPI (Kafka's default, Kerberos), which "
         "oncelog does not serve"),
    ({"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}, "is OAUTHBEARER, which"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256", "sasl.jaas.config": SCRAM},
     "SCRAM-SHA-256 is not enabled on the inter-broker listener SASL_PLAINTEXT"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
     "no login is configured for SCRAM-SHA-512: set listener.name.sasl_plaintext."
     "scram-sha-512.sasl.jaas.config"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
      "sasl.jaas.config": 'x required username="broker";'}, "has no password"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
      "sasl.jaas.config": 'username="broker" password="s3cret"'},
     "cannot be read: it does not start with a login module"),
])
def test_an_inter_broker_login_that_cannot_work_is_one_clear_line(settings, says):
    with pytest.raises(ConfigError) as caught:
        inter_broker(_config(**settings), "SASL_PLAINTEXT", "SASL_PLAINTEXT")
    assert says in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_plaintext_and_ssl_need_no_login(tmp_path):
    assert inter_broker(_config(), "SASL_PLAINTEXT", "PLAINTEXT").login is None
    from oncelog.security.certificates import CertificateAuthority
    ca = CertificateAuthority(tmp_path)
    config = BrokerConfig({"listeners": "SSL://127.0.0.1:9093",
                           "ssl.truststore.location": str(ca.certificate)})
    connector = inter_broker(config, "SSL", "SSL")
    assert connector.login is None and connector.ssl_context is not None
    assert connector.ssl_context.check_hostname  # ssl.endpoint.identification.algorithm=https
    off = BrokerConfig({"listeners": "SSL://127.0.0.1:9093",
                        "ssl.truststore.location": str(ca.certificate),
                        "ssl.endpoint.identification.algorithm": ""})
    assert not inter_broker(off, "SSL", "SSL").ssl_context.check_hostname


def test_jaas_options_with_escapes_and_bare_values():
    assert parse_jaas_options('M required username=u password="a\\"b\\\\c" ;') == {
        "username": "u", "password": 'a"b\\c'}
    with pytest.raises(ValueError, match="does not end with ';'"):
        parse_jaas_options('M required username="u"')
