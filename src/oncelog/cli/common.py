"""Helpers every ``oncelog`` client command shares: the --bootstrap option, one-sentence
failures, confluent-kafka clients that log nothing to the terminal, and paths the user typed
made absolute at the CLI boundary (``user_path``, ``absolute_sqlite_url``): a command may run
a child process in another folder (ZooKeeper runs in its own; Spark executors in theirs), so
a relative path must never get past the command line."""

from __future__ import annotations

import logging
from pathlib import Path

import click

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class Failure(click.ClickException):
    """One clear sentence, exit status 1."""

    def show(self, file=None) -> None:
        click.echo(f"oncelog: {self.message}", err=True)


def bootstrap_option(function):
    return click.option("--bootstrap", "-b", default=DEFAULT_BOOTSTRAP, show_default=True,
                        metavar="HOST:PORT", help="A broker to bootstrap from.")(function)


# -- client commands -----------------------------------------------------------------------

def admin_client(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    # Looking a topic up must not create it, whatever the broker's auto-creation setting.
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000,
                        "allow.auto.create.topics": False, "logger": quiet_logger()})


def quiet_logger() -> logging.Logger:
    quiet = logging.getLogger("oncelog.client.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    return quiet


def wait_for(future, what: str, timeout: float = 15.0):
    from confluent_kafka import KafkaException
    try:
        return future.result(timeout=timeout)
    except KafkaException as error:
        raise Failure(f"{what}: {error.args[0].str()}") from None
    except Exception as error:  # concurrent.futures.TimeoutError and friends
        raise Failure(f"{what}: {error or type(error).__name__}") from None


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
