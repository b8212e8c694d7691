"""The login a broker presents to another broker's SASL listener, configured as Kafka's is.

Kafka's brokers authenticate to each other with ``sasl.mechanism.inter.broker.protocol``
(default GSSAPI, which oncelog does not serve: it stops the broker with one line) and the
credentials of that mechanism's JAAS login, looked up in this order (Kafka's
``JaasContext.loadServerContext``): ``listener.name.<listener>.<mechanism>.sasl.jaas.config``,
then ``sasl.jaas.config`` (per listener, then the broker's). Only the ``username`` and
``password`` options of the login are read; the module's class name is not checked (Kafka
would load it): ``org.apache.kafka.common.security.scram.ScramLoginModule required
username="broker" password="broker-secret";``. The mechanism must be one the inter-broker
listener enables (``sasl.enabled.mechanisms``), as Kafka requires.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..config import BrokerConfig, ConfigError
from .sasl import SUPPORTED, sasl_mechanisms

# one option of a JAAS login: key=value or key="value" (\" and \\ escaped in quotes)
_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:\\.|[^"\\])*)"|([^\s";]+))')
_HEAD = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b", re.I)


@dataclass(frozen=True)
class SaslLogin:
    """Who a broker is to another broker: a mechanism, a user and its password."""
    mechanism: str
    username: str
    password: str = field(repr=False)  # never in a log line or a repr


def parse_jaas_options(text: str) -> dict[str, str]:
    """The options of one JAAS login entry, ``<LoginModule> <flag> key="value" ...;``.
    ValueError saying what is wrong (the text itself is never quoted: it holds a secret)."""
    head = _HEAD.match(text)
    if head is None:
        raise ValueError("it does not start with a login module and a control flag "
                         "('<LoginModule> required ...')")
    options: dict[str, str] = {}
    position = head.end()
    rest = text.rstrip()
    while position < len(rest):
        if rest[position:].strip() == ";":
            return options
        match = _OPTION.match(rest, position)
        if match is None:
            raise ValueError(f"cannot read its options from character {position} on "
                             "(expected key=\"value\" pairs and a closing ';')")
        value = match.group(2)
        value = re.sub(r"\\(.)", r"\1", value) if value is not None else match.group(3)
        options[match.group(1)] = value
        position = match.end()
    raise ValueError("it does not end with ';'")


def inter_broker_login(config: BrokerConfig, listener: str) -> SaslLogin:
    """The login for the inter-broker ``listener`` (a SASL one); ConfigError naming the
    setting when it cannot be used."""
    mechanism = str(config["sasl.mechanism.inter.broker.protocol"]).strip().upper()
    if mechanism not in SUPPORTED:
        default = " (Kafka's default, Kerberos)" if mechanism == "GSSAPI" else ""
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol is {mechanism}{default}, "
                          f"which oncelog does not serve; set it to one of "
                          f"{', '.join(SUPPORTED)} for brokers to authenticate to each other "
                          f"on listener {listener}")
    enabled = sasl_mechanisms(config, listener)
    if mechanism not in enabled:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol {mechanism} is not enabled "
                          f"on the inter-broker listener {listener} (sasl.enabled.mechanisms "
                          f"{','.join(enabled)}); brokers could not log in to each other")
    setting = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.jaas_config(listener, mechanism).strip()
    if not text:
        raise ConfigError(f"the inter-broker listener {listener} is SASL but no login is "
                          f"configured for {mechanism}: set {setting} (or sasl.jaas.config) "
                          "to '<LoginModule> required username=\"NAME\" "
                          "password=\"SECRET\";' with a user made by oncelog users add")
    try:
        options = parse_jaas_options(text)
    except ValueError as error:
        raise ConfigError(f"{setting} (or sasl.jaas.config) cannot be read: {error}") from None
    missing = [k for k in ("username", "password") if not options.get(k)]
    if missing:
        raise ConfigError(f"{setting} (or sasl.jaas.config) has no {' and no '.join(missing)}"
                          "; the broker needs both to log in to other brokers")
    return SaslLogin(mechanism, options["username"], options["password"])
