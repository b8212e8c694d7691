"""``oncelog users add|list|delete``: SCRAM users, as ``kafka-storage format --add-scram``
and ``kafka-configs --alter --add-config SCRAM-SHA-512=[...] --entity-type users`` make them.

The credentials go where the broker reads them: the metadata store - the data directory of a
single broker (``--data-dir``, while that broker is stopped: it reads them as it starts), or
a cluster's ZooKeeper (``--zookeeper``, at any time: every broker watches them). Only the
salted credential is kept (``security.scram``), never the password; the password is read
from standard input (one line, or asked twice on a terminal), never from the command line,
where ``ps`` would show it.
"""

from __future__ import annotations

import fcntl
import getpass
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from . import main
from .common import Failure, user_path

if TYPE_CHECKING:
    from ..controller.store import MetadataStore

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@main.group()
def users() -> None:
    """Add, list and delete SCRAM users (SASL/SCRAM and SASL/PLAIN log in as them)."""


def _store_options(command):
    command = click.option("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                           help="A cluster's ZooKeeper (zookeeper.connect).")(command)
    return click.option("--data-dir", type=user_path(file_okay=False),
                        help="A single broker's data directory (the broker stopped).")(command)


class _Store:
    def __init__(self, data_dir: Path | None, zookeeper: str | None) -> None:
        if (data_dir is None) == (zookeeper is None):
            raise Failure("give the store: --data-dir DIR (a single broker's) or --zookeeper "
                          "HOST:PORT (a cluster's)")
        self._lock: int | None = None
        self.store: MetadataStore
        if data_dir is not None:
            from ..controller.metadata_store import LocalMetadataStore
            self._hold_data_dir(data_dir)
            self.store = LocalMetadataStore(data_dir)
        else:
            from ..controller.store import StoreUnavailable
            from ..controller.zookeeper_store import ZooKeeperMetadataStore
            assert zookeeper is not None
            try:
                self.store = ZooKeeperMetadataStore(zookeeper, session_timeout_ms=6000,
                                                    connect_attempt_timeout_s=2.0).connect()
            except (StoreUnavailable, ValueError) as error:
                raise Failure(str(error)) from None

    def _hold_data_dir(self, data_dir: Path) -> None:
        """The broker's own lock: a running broker has read the credentials already."""
        data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = os.open(data_dir / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock)
            raise Failure(f"a broker is running on {data_dir}; stop it first (a broker reads "
                          "its users as it starts)") from None

    def __enter__(self):
        return self.store

    def __exit__(self, *exc) -> None:
        self.store.close()
        if self._lock is not None:
            os.close(self._lock)


def _password() -> str:
    if sys.stdin.isatty():
        first = getpass.getpass("password: ")
        if first != getpass.getpass("again: "):
            raise Failure("the two passwords differ")
        password = first
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise Failure("no password: give it on standard input (one line)")
    return password


@users.command("add")
@click.argument("name")
@click.option("--mechanism", type=click.Choice(MECHANISMS), default="SCRAM-SHA-512",
              show_default=True)
@click.option("--iterations", type=click.IntRange(4096, 16384), default=4096,
              show_default=True, help="PBKDF2 iterations (Kafka's bounds).")
@_store_options
def users_add(name, mechanism, iterations, data_dir, zookeeper) -> None:
    """Add NAME (or give it a new password) for MECHANISM; the password on standard input."""
    from ..security.scram import ScramCredential
    if not name or any(c in name for c in "/\x00") or name in (".", ".."):
        raise Failure(f"{name!r} cannot be a user name")
    password = _password()
    credential = ScramCredential.from_password(mechanism, password, iterations)
    with _Store(data_dir, zookeeper) as store:
        store.alter_scram_credential(name, mechanism, credential.to_text())
    click.echo(f"user {name}: {mechanism} with {iterations} iterations")


@users.command("list")
@_store_options
def users_list(data_dir, zookeeper) -> None:
    """Every user and its mechanisms (never a credential)."""
    from ..security.scram import ScramCredential
    with _Store(data_dir, zookeeper) as store:
        stored = store.scram_credentials()
    click.echo("USER\tMECHANISM\tITERATIONS")
    for name in sorted(stored):
        for mechanism, text in sorted(stored[name].items()):
            click.echo(f"{name}\t{mechanism}\t{ScramCredential.from_text(text).iterations}")


@users.command("delete")
@click.argument("name")
@click.option("--mechanism", type=click.Choice(MECHANISMS),
              help="Only this mechanism's credential [default: all of NAME's].")
@_store_options
def users_delete(name, mechanism, data_dir, zookeeper) -> None:
    """Delete NAME's credentials."""
    with _Store(data_dir, zookeeper) as store:
        held = store.scram_credentials().get(name, {})
        if not held or (mechanism and mechanism not in held):
            raise Failure(f"no user {name}" + (f" with {mechanism}" if mechanism else ""))
        for each in [mechanism] if mechanism else sorted(held):
            store.alter_scram_credential(name, each, None)
    click.echo(f"deleted user {name}" + (f" ({mechanism})" if mechanism else ""))
