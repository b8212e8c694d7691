"""Helpers every ``oncelog`` client command shares: the --bootstrap option, one-sentence
failures, confluent-kafka clients that log nothing to the terminal, and paths the user typed
made absolute at the CLI boundary (``user_path``, ``absolute_sqlite_url``): a command may run
a child process in another folder (ZooKeeper runs in its own; Spark executors in theirs), so
a relative path must never get past the command line.

``bootstrap_option`` is where an unusable address is caught, for every command that has
it: a malformed one is a usage error (exit 2) when the arguments are parsed, and one that
does not answer (refused, does not resolve, timed out) is a ``Failure`` naming it within
a few seconds, before the command builds a client (``client.bootstrap`` says how).
A command without the option calls ``check_bootstrap`` itself.

It comes with ``--command-config FILE``, as Kafka's tools take it: the client's security
settings (``client.security`` reads them, Kafka's names or librdkafka's). The command sees
neither option's parsing: ``client_settings()`` is what the file said, in librdkafka's
names, and ``client_config``/``admin_client`` build every client of the command with it;
the reachability check speaks TLS when the file says SSL or SASL_SSL.
"""

from __future__ import annotations

import functools
from pathlib import Path

import click

from ..client.bootstrap import BrokerUnreachable, parse_bootstrap
from ..client.bootstrap import check_bootstrap as _check
from ..client.librdkafka import quiet_logger
from ..client.security import SecurityConfigError, client_security

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class Failure(click.ClickException):
    """One clear sentence, exit status 1."""

    def show(self, file=None) -> None:
        click.echo(f"oncelog: {self.message}", err=True)


class BootstrapServers(click.ParamType):
    """HOST:PORT[,HOST:PORT...], checked for form only (``check_bootstrap`` for reach)."""
    name = "HOST:PORT"

    def convert(self, value, param, ctx):
        try:
            parse_bootstrap(value)
        except ValueError as error:
            self.fail(str(error), param, ctx)
        return value


def check_bootstrap(bootstrap: str, security: dict[str, str] | None = None) -> None:
    """A Failure naming the address and the cause unless a server of ``bootstrap`` answers
    as a Kafka broker within a few seconds (over TLS when ``security`` says so)."""
    try:
        _check(bootstrap, security=security)
    except (ValueError, BrokerUnreachable) as error:
        raise Failure(str(error)) from None


_SECURITY = "oncelog.client_security"


def read_command_config(path) -> dict[str, str]:
    """A ``--command-config`` file's librdkafka settings, or a Failure naming the cause."""
    try:
        return client_security(path)
    except SecurityConfigError as error:
        raise Failure(str(error)) from None


def client_settings() -> dict[str, str]:
    """The running command's ``--command-config`` settings (librdkafka's names); ``{}``
    without one."""
    context = click.get_current_context(silent=True)
    return dict(context.meta.get(_SECURITY, {})) if context is not None else {}


def client_config(bootstrap: str, settings: dict | None = None) -> dict:
    """A confluent-kafka client's configuration: ``bootstrap``, the command's security
    settings, a quiet logger, then ``settings``."""
    return {"bootstrap.servers": bootstrap, **client_settings(), "logger": quiet_logger(),
            **(settings or {})}


def command_config_option(function):
    """``--command-config FILE`` alone, for a command whose --bootstrap is optional."""
    return click.option("--command-config", type=user_path(dir_okay=False), default=None,
                        metavar="FILE",
                        help="Client security settings, as Kafka's tools take them "
                             "(security.protocol, sasl.*, ssl.*; see docs/security.md).")(function)


def bootstrap_option(function):
    """``--bootstrap``/``-b`` and ``--command-config`` for a command that talks to a broker;
    the command runs only once the file was read and the address answers
    (``check_bootstrap``), after every argument was parsed, so a usage error is still
    reported as one."""
    @functools.wraps(function)
    def checked(*args, **kwargs):
        security = read_command_config(kwargs.pop("command_config"))
        click.get_current_context().meta[_SECURITY] = security
        check_bootstrap(kwargs["bootstrap"], security)
        return function(*args, **kwargs)

    checked = command_config_option(checked)
    return click.option("--bootstrap", "-b", type=BootstrapServers(), default=DEFAULT_BOOTSTRAP,
                        show_default=True, metavar="HOST:PORT",
                        help="A broker to bootstrap from.")(checked)


# -- client commands -----------------------------------------------------------------------

def admin_client(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    # Looking a topic up must not create it, whatever the broker's auto-creation setting.
    return AdminClient(client_config(bootstrap, {"socket.timeout.ms": 10000,
                                                 "allow.auto.create.topics": False}))


def wait_for(future, what: str, timeout: float = 15.0):
    from concurrent.futures import TimeoutError as FutureTimeout

    from confluent_kafka import KafkaException
    try:
        return future.result(timeout=timeout)
    except KafkaException as error:
        raise Failure(f"{what}: {error.args[0].str()}") from None
    except FutureTimeout:
        # Its message is empty: "cannot create topic x: " was all a user saw.
        raise Failure(f"{what}: the broker did not answer within {timeout:g} s") from None


def cluster_metadata(bootstrap: str, topic: str | None = None):
    from confluent_kafka import KafkaException
    try:
        return admin_client(bootstrap).list_topics(topic=topic, timeout=10)
    except KafkaException as error:
        raise Failure(f"cannot reach a broker at {bootstrap}: {error.args[0].str()}") from None


def topic_metadata(bootstrap: str, topic: str, what: str):
    """The topic's metadata, or a Failure saying ``cannot <what> <topic>: <reason>``."""
    entry = cluster_metadata(bootstrap, topic).topics.get(topic)
    if entry is None or entry.error is not None:
        reason = entry.error.str() if entry is not None and entry.error else "unknown topic"
        raise Failure(f"cannot {what} {topic}: {reason}")
    return entry


def parse_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep:
        raise Failure(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


# -- paths ---------------------------------------------------------------------------------

def user_path(*, file_okay: bool = True, dir_okay: bool = True) -> click.Path:
    """A path option's type: a ``Path``, absolute (relative to the folder the command was
    run from), defaults included."""
    return click.Path(file_okay=file_okay, dir_okay=dir_okay, path_type=Path,
                      resolve_path=True)


def absolute_sqlite_url(url: str | None) -> str | None:
    """``sqlite:///relative.db`` made ``sqlite:////<here>/relative.db``; any other URL as is."""
    prefix = "sqlite:///"
    if url is None or not url.startswith(prefix):
        return url
    path = url[len(prefix):]
    if not path or path.startswith("/") or path.startswith(":memory:"):
        return url
    return prefix + str(Path(path).resolve())
