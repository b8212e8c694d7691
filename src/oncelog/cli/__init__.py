"""The ``oncelog`` command: one module per command family.

``oncelog broker`` and ``oncelog demo`` live here; ``topics`` (``cli/topics.py``),
``produce``/``consume`` (``cli/records.py``), ``groups`` (``cli/groups.py``),
``transactions`` (``cli/transactions.py``) and ``producers`` (``cli/producers.py``) are
kcat-like clients over confluent-kafka that work against any Kafka-protocol broker;
``cluster`` (``cli/cluster.py``), ``pipeline`` (``cli/pipeline.py``) and ``verify``
(``cli/verify.py``) start processes of their own; ``users`` (``cli/users.py``) writes SCRAM
credentials and ``acls`` (``cli/acls.py``) ACLs into a metadata store. Shared option and
error helpers are in ``cli/common.py``. Every client command takes ``--bootstrap
HOST:PORT`` (default 127.0.0.1:9092) and ``--command-config FILE`` (a secured broker's client
settings, ``client.security``). Errors are one sentence on stderr and a non-zero exit, never a
traceback.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import click

from .common import Failure, user_path


class _OneLineErrors(click.Group):
    """Click's usage errors (a bad value, a missing argument) as one line, like ours: click
    would print the usage block, a hint and the error on three."""

    def main(self, args=None, prog_name=None, **extra):
        try:
            result = super().main(args, prog_name, standalone_mode=False, **extra)
        except click.UsageError as error:
            where = error.ctx.command_path if error.ctx else "oncelog"
            click.echo(f"oncelog: {error.format_message()} (see {where} --help)", err=True)
            sys.exit(error.exit_code)
        except click.ClickException as error:
            error.show()
            sys.exit(error.exit_code)
        except click.Abort:
            click.echo("oncelog: aborted", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(None, "--version", "-V", "-v", package_name="oncelog")
def main() -> None:
    """oncelog: a Kafka-compatible log with delivery guarantees you can choose and prove."""


# -- broker --------------------------------------------------------------------------------

@main.command()
@click.option("--listen", metavar="HOST:PORT", help="Where to listen [default: 127.0.0.1:9092].")
@click.option("--data-dir", type=user_path(file_okay=False),
              help="Data directory [default: ~/.local/share/oncelog].")
@click.option("--config", "config_file", type=user_path(dir_okay=False),
              help="A server.properties-style file with Kafka config names.")
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="Set one config, e.g. --set num.partitions=3 (repeatable; wins over --config).")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
def broker(listen, data_dir, config_file, settings, log_level) -> None:
    """Run a broker until SIGINT or SIGTERM."""
    from ..broker.broker import Broker
    from ..config import BrokerConfig, ConfigError, read_properties

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        explicit = read_properties(config_file) if config_file else {}
        for setting in settings:
            name, sep, value = setting.partition("=")
            if not sep:
                raise ConfigError(f"--set expects NAME=VALUE, got {setting!r}")
            explicit[name.strip()] = value.strip()
        if listen:
            explicit["listeners"] = f"PLAINTEXT://{listen}"
        if data_dir:
            explicit["log.dirs"] = str(data_dir)
        server = Broker(BrokerConfig(explicit))
        _run_broker(server)
    except ConfigError as error:
        raise Failure(str(error)) from None
    except OSError as error:
        if error.filename is None:
            raise
        # A data directory that cannot be created or written (a typo, a read-only mount).
        raise Failure(f"cannot use {error.filename}: {error.strerror}") from None


def _run_broker(server) -> None:
    from ..broker.allocator import keep_freed_memory
    keep_freed_memory()
    try:
        import uvloop
        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, server.request_stop)
        await server.run()

    with runner:
        runner.run(serve())


@main.command()
@click.option("--records", "-n", type=int, default=20000, show_default=True)
@click.option("--data-dir", type=user_path(file_okay=False),
              help="Where the demo broker keeps its data [default: a new temporary directory].")
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="Broker port [default: 9092, or a free one if 9092 is taken].")
def demo(records, data_dir, port) -> None:
    """Start a broker, produce and consume through it, crash it, and check the log."""
    from ..demo import run_demo
    try:
        ok = run_demo(records, data_dir, port)
    except Exception as error:  # one sentence, not a traceback
        raise Failure(f"demo failed: {error}") from None
    if not ok:
        sys.exit(1)



def _register_commands() -> None:
    from . import records, topics  # noqa: F401  (each module adds its commands to ``main``)
    from . import producers  # noqa: F401
    from . import groups  # noqa: F401
    from . import pipeline  # noqa: F401
    from . import verify  # noqa: F401
    from . import cluster  # noqa: F401
    from . import transactions  # noqa: F401
    from . import users  # noqa: F401
    from . import acls  # noqa: F401


_register_commands()
