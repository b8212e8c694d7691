"""The source's options: Spark's Kafka connector's names and meanings, checked up front.

Everything here runs on the driver when a query is defined, so a bad option fails with one
sentence before any batch runs. The result, ``SourceOptions``, is plain data: it is pickled
into every offset range the executors read.

Options (as in Spark's Kafka source):
- exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern`` (a regular
  expression matched against whole topic names) or ``assign`` (JSON ``{"topic": [0, 1]}``)
- ``startingOffsets``: ``earliest`` | ``latest`` (streaming only) | JSON
  ``{"topic": {"0": 23, "1": -2}}`` where -2 means earliest and -1 latest
- ``startingTimestamp`` (ms, every partition) or ``startingOffsetsByTimestamp`` (JSON of ms);
  both win over ``startingOffsets``; ``startingOffsetsByTimestampStrategy``: ``error`` (a
  partition with no record at or after the time fails the query) | ``latest``
- ``startingOffsetsFromSink`` (streaming): the URL of a ``TransactionalSink``'s database
  (``sqlite:///...``, ``postgresql://...``) or a ``KafkaSink``'s ``kafka://BOOTSTRAP/TOPIC``,
  and ``sinkQueryName`` (default ``default``) its query name or sink id. A query started
  without a checkpoint begins exactly where the sink's stored end offsets end (partitions
  the sink has never seen: earliest); only when the sink holds no batch of that query does
  ``startingOffsets`` apply. ``TransactionalSink.source_options()``
  (``KafkaSink.source_options()``) gives both. oncelog's own: Spark's Kafka source has no
  such option.
  ``startingOffsetsFromSinkPassword``: a PostgreSQL URL's password, apart from the URL:
  Spark shows a query's options in plans and its UI, redacting only names that say
  ``password`` (``source_options()`` splits it out so)
- ``endingOffsets`` (batch only): ``latest`` | JSON with -1 for latest; ``endingTimestamp`` /
  ``endingOffsetsByTimestamp`` likewise
- ``maxOffsetsPerTrigger`` (streaming), ``minPartitions``, ``failOnDataLoss`` (default true),
  ``includeHeaders`` (default false), ``kafkaConsumer.pollTimeoutMs`` (default 120000)
- ``fetchOffset.numRetries`` (default 3) and ``fetchOffset.retryIntervalMs`` (default 1000):
  a lookup or read that a broker answers with a retriable error (a leader moving, a broker
  gone) is tried again that many times, that long apart, each time on a new client with
  fresh metadata (``retries.py``); integers, 0 or more
- ``kafka.<name>``: passed to the client (librdkafka names, which match the Java client's for
  everything common). ``kafka.isolation.level`` is ``read_uncommitted`` or ``read_committed``
  (the default here, as in librdkafka; Spark's Java client defaults to ``read_uncommitted``,
  but an exactly-once pipeline must not see open or aborted transactions' records).
  Options that would make the client manage offsets itself (``kafka.auto.offset.reset``,
  ``kafka.enable.auto.commit``, deserializers, interceptors) are refused, as Spark refuses
  them: offsets live in Spark's checkpoint. The client never joins a group or commits;
  its ``group.id`` (librdkafka requires one) is ``kafka.group.id`` if given, else
  ``groupIdPrefix`` (default ``spark-kafka-source``) plus the query's id.
- security, as Spark's Kafka source takes it: ``kafka.security.protocol``,
  ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config`` (Kafka's
  ``...ScramLoginModule required username="..." password="...";``, or librdkafka's
  ``kafka.sasl.username``/``kafka.sasl.password``), ``kafka.ssl.truststore.location`` with
  ``kafka.ssl.truststore.type=PEM`` (or ``kafka.ssl.ca.location``), ``kafka.ssl.keystore.*``
  (PEM) - translated to librdkafka's settings by ``client.security.translate`` and used by
  every client of the query, the driver's and the executors'. Spark redacts option values
  whose names match ``spark.redaction.regex`` (``secret|password|token|access[.]key``) where
  it shows them; ``sasl.jaas.config`` holds a password without saying so: prefer
  ``kafka.sasl.password``, which Spark redacts.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import SourceOptionError

# Spark passes option names case-insensitively (it lower-cases them); so do we.
EARLIEST = -2
LATEST = -1

log = logging.getLogger(__name__)

_REFUSED_CLIENT_OPTIONS = {
    "auto.offset.reset": "set startingOffsets instead",
    "enable.auto.commit": "offsets live in Spark's checkpoint",
    "key.deserializer": "keys are always read as binary; cast them in a query",
    "value.deserializer": "values are always read as binary; cast them in a query",
    "interceptor.classes": "interceptors would see records Spark may re-read",
}
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
_KNOWN = {
    "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
    "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy", "maxoffsetspertrigger",
    "minpartitions", "failondataloss", "includeheaders", "kafkaconsumer.polltimeoutms",
    "startingoffsetsfromsink", "startingoffsetsfromsinkpassword", "sinkqueryname",
    "fetchoffset.numretries", "fetchoffset.retryintervalms",
    # Spark's own Kafka options that have nothing to tune here, accepted so code ports
    "minoffsetspertrigger", "maxtriggerdelay", "groupidprefix", "path",
}
FETCH_OFFSET_NUM_RETRIES = 3            # Spark's defaults (KafkaSourceProvider)
FETCH_OFFSET_RETRY_INTERVAL_MS = 1000


@dataclass(frozen=True)
class Subscription:
    kind: str                      # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()   # subscribe
    pattern: str | None = None     # subscribePattern
    assigned: tuple[tuple[str, int], ...] = ()  # assign

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            assert self.pattern is not None  # given with its kind
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)

    def named_topics(self) -> tuple[str, ...]:
        """Topics the user named (not a pattern): these must exist."""
        if self.kind == "subscribe":
            return self.topics
        if self.kind == "assign":
            return tuple(sorted({t for t, _ in self.assigned}))
        return ()


@dataclass(frozen=True)
class Position:
    """Where reading starts or ends: a keyword, per-partition offsets, or times."""
    # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    kind: str
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    timestamp: int | None = None                # kind == "timestamp": every partition
    # kind == "timestamps": per partition (offsets holds ms values)


@dataclass(frozen=True)
class SinkPosition:
    """``startingOffsetsFromSink``: a sink whose stored offsets say where a new query starts.
    ``url`` has no password: that comes apart (``startingOffsetsFromSinkPassword``), so Spark
    redacts it where it shows a query's options (plans, the UI)."""
    url: str
    query_name: str
    password: str | None = field(default=None, repr=False)

    @property
    def connect_url(self) -> str:
        from .sinks.database import with_password
        return self.url if self.password is None else with_password(self.url, self.password)


@dataclass(frozen=True)
class SourceOptions:
    client_config: dict[str, str] = field(repr=False)  # may hold a password
    subscription: Subscription
    starting: Position
    ending: Position
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    timestamp_strategy: str = "error"
    group_id_prefix: str = "spark-kafka-source"
    starting_from_sink: SinkPosition | None = None
    fetch_offset_num_retries: int = FETCH_OFFSET_NUM_RETRIES
    fetch_offset_retry_interval_ms: int = FETCH_OFFSET_RETRY_INTERVAL_MS

    @property
    def bootstrap(self) -> str:
        return self.client_config["bootstrap.servers"]

    @property
    def read_committed(self) -> bool:
        return self.client_config.get("isolation.level", "read_committed") == "read_committed"


def parse_options(raw: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Check and parse; ``streaming=None`` (not known yet) skips the mode-specific checks."""
    options = {str(name).lower(): str(value) for name, value in raw.items()}
    client_config = {name[len("kafka."):]: value for name, value in options.items()
                     if name.startswith("kafka.")}
    # librdkafka's own names are lower-case like the Java client's, so lower-casing is safe.
    for name in options:
        if not name.startswith("kafka.") and name not in _KNOWN:
            raise SourceOptionError(f"unknown option {name!r} for the oncelog source "
                                    "(client settings take the prefix kafka.)")
    for name, reason in _REFUSED_CLIENT_OPTIONS.items():
        if name in client_config:
            raise SourceOptionError(f"option kafka.{name} is not supported: {reason}")
    if not client_config.get("bootstrap.servers", "").strip():
        raise SourceOptionError("option kafka.bootstrap.servers is required "
                                "(e.g. .option(\"kafka.bootstrap.servers\", \"127.0.0.1:9092\"))")
    client_config = _with_security(client_config)
    isolation = client_config.setdefault("isolation.level", "read_committed")
    if isolation not in _ISOLATION_LEVELS:
        raise SourceOptionError(f"option kafka.isolation.level must be one of "
                                f"{', '.join(_ISOLATION_LEVELS)}, not {isolation!r}")

    subscription = _subscription(options)
    starting = _position(options, "starting",
                         default="earliest" if streaming is False else "latest")
    ending = _position(options, "ending", default="latest")
    if streaming and ending != Position("latest"):
        raise SourceOptionError("endingOffsets and endingTimestamp are for batch queries only "
                                "(spark.read), not streaming ones")
    if streaming is False and starting.kind == "latest":
        raise SourceOptionError("startingOffsets=latest is not allowed in a batch query "
                                "(it would read nothing)")
    if streaming is False and ending.kind == "earliest":
        raise SourceOptionError("endingOffsets=earliest is not allowed in a batch query "
                                "(it would read nothing)")
    if ending.kind == "offsets" and any(o == EARLIEST for o in ending.offsets.values()):
        raise SourceOptionError("endingOffsets may not use -2 (earliest) for a partition")
    for position in (starting, ending):
        if position.kind == "offsets":
            for (topic, partition), _ in position.offsets.items():
                if subscription.kind == "assign" and \
                        (topic, partition) not in subscription.assigned:
                    option = "startingOffsets" if position is starting else "endingOffsets"
                    raise SourceOptionError(f"{topic}-{partition} has an offset in {option} "
                                            "but is not in assign")

    from_sink = _sink_position(options, streaming)
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise SourceOptionError("option startingOffsetsByTimestampStrategy must be error or "
                                f"latest, not {strategy!r}")
    max_per_trigger = _positive_int(options, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    poll_timeout = _positive_int(options, "kafkaconsumer.polltimeoutms",
                                 "kafkaConsumer.pollTimeoutMs") or 120_000
    return SourceOptions(
        client_config=client_config,
        subscription=subscription,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=_positive_int(options, "minpartitions", "minPartitions"),
        fail_on_data_loss=_boolean(options, "failondataloss", "failOnDataLoss", True),
        include_headers=_boolean(options, "includeheaders", "includeHeaders", False),
        poll_timeout_ms=poll_timeout,
        timestamp_strategy=strategy,
        group_id_prefix=options.get("groupidprefix", "spark-kafka-source"),
        starting_from_sink=from_sink,
        fetch_offset_num_retries=_non_negative_int(
            options, "fetchoffset.numretries", "fetchOffset.numRetries",
            FETCH_OFFSET_NUM_RETRIES),
        fetch_offset_retry_interval_ms=_non_negative_int(
            options, "fetchoffset.retryintervalms", "fetchOffset.retryIntervalMs",
            FETCH_OFFSET_RETRY_INTERVAL_MS),
    )


def _with_security(client_config: dict[str, str]) -> dict[str, str]:
    """The ``kafka.*`` security options (Kafka's names or librdkafka's) as librdkafka's."""
    from ..client.security import SecurityConfigError, split_security, translate
    security, others = split_security(client_config)
    try:
        return {**others, **translate(security, "the oncelog source's kafka.* options")}
    except SecurityConfigError as error:
        # translate names settings without the prefix the user typed
        raise SourceOptionError(str(error).replace(" sasl.", " kafka.sasl.")
                                .replace(" ssl.", " kafka.ssl.")
                                .replace(" security.", " kafka.security.")) from None


def security_settings(client_config: Mapping[str, str]) -> dict[str, str]:
    """The security part of a parsed ``client_config`` (for clients built apart from the
    source's, such as a ``kafka://`` sink's marker reader)."""
    from ..client.security import split_security
    return split_security(client_config)[0]


def _sink_position(options: dict[str, str], streaming: bool | None) -> SinkPosition | None:
    url = options.get("startingoffsetsfromsink", "").strip()
    query_name = options.get("sinkqueryname")
    if not url:
        if query_name is not None:
            raise SourceOptionError("option sinkQueryName needs startingOffsetsFromSink (the "
                                    "sink's database URL)")
        return None
    if streaming is False:
        raise SourceOptionError("startingOffsetsFromSink is for streaming queries only "
                                "(spark.readStream)")
    kafka_sink = url.startswith("kafka://") and all(url[len("kafka://"):].rpartition("/")[0::2])
    if not (kafka_sink or url.startswith(("sqlite:///", "postgresql://", "postgres://"))):
        raise SourceOptionError("option startingOffsetsFromSink must be the URL of a "
                                "TransactionalSink's database (sqlite:///path.db or "
                                "postgresql://...) or a KafkaSink's kafka://BOOTSTRAP/TOPIC, "
                                f"not {url!r}")
    query_name = (query_name or "default").strip()
    if not query_name:
        raise SourceOptionError("option sinkQueryName must not be empty")
    from .sinks.database import split_password
    url, inline = split_password(url)
    password = options.get("startingoffsetsfromsinkpassword")
    if password is not None and not url.startswith(("postgresql://", "postgres://")):
        raise SourceOptionError("option startingOffsetsFromSinkPassword is for a PostgreSQL "
                                "sink's URL (postgresql://USER@HOST/DB)")
    if password is not None and inline is not None:
        raise SourceOptionError("startingOffsetsFromSink has a password and so does "
                                "startingOffsetsFromSinkPassword: give it once, in the latter")
    if inline is not None:
        log.warning("startingOffsetsFromSink carries a password, which Spark shows with the "
                    "query's options (plans, UI): pass it as startingOffsetsFromSinkPassword")
    return SinkPosition(url, query_name, password if password is not None else inline)


def _subscription(options: dict[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribepattern", "assign") if name in options]
    if len(given) != 1:
        raise SourceOptionError("give exactly one of the options subscribe, subscribePattern "
                                f"or assign (got {len(given) or 'none'})")
    kind = given[0]
    value = options[kind].strip()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise SourceOptionError("option subscribe names no topic")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        if not value:
            raise SourceOptionError("option subscribePattern is empty")
        try:
            re.compile(value)
        except re.error as error:
            raise SourceOptionError(f"option subscribePattern is not a valid regular "
                                    f"expression: {error}") from None
        return Subscription("subscribePattern", pattern=value)
    parsed = _json(value, "assign", 'like {"topicA": [0, 1], "topicB": [0]}')
    assigned = []
    for topic, partitions in parsed.items():
        if not isinstance(partitions, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions):
            raise SourceOptionError(f"option assign: topic {topic!r} needs a list of partition "
                                    'numbers, like {"topicA": [0, 1]}')
        assigned += [(topic, p) for p in partitions]
    if not assigned:
        raise SourceOptionError("option assign names no partition")
    return Subscription("assign", assigned=tuple(sorted(set(assigned))))


def _position(options: dict[str, str], which: str, default: str) -> Position:
    by_time = options.get(f"{which}offsetsbytimestamp")
    single_time = options.get(f"{which}timestamp")
    name = f"{which}Offsets"
    if single_time is not None:
        try:
            millis = int(single_time)
        except ValueError:
            raise SourceOptionError(f"option {which}Timestamp must be milliseconds since the "
                                    f"epoch, not {single_time!r}") from None
        return Position("timestamp", timestamp=millis)
    if by_time is not None:
        return Position("timestamps", offsets=_partition_map(
            by_time, f"{which}OffsetsByTimestamp", allow_negative=False))
    value = options.get(f"{which}offsets", default).strip()
    if value in ("earliest", "latest"):
        return Position(value)
    if not value.startswith("{"):
        raise SourceOptionError(f"option {name} must be earliest, latest or JSON like "
                                f'{{"topic": {{"0": 23, "1": -2}}}}, not {value!r}')
    return Position("offsets", offsets=_partition_map(value, name, allow_negative=True))


def _partition_map(value: str, name: str, *, allow_negative: bool) -> dict[tuple[str, int], int]:
    example = '{"topic": {"0": 23, "1": -2}}'
    parsed = _json(value, name, f"like {example}")
    result: dict[tuple[str, int], int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise SourceOptionError(f"option {name}: topic {topic!r} needs an object of "
                                    f"partition to offset, like {example}")
        for partition, offset in partitions.items():
            if not str(partition).isdigit():
                raise SourceOptionError(f"option {name}: {partition!r} is not a partition number")
            if not isinstance(offset, int) or isinstance(offset, bool):
                raise SourceOptionError(f"option {name}: the offset of {topic}-{partition} "
                                        f"must be an integer, not {offset!r}")
            lowest = EARLIEST if allow_negative else 0
            if offset < lowest:
                raise SourceOptionError(
                    f"option {name}: {offset} for {topic}-{partition} is not a valid offset "
                    "(use -2 for earliest, -1 for latest)" if allow_negative else
                    f"option {name}: {offset} for {topic}-{partition} is negative")
            result[(topic, int(partition))] = offset
    return result


def _json(value: str, name: str, shape: str) -> dict:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise SourceOptionError(f"option {name} is not valid JSON ({error.msg} at position "
                                f"{error.pos}); expected {shape}") from None
    if not isinstance(parsed, dict):
        raise SourceOptionError(f"option {name} must be a JSON object {shape}")
    return parsed


def _positive_int(options: dict[str, str], key: str, name: str) -> int | None:
    if key not in options:
        return None
    try:
        number = int(options[key])
    except ValueError:
        number = 0
    if number <= 0:
        raise SourceOptionError(f"option {name} must be a positive integer, not {options[key]!r}")
    return number


def _non_negative_int(options: dict[str, str], key: str, name: str, default: int) -> int:
    if key not in options:
        return default
    try:
        number = int(options[key])
    except ValueError:
        number = -1
    if number < 0:
        raise SourceOptionError(f"option {name} must be an integer, 0 or more, not "
                                f"{options[key]!r}")
    return number


def _boolean(options: dict[str, str], key: str, name: str, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise SourceOptionError(f"option {name} must be true or false, not {value!r}")
