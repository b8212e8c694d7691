"""A client certificate's name as Kafka writes it (RFC 2253), and ``ssl.principal.mapping.rules``
as Kafka's SslPrincipalMapper reads them."""

from __future__ import annotations

import socket
import ssl
import threading

import pytest

from oncelog.config import ConfigError
from oncelog.security.principal import NoMatchingRule, PrincipalMapper, distinguished_name
from oncelog.testing.certificates import CertificateAuthority


def _subject_seen_by_a_server(tmp_path, subject) -> tuple:
    """The subject of a client certificate as a TLS server sees it after a real handshake."""
    ca = CertificateAuthority(tmp_path)
    server, client = ca.issue("server"), ca.issue("client", client=True, subject=subject)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(server.keystore)
    server_context.load_verify_locations(ca.certificate)
    server_context.verify_mode = ssl.CERT_REQUIRED
    client_context = ssl.create_default_context(cafile=str(ca.certificate))
    client_context.load_cert_chain(client.keystore)
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list = []

    def accept() -> None:
        connection, _ = listener.accept()
        with server_context.wrap_socket(connection, server_side=True) as tls:
            seen.append(tls.getpeercert()["subject"])

    thread = threading.Thread(target=accept)
    thread.start()
    with socket.create_connection(listener.getsockname()) as raw:
        with client_context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.recv(1)
    thread.join(10)
    listener.close()
    return seen[0]


def test_a_certificates_subject_is_written_most_specific_first_with_escapes(tmp_path):
    subject = _subject_seen_by_a_server(
        tmp_path, [("C", "US"), ("O", "acme, inc"), ("OU", "data"), ("CN", "alice")])
    assert distinguished_name(subject) == "CN=alice,OU=data,O=acme\\, inc,C=US"


@pytest.mark.parametrize("rules, name, expected", [
    ("DEFAULT", "CN=alice,OU=data,O=acme,C=US", "CN=alice,OU=data,O=acme,C=US"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
     "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT",
     "CN=Duke,OU=JavaSoft,O=Sun Microsystems,C=US", "duke"),
    ("RULE:^CN=(.*?),OU=(.*?)$/$1/U", "CN=alice,OU=data", "ALICE"),
    ("RULE:^CN=([^,]*).*$/svc-$1/, DEFAULT", "CN=etl,O=acme", "svc-etl"),
    ("RULE:^O=acme$/x/, DEFAULT", "CN=etl,O=acme", "CN=etl,O=acme"),
])
def test_mapping_rules_as_kafka_reads_them(rules, name, expected):
    assert PrincipalMapper(rules).name(name) == expected


def test_a_name_no_rule_matches_is_refused():
    with pytest.raises(NoMatchingRule, match="matches 'CN=bob'"):
        PrincipalMapper("RULE:^CN=alice$/alice/").name("CN=bob")


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*$/$1/", "PATTERN:x/y/", "RULE:x"])
def test_a_rule_that_cannot_be_read_stops_the_broker(rules):
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        PrincipalMapper(rules)
