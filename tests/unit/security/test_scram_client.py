"""The SCRAM client (``ScramClient``, what a broker authenticates to another broker with)
against the server's side (``ScramExchange``): both mechanisms, a wrong password, and a
server that does not hold the credential or tampers with the exchange."""

from __future__ import annotations

import base64
import hmac

import pytest

from oncelog.security.scram import (AuthenticationFailed, ScramClient, ScramCredential,
                                    ScramExchange)


def _server(mechanism: str, users: dict[str, str]) -> ScramExchange:
    credentials = {(name, mechanism): ScramCredential.from_password(mechanism, password)
                   for name, password in users.items()}
    return ScramExchange(mechanism, lambda user, m: credentials.get((user, m)))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_client_authenticates_and_checks_the_server_signature(mechanism):
    server = _server(mechanism, {"broker": "broker-secret"})
    client = ScramClient(mechanism, "broker", "broker-secret")
    server_first = server.first(client.first())
    server_final = server.final(client.final(server_first))
    client.verify(server_final)
    assert server.done and server.username == "broker"


def test_a_user_name_with_comma_and_equals_is_encoded_as_rfc_5802_says():
    server = _server("SCRAM-SHA-256", {"a,b=c": "pw"})
    client = ScramClient("SCRAM-SHA-256", "a,b=c", "pw")
    first = client.first()
    assert first == b"n,,n=a=2Cb=3Dc,r=" + first.split(b",r=")[1]
    client.verify(server.final(client.final(server.first(first))))
    assert server.username == "a,b=c"


def test_a_wrong_password_fails_at_the_server():
    server = _server("SCRAM-SHA-512", {"broker": "right"})
    client = ScramClient("SCRAM-SHA-512", "broker", "wrong")
    server_first = server.first(client.first())
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        server.final(client.final(server_first))


def test_a_server_without_the_credential_cannot_forge_its_final_message():
    """A server that knows the salt (it is public) but not ServerKey: its signature is
    refused, so the client never takes an impostor for the broker it meant."""
    real = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    impostor = ScramCredential.from_password("SCRAM-SHA-256", "other", salt=real.salt)
    server = ScramExchange("SCRAM-SHA-256", lambda _u, _m: real)
    client = ScramClient("SCRAM-SHA-256", "broker", "pw")
    server_first = server.first(client.first())
    server.final(client.final(server_first))  # the real server accepts ...
    forged = ScramExchange("SCRAM-SHA-256", lambda _u, _m: impostor)
    client2 = ScramClient("SCRAM-SHA-256", "broker", "pw")
    forged_first = forged.first(client2.first())
    final = client2.final(forged_first)
    # ... and the impostor's own answer to a proof it cannot check carries its signature
    without_proof = final.rsplit(b",p=", 1)[0].decode()
    auth = f"{client2._client_first_bare},{forged_first.decode()},{without_proof}".encode()
    signature = hmac.digest(impostor.server_key, auth, "sha256")
    with pytest.raises(AuthenticationFailed, match="signature is wrong"):
        client2.verify(b"v=" + base64.b64encode(signature))


def test_a_server_nonce_that_does_not_extend_ours_is_refused():
    client = ScramClient("SCRAM-SHA-256", "broker", "pw", nonce="abc")
    client.first()
    salt = base64.b64encode(b"salt").decode()
    with pytest.raises(AuthenticationFailed, match="nonce"):
        client.final(f"r=xyz123,s={salt},i=4096".encode())
    with pytest.raises(AuthenticationFailed, match="nonce"):
        client.final(f"r=abc,s={salt},i=4096".encode())  # nothing of the server's


def test_iteration_counts_beyond_kafkas_bounds_are_refused_before_any_hashing():
    client = ScramClient("SCRAM-SHA-512", "broker", "pw", nonce="abc")
    client.first()
    salt = base64.b64encode(b"salt").decode()
    with pytest.raises(AuthenticationFailed, match="100000000 SCRAM iterations"):
        client.final(f"r=abcdef,s={salt},i=100000000".encode())


def test_the_servers_refusal_is_reported_in_its_words():
    client = ScramClient("SCRAM-SHA-512", "broker", "pw")
    client.first()
    with pytest.raises(AuthenticationFailed, match="unknown-user"):
        client.final(b"e=unknown-user")


def test_the_password_is_not_in_the_clients_repr():
    assert "secret" not in repr(ScramClient("SCRAM-SHA-512", "broker", "secret"))
