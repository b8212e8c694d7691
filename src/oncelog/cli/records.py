"""``oncelog produce`` and ``oncelog consume``: records in and out, one per line.

``consume`` prints a record as five tab-separated fields, the value last and as it is:

    partition:offset  timestamp  key  headers  value

The timestamp is ISO-8601 in UTC to the millisecond (what ``--from`` takes back), the key a
JSON string or ``(no key)``, the headers a JSON object or ``(no headers)``; quoting the key
is what keeps ``2:0 line one`` (no key, value "line one") apart from key "line", value
"one". A null value (a tombstone) prints ``(null)``; ``--format json`` tells it, and any
value, apart exactly.
"""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime

import click

from . import main
from .common import Failure, bootstrap_option, client_config, client_settings, parse_pair


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
    header_list: list[tuple[str, str | bytes | None]] = [
        (n, v.encode()) for n, v in (parse_pair(h) for h in headers)]
    producer = Producer(client_config(bootstrap, {
        "acks": acks, "compression.type": compression, "linger.ms": 5,
        "message.timeout.ms": 30000}))
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
@click.option("--group", "-g", default=None, metavar="GROUP",
              help="Read as a member of consumer group GROUP from its committed offsets, "
                   "committing what was printed (--from: where a partition without a "
                   "committed offset starts).")
def consume(bootstrap, topic, start, count, output, exit_at_end, isolation, group) -> None:
    """Print records of TOPIC, one per line: partition:offset, timestamp, key, headers and
    value separated by tabs (or JSON lines)."""
    from ..client.reader import read_group, read_topic
    interrupted: list[int] = []
    if group is not None:
        records = read_group(bootstrap, topic, group, start=start, count=count,
                             exit_at_end=exit_at_end, isolation_level=isolation,
                             stop=lambda: bool(interrupted), config=client_settings())
    else:
        records = read_topic(bootstrap, topic, start=start, count=count,
                             exit_at_end=exit_at_end, isolation_level=isolation,
                             stop=lambda: bool(interrupted), config=client_settings())
    previous = signal.signal(signal.SIGINT, _stop_on_first_interrupt(interrupted))
    try:
        for record in records:
            click.echo(_format_record(record, output))
    except KeyboardInterrupt:
        pass  # a second Ctrl-C: stop at once, still a normal end
    except ValueError as error:
        raise Failure(str(error)) from None
    finally:
        signal.signal(signal.SIGINT, previous)
        records.close()  # a group member commits what was printed, then leaves


def _stop_on_first_interrupt(interrupted: list[int]):
    """Ctrl-C is how a user ends --follow: a normal end, exit 0 (as kcat's). The first one
    asks the reader to stop between polls, after the record being printed, so a group
    commits every record printed; a KeyboardInterrupt between printing a record and asking
    for the next left that one uncommitted. A second Ctrl-C stops at once."""
    def handle(signum, _frame) -> None:
        if interrupted:
            raise KeyboardInterrupt
        interrupted.append(signum)
    return handle

def _format_record(record, output: str) -> str:
    if output == "json":
        return json.dumps({"topic": record.topic, "partition": record.partition,
                           "offset": record.offset, "timestamp": record.timestamp,
                           "key": _text(record.key), "value": _text(record.value),
                           "headers": {k: _text(v) for k, v in record.headers}})
    key = "(no key)" if record.key is None else json.dumps(_text(record.key),
                                                           ensure_ascii=False)
    headers = (json.dumps({k: _text(v) for k, v in record.headers}, ensure_ascii=False)
               if record.headers else "(no headers)")
    value = "(null)" if record.value is None else _text(record.value)
    return (f"{record.partition}:{record.offset}\t{_iso_time(record.timestamp)}\t{key}\t"
            f"{headers}\t{value}")


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def _iso_time(timestamp_ms: int) -> str:
    if timestamp_ms < 0:  # a record written without one (librdkafka reports -1)
        return "(no timestamp)"
    moment = datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
