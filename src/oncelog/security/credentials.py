"""The SCRAM credentials a broker checks clients against: an in-memory copy of the metadata
store's (``MetadataStore.scram_credentials``), replaced whole when the store says they
changed. Only salted credentials, never passwords (``scram.ScramCredential``)."""

from __future__ import annotations

import logging

from .scram import MECHANISMS, ScramCredential

log = logging.getLogger(__name__)


class Credentials:
    def __init__(self) -> None:
        self._by_user: dict[tuple[str, str], ScramCredential] = {}

    def replace(self, stored: dict[str, dict[str, str]]) -> None:
        """The store's credentials now (user -> mechanism -> Kafka's text)."""
        by_user: dict[tuple[str, str], ScramCredential] = {}
        for user, mechanisms in stored.items():
            for mechanism, text in mechanisms.items():
                if mechanism not in MECHANISMS:
                    continue
                try:
                    by_user[(user, mechanism)] = ScramCredential.from_text(text)
                except ValueError as error:
                    log.error("the %s credential of user %r is unreadable; the user cannot "
                              "authenticate with it: %s", mechanism, user, error)
        self._by_user = by_user

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._by_user.get((user, mechanism))

    def of_user(self, user: str) -> list[tuple[str, ScramCredential]]:
        """Every credential of ``user``, by mechanism (SASL/PLAIN checks a password with any)."""
        return [(m, c) for (u, m), c in sorted(self._by_user.items()) if u == user]

    def users(self) -> dict[str, list[tuple[str, int]]]:
        """user -> [(mechanism, iterations)], as DescribeUserScramCredentials lists them."""
        listed: dict[str, list[tuple[str, int]]] = {}
        for (user, mechanism), credential in sorted(self._by_user.items()):
            listed.setdefault(user, []).append((mechanism, credential.iterations))
        return listed
