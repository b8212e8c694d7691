"""Listener addresses: ``listeners`` and ``advertised.listeners`` as HOST:PORT."""

from __future__ import annotations

import pytest

from oncelog.broker.listeners import parse_listener
from oncelog.config import ConfigError


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
