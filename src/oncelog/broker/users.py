"""SCRAM users as DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) see
them, Kafka's rules (its ScramControlManager and ScramImage):

- Describe answers from this broker's copy of the credentials (``security.credentials``,
  re-read when the store says they changed): every user when the request names none, else
  each named once - RESOURCE_NOT_FOUND for a user without credentials, DUPLICATE_RESOURCE for
  one named twice.
- Alter takes, per user, one deletion or one upsertion (a second operation on the same user in
  one request is DUPLICATE_RESOURCE for that user); an empty name is UNACCEPTABLE_CREDENTIAL, a
  mechanism other than SCRAM-SHA-256 (1) and SCRAM-SHA-512 (2) UNSUPPORTED_SASL_MECHANISM,
  iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL, deleting what does not exist
  RESOURCE_NOT_FOUND. An upsertion carries the client's salted password (the client ran
  PBKDF2); only the StoredKey and ServerKey made from it are kept. Results: the deletions,
  then the upsertions, then the failures, as Kafka lists them.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from ..controller.store import MetadataStore, StoreCalls
from ..protocol.errors import ErrorCode
from ..security.credentials import Credentials
from ..security.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential

# Kafka's ScramMechanism types
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF = {name: number for number, name in MECHANISM_TYPES.items()}


# (user, error, message, [(mechanism type, iterations)])
Described = tuple[str, ErrorCode, "str | None", list[tuple[int, int]]]


@dataclass(frozen=True)
class Outcome:
    user: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


class ScramUsers:
    def __init__(self, store: MetadataStore, calls: StoreCalls,
                 credentials: Credentials | None = None) -> None:
        self.store = store
        self.calls = calls
        self.credentials = credentials if credentials is not None else Credentials()

    async def reread(self) -> None:
        self.credentials.replace(await self.calls(self.store.scram_credentials))

    def describe(self, names: list[str] | None) -> list[Described]:
        """(user, error, message, [(mechanism type, iterations)]) per user."""
        known = self.credentials.users()
        if not names:
            wanted = {user: False for user in known}
        else:
            wanted = {}
            for name in names:
                wanted[name] = name in wanted
        results: list[Described] = []
        for user, twice in wanted.items():
            if twice:
                results.append((user, ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM "
                                f"credentials for the same user twice in a single request: "
                                f"{user}", []))
            elif user not in known:
                results.append((user, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a "
                                f"user credential that does not exist: {user}", []))
            else:
                infos = sorted((TYPE_OF[m], iterations) for m, iterations in known[user])
                results.append((user, ErrorCode.NONE, None, infos))
        return results

    async def alter(self, deletions: list[tuple[str, int]],
                    upsertions: list[tuple[str, int, int, bytes, bytes]]) -> list[Outcome]:
        errors: dict[str, Outcome] = {}
        deleting: dict[str, str] = {}
        upserting: dict[str, tuple[str, ScramCredential]] = {}
        twice = "A user credential cannot be altered twice in the same request"
        for name, mechanism_type in deletions:
            if name in errors:
                continue
            if deleting.pop(name, None) is not None:
                errors[name] = Outcome(name, ErrorCode.DUPLICATE_RESOURCE, twice)
                continue
            mechanism = MECHANISM_TYPES.get(mechanism_type)
            failure = _check_name_and_mechanism(name, mechanism)
            if failure is None and mechanism is not None and \
                    self.credentials.lookup(name, mechanism) is None:
                failure = Outcome(name, ErrorCode.RESOURCE_NOT_FOUND,
                                  "Attempt to delete a user credential that does not exist")
            if failure is not None:
                errors[name] = failure
            else:
                assert mechanism is not None
                deleting[name] = mechanism
        for name, mechanism_type, iterations, salt, salted in upsertions:
            if name in errors:
                continue
            if deleting.pop(name, None) is not None or upserting.pop(name, None) is not None:
                errors[name] = Outcome(name, ErrorCode.DUPLICATE_RESOURCE, twice)
                continue
            mechanism = MECHANISM_TYPES.get(mechanism_type)
            failure = _check_name_and_mechanism(name, mechanism)
            if failure is None and iterations < MIN_ITERATIONS:
                failure = Outcome(name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif failure is None and iterations > MAX_ITERATIONS:
                failure = Outcome(name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            if failure is not None:
                errors[name] = failure
                continue
            assert mechanism is not None
            upserting[name] = (mechanism, _from_salted(mechanism, salt, salted, iterations))
        for name, mechanism in deleting.items():
            await self.calls(self.store.alter_scram_credential, name, mechanism, None)
        for name, (mechanism, credential) in upserting.items():
            await self.calls(self.store.alter_scram_credential, name, mechanism,
                             credential.to_text())
        if deleting or upserting:
            await self.reread()
        return ([Outcome(name) for name in deleting] + [Outcome(name) for name in upserting]
                + list(errors.values()))


def _check_name_and_mechanism(name: str, mechanism: str | None) -> Outcome | None:
    if not name:
        return Outcome(name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if mechanism is None:
        return Outcome(name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return None


def _from_salted(mechanism: str, salt: bytes, salted: bytes, iterations: int
                 ) -> ScramCredential:
    digest = MECHANISMS[mechanism]
    client_key = hmac.digest(salted, b"Client Key", digest)
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(),
                           hmac.digest(salted, b"Server Key", digest), iterations)
