"""A client's security settings, read once and handed to every client oncelog builds.

Kafka's tools take ``--command-config FILE``: a Java-properties file of client settings.
oncelog's take the same file, with Kafka's names or librdkafka's, and ``client_security``
turns it into librdkafka settings (what confluent-kafka's clients take):

- ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (any case).
- ``sasl.mechanism`` (librdkafka's ``sasl.mechanisms`` too): PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512; the user as librdkafka names it (``sasl.username``, ``sasl.password``) or as
  Kafka does, ``sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule
  required username="alice" password="...";`` (``PlainLoginModule`` for PLAIN).
- the authority: ``ssl.ca.location``, or Kafka's ``ssl.truststore.location`` with
  ``ssl.truststore.type=PEM`` (KIP-651; a JKS or PKCS12 store is refused by name).
- a client certificate (mutual TLS): ``ssl.certificate.location`` and ``ssl.key.location``,
  or Kafka's ``ssl.keystore.location`` with ``ssl.keystore.type=PEM`` (key and chain in one
  file, which librdkafka reads as both); ``ssl.key.password`` for an encrypted key; or a
  PKCS#12 ``ssl.keystore.location`` with ``ssl.keystore.type=PKCS12`` and
  ``ssl.keystore.password`` (librdkafka's own meaning of those names).
- a store without ``ssl.*.type`` is PEM when the file is (Kafka's default type, JKS, is
  refused by name, as are JKS and PKCS12 truststores).
- ``ssl.endpoint.identification.algorithm`` (``https``, or empty/``none`` to skip the host
  name check) and ``enable.ssl.certificate.verification``.

Anything else is refused naming the setting, so a typo is not quietly a PLAINTEXT client.
Every error is one ``SecurityConfigError`` sentence naming the file or option and the
setting, never a password's value. ``translate`` does the same for settings that do not come
from a file (the Spark source's ``kafka.``-prefixed options); ``kafka_python_settings`` gives
kafka-python's keyword arguments for the same settings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256",
                                                                "SCRAM-SHA-512"),
}
# Settings passed to librdkafka as they are.
_AS_IS = ("sasl.username", "sasl.password", "ssl.ca.location", "ssl.certificate.location",
          "ssl.key.location", "ssl.key.password", "enable.ssl.certificate.verification")
# Kafka's settings with no librdkafka meaning for a PEM file: read and dropped.
_JAVA_ONLY = ("ssl.truststore.password", "ssl.protocol", "ssl.enabled.protocols")


class SecurityConfigError(ValueError):
    """One sentence naming the file (or option) and the setting at fault."""


def client_security(path: str | Path | None) -> dict[str, str]:
    """The librdkafka settings of a ``--command-config`` file; ``{}`` for None."""
    if path is None:
        return {}
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SecurityConfigError(f"cannot read the client config {path}: no such file") from None
    except OSError as error:
        raise SecurityConfigError(
            f"cannot read the client config {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise SecurityConfigError(f"cannot read the client config {path}: it is not text") from None
    return translate(_properties(text, str(path)), str(path))


def _properties(text: str, where: str) -> dict[str, str]:
    """Java-properties lines: ``name=value`` (or ``name: value``), # and ! comments, a
    trailing backslash continuing a line (a long ``sasl.jaas.config``)."""
    values: dict[str, str] = {}
    lines = iter(enumerate(text.splitlines(), 1))
    for number, line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        while line.endswith("\\"):
            line = line[:-1] + next(lines, (0, ""))[1].strip()
        separator = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if separator <= 0:
            raise SecurityConfigError(f"{where}, line {number}: expected name=value")
        values[line[:separator].strip()] = line[separator + 1:].strip()
    return values


def translate(settings: Mapping[str, str], where: str) -> dict[str, str]:
    """Kafka's or librdkafka's client security settings -> librdkafka's; ``where`` names
    the source in errors."""
    settings = dict(settings)
    out: dict[str, str] = {}

    def fail(message: str) -> SecurityConfigError:
        return SecurityConfigError(f"{where}: {message}")

    protocol = settings.pop("security.protocol", None)
    if protocol is not None:
        if protocol.upper() not in PROTOCOLS:
            raise fail(f"security.protocol {protocol!r} is not one of {', '.join(PROTOCOLS)}")
        out["security.protocol"] = protocol.upper()
    mechanism = settings.pop("sasl.mechanism", None) or settings.pop("sasl.mechanisms", None)
    settings.pop("sasl.mechanisms", None)
    if mechanism is not None:
        if mechanism.upper() not in MECHANISMS:
            raise fail(f"sasl.mechanism {mechanism!r} is not one of {', '.join(MECHANISMS)}")
        out["sasl.mechanism"] = mechanism.upper()
    jaas = settings.pop("sasl.jaas.config", None)
    if jaas is not None:
        out.update(_from_jaas(jaas, out.get("sasl.mechanism"), fail))
    keystore_password = settings.pop("ssl.keystore.password", None)
    for kind in ("truststore", "keystore"):
        location = settings.pop(f"ssl.{kind}.location", None)
        store_type = (settings.pop(f"ssl.{kind}.type", None) or "").upper()
        if location is None:
            continue
        if not store_type:  # Kafka's default is JKS; a PEM file says what it is
            store_type = "PEM" if _is_pem(location) else "JKS (the default)"
        if kind == "keystore" and store_type == "PKCS12":
            # librdkafka's own ssl.keystore.* are a PKCS#12 file and its password
            out["ssl.keystore.location"] = location
            if keystore_password is not None:
                out["ssl.keystore.password"] = keystore_password
        elif store_type != "PEM":
            other = " or PKCS12" if kind == "keystore" else ""
            raise fail(f"ssl.{kind}.type {store_type} is not supported: set "
                       f"ssl.{kind}.type=PEM with a PEM file{other}")
        elif kind == "truststore":
            out["ssl.ca.location"] = location
        else:  # the key and its chain in one file, read by librdkafka as both
            out["ssl.key.location"] = location
            out["ssl.certificate.location"] = location
    algorithm = settings.pop("ssl.endpoint.identification.algorithm", None)
    if algorithm is not None:
        if algorithm.lower() not in ("", "none", "https"):
            raise fail(f"ssl.endpoint.identification.algorithm {algorithm!r} is not https, "
                       "none or empty")
        out["ssl.endpoint.identification.algorithm"] = algorithm.lower() or "none"
    for name in _AS_IS:
        if name in settings:
            out[name] = settings.pop(name)
    for name in _JAVA_ONLY:
        settings.pop(name, None)
    if settings:
        raise fail(f"unknown setting {sorted(settings)[0]} (oncelog reads the client security "
                   "settings: security.protocol, sasl.*, ssl.*)")
    sasl = out.get("security.protocol", "").startswith("SASL")
    if "sasl.mechanism" in out and not sasl:
        raise fail("sasl.mechanism is set but security.protocol is not SASL_PLAINTEXT or "
                   "SASL_SSL")
    if sasl and "sasl.mechanism" not in out:
        raise fail(f"security.protocol {out['security.protocol']} needs sasl.mechanism "
                   f"({', '.join(MECHANISMS)})")
    if sasl and not ("sasl.username" in out and "sasl.password" in out):
        raise fail("SASL needs a user: sasl.username and sasl.password, or sasl.jaas.config")
    for location in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
                     "ssl.keystore.location"):
        if location in out and not Path(out[location]).is_file():
            raise fail(f"{location} {out[location]}: no such file")
        if location in out:
            out[location] = str(Path(out[location]).resolve())
    return out


def _is_pem(location: str) -> bool:
    try:
        with open(location, "rb") as file:
            return b"-----BEGIN " in file.read(4096)
    except OSError:
        return True  # named as missing below, with the setting that names it


_JAAS = re.compile(r'^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)'
                   r'(?P<options>(?:\s+[\w.]+\s*=\s*(?:"(?:[^"\\]|\\.)*"|[^\s;"]+))*)\s*;?\s*$')
_JAAS_OPTION = re.compile(r'([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def _from_jaas(jaas: str, mechanism: str | None, fail) -> dict[str, str]:
    """``<LoginModule> required username="x" password="y";`` -> librdkafka's user settings.
    Errors never repeat the text: it holds a password."""
    match = _JAAS.match(jaas)
    if match is None:
        raise fail("sasl.jaas.config is not '<LoginModule> required username=\"...\" "
                   "password=\"...\";'")
    module = match["module"]
    if module not in _LOGIN_MODULES:
        raise fail(f"sasl.jaas.config's login module {module} is not one of "
                   f"{', '.join(_LOGIN_MODULES)}")
    options = {name: re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
               for name, quoted, bare in _JAAS_OPTION.findall(match["options"])}
    missing = [name for name in ("username", "password") if name not in options]
    if missing:
        raise fail(f"sasl.jaas.config has no {missing[0]}")
    allowed = _LOGIN_MODULES[module]
    if mechanism is None:
        if len(allowed) > 1:
            raise fail(f"sasl.jaas.config's {module.rsplit('.', 1)[1]} needs sasl.mechanism "
                       f"({' or '.join(allowed)})")
        mechanism = allowed[0]
    elif mechanism not in allowed:
        raise fail(f"sasl.jaas.config's {module.rsplit('.', 1)[1]} does not log in with "
                   f"sasl.mechanism {mechanism}")
    return {"sasl.mechanism": mechanism, "sasl.username": options["username"],
            "sasl.password": options["password"]}


# A process's ``--command-config`` file, handed to its child processes (``oncelog verify``'s
# producers, consumers and Spark job) by path: the secrets stay in the file, off every
# command line.
ENVIRONMENT = "ONCELOG_COMMAND_CONFIG"


def from_environment() -> dict[str, str]:
    """The librdkafka settings of the file ``ONCELOG_COMMAND_CONFIG`` names; ``{}`` without."""
    return client_security(os.environ.get(ENVIRONMENT) or None)


# What ``translate`` reads; every other client setting is someone else's.
SECURITY_SETTINGS = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.keystore.location",
    "ssl.keystore.type", "ssl.keystore.password", "ssl.endpoint.identification.algorithm",
    *_AS_IS, *_JAVA_ONLY})


def split_security(settings: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``settings`` -> (the security settings ``translate`` reads, the others)."""
    return ({k: v for k, v in settings.items() if k in SECURITY_SETTINGS},
            {k: v for k, v in settings.items() if k not in SECURITY_SETTINGS})


def kafka_python_settings(settings: Mapping[str, str]) -> dict[str, object]:
    """kafka-python's (and aiokafka's, but its ``ssl_context``) keyword arguments for
    librdkafka ``settings`` as ``translate`` returns them."""
    names = {"security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
             "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
             "ssl.ca.location": "ssl_cafile", "ssl.certificate.location": "ssl_certfile",
             "ssl.key.location": "ssl_keyfile", "ssl.key.password": "ssl_password"}
    out: dict[str, object] = {names[k]: v for k, v in settings.items() if k in names}
    if settings.get("ssl.endpoint.identification.algorithm") == "none":
        out["ssl_check_hostname"] = False
    if settings.get("enable.ssl.certificate.verification", "true").lower() == "false":
        out["ssl_check_hostname"] = False
    return out
