"""Listeners as Kafka names them: ``listeners``, ``advertised.listeners``,
``listener.security.protocol.map``, ``inter.broker.listener.name``."""

from __future__ import annotations

import re

import pytest

from oncelog.broker.listeners import parse_listener, parse_listeners
from oncelog.config import BrokerConfig, ConfigError
from oncelog.controller.store import Endpoint


@pytest.mark.parametrize("listener, expected", [
    ("PLAINTEXT://127.0.0.1:9092", ("127.0.0.1", 9092)),
    ("localhost:0", ("localhost", 0)),
    ("PLAINTEXT://:9092", ("0.0.0.0", 9092)),
    ("PLAINTEXT://[::1]:9093", ("::1", 9093)),
    ("PLAINTEXT://a:1, PLAINTEXT://b:2", ("a", 1)),
])
def test_parse_listener(listener, expected):
    assert parse_listener(listener) == expected


@pytest.mark.parametrize("listener", ["localhost", "PLAINTEXT://host:port", "host:", ""])
def test_bad_listener(listener):
    with pytest.raises(ConfigError, match="is not HOST:PORT"):
        parse_listener(listener)


def test_a_listener_port_beyond_65535_is_refused():
    """The socket layer took 99999 modulo 65536 and the broker said it listened on 99999."""
    with pytest.raises(ConfigError, match="the port 99999 is not a number from 0 to 65535"):
        parse_listener("PLAINTEXT://127.0.0.1:99999")


def _listeners(**settings: str):
    return parse_listeners(BrokerConfig({k.replace("_", "."): v for k, v in settings.items()}))


def test_named_listeners_get_their_protocol_from_the_map_and_their_own_advertised_address():
    listeners = _listeners(
        listeners="INTERNAL://127.0.0.1:9093,EXTERNAL://0.0.0.0:9092",
        advertised_listeners="EXTERNAL://broker1.example.com:19092",
        listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
        inter_broker_listener_name="internal")
    assert listeners.bound == (Endpoint("INTERNAL", "PLAINTEXT", "127.0.0.1", 9093),
                               Endpoint("EXTERNAL", "SASL_SSL", "0.0.0.0", 9092))
    assert listeners.advertised == (Endpoint("INTERNAL", "PLAINTEXT", "127.0.0.1", 9093),
                                    Endpoint("EXTERNAL", "SASL_SSL", "broker1.example.com",
                                             19092))
    assert listeners.inter_broker == "INTERNAL"
    assert listeners.advertised_endpoint("EXTERNAL").url() == \
        "EXTERNAL://broker1.example.com:19092"


def test_the_inter_broker_listener_defaults_to_plaintext_or_the_only_one():
    assert _listeners(listeners="SSL://127.0.0.1:1,PLAINTEXT://127.0.0.1:2").inter_broker == \
        "PLAINTEXT"
    assert _listeners(listeners="SASL_SSL://127.0.0.1:1").inter_broker == "SASL_SSL"
    assert _listeners(listeners="SSL://127.0.0.1:1,SASL_SSL://127.0.0.1:2",
                      security_inter_broker_protocol="SSL").inter_broker == "SSL"


def test_a_port_given_as_zero_is_filled_in_where_it_listens_and_is_advertised():
    listeners = _listeners(listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                           advertised_listeners="SSL://localhost:0")
    filled = listeners.with_port("SSL", 4321)
    assert filled.bound[1].port == 4321 and filled.advertised[1] == Endpoint(
        "SSL", "SSL", "localhost", 4321)
    assert filled.bound[0].port == 0


@pytest.mark.parametrize("settings, error", [
    ({"listeners": "CLIENT://127.0.0.1:9092"},
     "no security protocol defined for listener CLIENT"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"},
     "names listener PLAINTEXT twice"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092"},
     "both listen on 127.0.0.1:9092"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "SSL://a:1"},
     "advertised.listeners names listener SSL, which listeners does not"),
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"},
     "advertised.listeners must name a host clients can reach, not 0.0.0.0"),
    ({"listeners": "A://127.0.0.1:1", "listener.security.protocol.map": "A:TLS"},
     "TLS for listener A is not a security protocol"),
    ({"listeners": "A://127.0.0.1:1", "listener.security.protocol.map": "A"},
     "'A' is not LISTENER_NAME:SECURITY_PROTOCOL"),
    ({"listeners": "SSL://127.0.0.1:1,SASL_SSL://127.0.0.1:2"},
     "set inter.broker.listener.name to one of SSL, SASL_SSL"),
    ({"listeners": "SSL://127.0.0.1:1", "inter.broker.listener.name": "PLAINTEXT"},
     "inter.broker.listener.name PLAINTEXT is not a listener"),
    ({"listeners": "SSL://127.0.0.1:1", "inter.broker.listener.name": "SSL",
      "security.inter.broker.protocol": "SSL"},
     "only one of inter.broker.listener.name and security.inter.broker.protocol"),
    ({"listeners": ""}, "listeners is empty"),
])
def test_listener_settings_kafka_refuses_are_refused_naming_the_cause(settings, error):
    with pytest.raises(ConfigError, match=re.escape(error)):
        parse_listeners(BrokerConfig(settings))
