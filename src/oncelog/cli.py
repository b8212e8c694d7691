"""The ``oncelog`` command.

``oncelog broker`` runs a broker; ``topics``, ``produce`` and ``consume`` are kcat-like
clients over confluent-kafka that work against any Kafka-protocol broker. Every client
command takes ``--bootstrap HOST:PORT`` (default 127.0.0.1:9092). Errors are one sentence on
stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="oncelog")
def main() -> None:
    """oncelog: a Kafka-compatible log with delivery guarantees you can choose and prove."""


# -- broker --------------------------------------------------------------------------------

@main.command()
@click.option("--listen", metavar="HOST:PORT", help="Where to listen [default: 127.0.0.1:9092].")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Data directory [default: ~/.local/share/oncelog].")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A server.properties-style file with Kafka config names.")
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="Set one config, e.g. --set num.partitions=3 (repeatable; wins over --config).")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
def broker(listen, data_dir, config_file, settings, log_level) -> None:
    """Run a broker until SIGINT or SIGTERM."""
    from .broker.broker import Broker
    from .broker.config import BrokerConfig, ConfigError, read_properties

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


def _run_broker(server) -> None:
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


# -- client commands -----------------------------------------------------------------------

def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000,
                        "logger": _quiet_logger()})


def _quiet_logger() -> logging.Logger:
    quiet = logging.getLogger("oncelog.client.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    return quiet


def _wait(future, what: str, timeout: float = 15.0):
    from confluent_kafka import KafkaException
    try:
        return future.result(timeout=timeout)
    except KafkaException as error:
        raise Failure(f"{what}: {error.args[0].str()}") from None
    except Exception as error:  # concurrent.futures.TimeoutError and friends
        raise Failure(f"{what}: {error or type(error).__name__}") from None


def _cluster_metadata(bootstrap: str, topic: str | None = None):
    from confluent_kafka import KafkaException
    try:
        return _admin(bootstrap).list_topics(topic=topic, timeout=10)
    except KafkaException as error:
        raise Failure(f"cannot reach a broker at {bootstrap}: {error.args[0].str()}") from None


@main.group()
def topics() -> None:
    """Create, list, describe and delete topics."""


@topics.command("create")
@bootstrap_option
@click.argument("name")
@click.option("--partitions", "-p", type=int, default=-1, help="[default: the broker's]")
@click.option("--replication-factor", "-r", type=int, default=-1, help="[default: the broker's]")
@click.option("--config", "-c", "configs", multiple=True, metavar="NAME=VALUE",
              help="A topic config, e.g. retention.ms=60000 (repeatable).")
def topics_create(bootstrap, name, partitions, replication_factor, configs) -> None:
    """Create topic NAME."""
    from confluent_kafka.admin import NewTopic
    config = dict(_pair(c) for c in configs)
    admin = _admin(bootstrap)  # held: a collected client fails its futures
    future = admin.create_topics(
        [NewTopic(name, partitions, replication_factor, config=config)], request_timeout=15)[name]
    _wait(future, f"cannot create topic {name}")
    click.echo(f"created topic {name}")


def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep:
        raise Failure(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


@topics.command("list")
@bootstrap_option
def topics_list(bootstrap) -> None:
    """List topics with their partition counts."""
    metadata = _cluster_metadata(bootstrap)
    for name in sorted(metadata.topics):
        click.echo(f"{name}\t{len(metadata.topics[name].partitions)} partitions")


@topics.command("describe")
@bootstrap_option
@click.argument("name")
def topics_describe(bootstrap, name) -> None:
    """Show a topic's partitions, offsets and configs."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import ConfigResource, ConfigSource
    metadata = _cluster_metadata(bootstrap, name)
    topic = metadata.topics.get(name)
    if topic is None or topic.error is not None:
        reason = topic.error.str() if topic is not None else "unknown topic"
        raise Failure(f"cannot describe topic {name}: {reason}")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "oncelog-cli",
                         "enable.auto.commit": False, "logger": _quiet_logger()})
    try:
        click.echo(f"topic {name}: {len(topic.partitions)} partitions")
        click.echo("partition\tleader\treplicas\tisr\tstart offset\tend offset")
        for index in sorted(topic.partitions):
            info = topic.partitions[index]
            low, high = consumer.get_watermark_offsets(TopicPartition(name, index), timeout=10)
            click.echo(f"{index}\t{info.leader}\t{info.replicas}\t{info.isrs}\t{low}\t{high}")
    finally:
        consumer.close()
    resource = ConfigResource("topic", name)
    admin = _admin(bootstrap)
    configs = _wait(admin.describe_configs([resource])[resource],
                    f"cannot read configs of {name}")
    click.echo("configs:")
    for key in sorted(configs):
        entry = configs[key]
        source = ConfigSource(entry.source).name.lower().replace("_", " ")
        click.echo(f"  {key}={entry.value}  ({source})")


@topics.command("delete")
@bootstrap_option
@click.argument("name")
def topics_delete(bootstrap, name) -> None:
    """Delete topic NAME and all its data."""
    admin = _admin(bootstrap)
    future = admin.delete_topics([name], request_timeout=15)[name]
    _wait(future, f"cannot delete topic {name}")
    click.echo(f"deleted topic {name}")


@main.command()
@bootstrap_option
@click.argument("topic")
@click.option("--key-separator", "-K", metavar="SEP",
              help="Split each input line into key and value at SEP.")
@click.option("--partition", "-p", type=int, default=None, help="Send to this partition.")
@click.option("--header", "-H", "headers", multiple=True, metavar="NAME=VALUE",
              help="Add a header to every record (repeatable).")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True)
@click.option("--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
              default="none", show_default=True)
@click.option("--file", "-f", "source", type=click.File("rb"), default="-",
              help="Read records from this file, one per line [default: stdin].")
def produce(bootstrap, topic, key_separator, partition, headers, acks, compression, source) -> None:
    """Send one record per input line to TOPIC."""
    from confluent_kafka import KafkaException, Producer
    header_list = [(n, v.encode()) for n, v in (_pair(h) for h in headers)]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks,
                         "compression.type": compression, "linger.ms": 5,
                         "message.timeout.ms": 30000, "logger": _quiet_logger()})
    failures: list[str] = []
    delivered = 0

    def on_delivery(error, message) -> None:
        nonlocal delivered
        if error is not None:
            failures.append(error.str())
        else:
            delivered += 1

    separator = key_separator.encode() if key_separator else None
    sent = 0
    for line in source:
        line = line.rstrip(b"\r\n")
        key, value = None, line
        if separator is not None and separator in line:
            key, value = line.split(separator, 1)
        kwargs = {"partition": partition} if partition is not None else {}
        try:
            producer.produce(topic, value=value, key=key, headers=header_list or None,
                             on_delivery=on_delivery, **kwargs)
        except BufferError:
            producer.poll(0.5)
            producer.produce(topic, value=value, key=key, headers=header_list or None,
                             on_delivery=on_delivery, **kwargs)
        except KafkaException as error:
            raise Failure(f"cannot produce to {topic}: {error.args[0].str()}") from None
        sent += 1
        producer.poll(0)
    remaining = producer.flush(35)
    if failures or remaining:
        reason = failures[0] if failures else f"{remaining} records still unsent after 35 s"
        raise Failure(f"{sent - delivered} of {sent} records were not delivered to {topic}: "
                      f"{reason}")
    click.echo(f"produced {delivered} records to {topic}", err=True)


@main.command()
@bootstrap_option
@click.argument("topic")
@click.option("--from", "start", default="earliest", show_default=True,
              help="earliest, latest, an offset, or an ISO-8601 time (e.g. 2026-11-22T10:00).")
@click.option("--count", "-c", type=int, default=None, help="Stop after this many records.")
@click.option("--format", "output", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--exit-at-end/--follow", "-e", default=True, show_default=True,
              help="Stop at the end of every partition, or keep waiting for more.")
@click.option("--isolation", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True)
def consume(bootstrap, topic, start, count, output, exit_at_end, isolation) -> None:
    """Print records of TOPIC: 'partition:offset key value' or JSON lines."""
    from .client.reader import read_topic
    try:
        for record in read_topic(bootstrap, topic, start=start, count=count,
                                 exit_at_end=exit_at_end, isolation_level=isolation):
            click.echo(_format_record(record, output))
    except ValueError as error:
        raise Failure(str(error)) from None


def _format_record(record, output: str) -> str:
    def text(data):
        return None if data is None else data.decode("utf-8", "backslashreplace")
    if output == "json":
        return json.dumps({"topic": record.topic, "partition": record.partition,
                           "offset": record.offset, "timestamp": record.timestamp,
                           "key": text(record.key), "value": text(record.value),
                           "headers": {k: text(v) for k, v in record.headers}})
    key = "" if record.key is None else text(record.key) + " "
    return f"{record.partition}:{record.offset} {key}{text(record.value)}"


@main.command()
@click.option("--records", "-n", type=int, default=20000, show_default=True)
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the demo broker keeps its data [default: a new temporary directory].")
@click.option("--port", type=int, default=None,
              help="Broker port [default: 9092, or a free one if 9092 is taken].")
def demo(records, data_dir, port) -> None:
    """Start a broker, produce and consume through it, crash it, and check the log."""
    from .demo import run_demo
    try:
        ok = run_demo(records, data_dir, port)
    except Exception as error:  # one sentence, not a traceback
        raise Failure(f"demo failed: {error}") from None
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
