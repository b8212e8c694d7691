"""The ``oncelog`` Data Source: Spark's Kafka source, as a Spark 4 Python Data Source.

Batch (``spark.read``): offsets are resolved once, when the DataFrame is defined, and each
partition's range [start, end) becomes one or more input partitions.

Streaming (``spark.readStream``): Spark's checkpoint holds the offsets. ``initialOffset``
resolves ``startingOffsets`` for a new query; ``latestOffset(start, limit)`` asks the broker
where each partition ends now, caps it by ``maxOffsetsPerTrigger`` (Spark passes the cap in
as ``ReadMaxRows``) and by the target fixed at the start of a ``Trigger.AvailableNow`` run;
``partitions(start, end)`` turns the difference into offset ranges. With
``startingOffsetsFromSink``, ``initialOffset`` starts where the sink's stored end offsets
end, so a query whose checkpoint was lost goes on exactly after what the sink holds.
Nothing depends on ``commit`` or ``stop`` being called: after a driver crash Spark re-plans
the in-flight batch from its offset log with the same start and end, and ``partitions``
gives the same ranges.
Partitions added to a subscribed topic are read from offset 0, as Spark's source does.

The reader object is pickled for the executors; its driver-side client (``Cluster``) is not.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows,
                                              SupportsTriggerAvailableNow)
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from . import SOURCE_NAME
from .cluster import Cluster
from .errors import DataLossError, SourceError, SourceOptionError
from .offsets import Offsets, TopicPartition, from_json, limit_offsets, to_json
from .options import EARLIEST, LATEST, Position, SourceOptions, parse_options
from .ranges import OffsetRange, read_range


def source_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (headers only with ``includeHeaders``)."""
    fields = [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType(), True),
            StructField("value", BinaryType(), True),
        ])), True))
    return StructType(fields)


class OncelogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        # Spark asks for the schema when .load() is called, before any query starts: the
        # one place where a bad option can stop the user's code at the line that set it.
        options = parse_options(self.options, streaming=None)
        _Reader(options).check_topics()
        return source_schema(options.include_headers)

    def reader(self, schema: StructType) -> OncelogBatchReader:
        return OncelogBatchReader(parse_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> OncelogStreamReader:
        return OncelogStreamReader(parse_options(self.options, streaming=True))


class _Reader:
    """What the batch and stream readers share: the driver-side client and range planning."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._cluster: Cluster | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_cluster"] = None       # a client cannot travel to an executor
        return state

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.options)
        return self._cluster

    def check_topics(self) -> None:
        """Named topics must exist when a query starts, unless failOnDataLoss is false."""
        missing = self.cluster.missing()
        if missing and self.options.fail_on_data_loss:
            names = ", ".join(missing)
            raise SourceOptionError(f"{'topic' if len(missing) == 1 else 'topics'} {names} "
                                    f"{'does' if len(missing) == 1 else 'do'} not exist at "
                                    f"{self.options.bootstrap} (create it first, or set "
                                    "failOnDataLoss to false to wait for it)")

    def resolve(self, position: Position, partitions: list[TopicPartition], what: str) -> Offsets:
        """Absolute offsets for ``position`` on each of ``partitions``."""
        if position.kind == "earliest":
            return self.cluster.earliest(partitions)
        if position.kind == "latest":
            return self.cluster.latest(partitions)
        if position.kind == "offsets":
            return self._specific(position.offsets, partitions, what)
        if position.kind == "timestamp":
            timestamp = position.timestamp
            assert timestamp is not None  # given with its kind
            return self._by_time({tp: timestamp for tp in partitions}, what)
        return self._by_time(self._require_all(position.offsets, partitions, what), what)

    def _require_all(self, given: dict, partitions: list[TopicPartition], what: str) -> dict:
        missing = sorted(set(partitions) - set(given))
        unknown = sorted(set(given) - set(partitions))
        if unknown:
            raise SourceOptionError(f"{what} names {_names(unknown)}, which "
                                    f"{'does' if len(unknown) == 1 else 'do'} not exist")
        if missing:
            raise SourceOptionError(f"{what} must give every partition an offset (-2 for "
                                    f"earliest, -1 for latest); missing: {_names(missing)}")
        return given

    def _specific(self, given: dict, partitions: list[TopicPartition], what: str) -> Offsets:
        given = self._require_all(given, partitions, what)
        earliest = [tp for tp, offset in given.items() if offset == EARLIEST]
        latest = [tp for tp, offset in given.items() if offset == LATEST]
        result = {tp: offset for tp, offset in given.items() if offset >= 0}
        result.update(self.cluster.earliest(earliest))
        result.update(self.cluster.latest(latest))
        return result

    def _by_time(self, times: dict[TopicPartition, int], what: str) -> Offsets:
        result: Offsets = {}
        by_millis: dict[int, list[TopicPartition]] = {}
        for tp, millis in times.items():
            by_millis.setdefault(millis, []).append(tp)
        for millis, group in by_millis.items():
            found = self.cluster.for_time(group, millis)
            none = sorted(tp for tp, offset in found.items() if offset < 0)
            if none:
                if self.options.timestamp_strategy == "error":
                    raise SourceError(f"{what}: no record at or after {millis} ms in "
                                      f"{_names(none)} (set startingOffsetsByTimestampStrategy "
                                      "to latest to start those at their end)")
                found.update(self.cluster.latest(none))
            result.update(found)
        return result

    def plan(self, start: Offsets, end: Offsets) -> list[OffsetRange]:
        """Offset ranges for [start, end), split to reach ``minPartitions``."""
        ranges: list[tuple[str, int, int, int]] = []
        for tp in sorted(end):
            begin = start.get(tp, 0)
            if end[tp] < begin:
                if self.options.fail_on_data_loss:
                    raise DataLossError(f"{tp[0]}-{tp[1]} went back from offset {begin} to "
                                        f"{end[tp]} (was the topic deleted and created again?)")
                continue
            if end[tp] > begin:
                ranges.append((tp[0], tp[1], begin, end[tp]))
        wanted = self.options.min_partitions or 0
        total = sum(e - s for _, _, s, e in ranges)
        if wanted > len(ranges) and total:
            ranges = _split(ranges, wanted, total)
        return [OffsetRange(t, p, s, e, self.options) for t, p, s, e in ranges]


def _split(ranges, wanted: int, total: int):
    """Cut ranges into pieces of about total/wanted records (Spark's minPartitions)."""
    piece = max(1, -(-total // wanted))
    result = []
    for topic, partition, start, end in ranges:
        while end - start > piece:
            result.append((topic, partition, start, start + piece))
            start += piece
        result.append((topic, partition, start, end))
    return result


def _names(partitions) -> str:
    return ", ".join(f"{t}-{p}" for t, p in partitions)


class OncelogBatchReader(_Reader, DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self.check_topics()
        partitions = self.cluster.partitions()
        self.start = self.resolve(options.starting, partitions, "startingOffsets")
        self.end = self.resolve(options.ending, partitions, "endingOffsets")
        self._cluster = None

    def partitions(self) -> list[OffsetRange]:
        return self.plan(self.start, self.end)

    def read(self, partition: object) -> Iterator:
        # Spark hands an empty plan one placeholder InputPartition(None): nothing to read.
        return read_range(partition) if isinstance(partition, OffsetRange) else iter(())


class OncelogStreamReader(_Reader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self.check_topics()
        self._target: Offsets | None = None
        self._reported: Offsets | None = None  # the broker's ends latestOffset last saw

    def initialOffset(self) -> dict:
        partitions = self.cluster.partitions()
        stored = self._sink_offsets()
        if stored is not None:
            return to_json(self._after_sink(stored, partitions))
        return to_json(self.resolve(self.options.starting, partitions, "startingOffsets"))

    def _sink_offsets(self) -> dict | None:
        """The end offsets the sink stored for its query, or None when it holds no batch."""
        sink = self.options.starting_from_sink
        if sink is None:
            return None
        from .sinks import SinkError, open_database
        from .sinks.kafka import read_marker
        from .sinks.transactional import read_last_marker
        try:
            if sink.url.startswith("kafka://"):
                bootstrap, _, topic = sink.url[len("kafka://"):].rpartition("/")
                from .options import security_settings
                found = read_marker(bootstrap, topic, sink.query_name, fence=True,
                                    config=security_settings(self.options.client_config))
                offsets = None if found is None else found.get("end_offsets") or {}
            else:
                with open_database(sink.connect_url) as db, \
                        db.translate_errors(f"reading the offsets of query {sink.query_name!r}"):
                    stored = read_last_marker(db, sink.query_name)
                offsets = None if stored is None else stored.end_offsets or {}
        except SinkError as error:
            raise SourceError(f"startingOffsetsFromSink: {str(error).rstrip('.')}") from None
        if offsets is None:
            return None
        if not offsets:
            raise SourceError(f"startingOffsetsFromSink: the sink holds batches of "
                              f"{sink.query_name!r} but no offsets (its rows had no topic, "
                              "partition and offset columns), so there is no place to resume")
        return offsets

    def _after_sink(self, stored: dict, partitions: list[TopicPartition]) -> Offsets:
        """The sink's offsets for the partitions it knows; earliest for others (nothing of
        theirs reached the sink, so nothing may be skipped)."""
        known = {tp: int(stored[tp[0]][str(tp[1])]) for tp in partitions
                 if str(tp[1]) in stored.get(tp[0], {})}
        unknown = [tp for tp in partitions if tp not in known]
        return {**known, **self.cluster.earliest(unknown)}

    def getDefaultReadLimit(self):
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: dict, limit) -> dict:
        begin = from_json(start)
        latest = self._reported = self._latest()
        for tp in sorted(set(begin) - set(latest)):
            if self.options.fail_on_data_loss:
                raise DataLossError(f"partition {tp[0]}-{tp[1]} is gone (was its topic deleted?)")
        if self._target is not None:
            # Trigger.AvailableNow: nothing past what existed when the run began.
            latest = {tp: min(offset, self._target[tp]) for tp, offset in latest.items()
                      if tp in self._target}
            latest = {tp: max(offset, begin.get(tp, 0)) for tp, offset in latest.items()}
        if isinstance(limit, ReadMaxRows):
            ahead = {tp: offset for tp, offset in latest.items() if offset >= begin.get(tp, 0)}
            end = {**latest, **limit_offsets(begin, ahead, limit.max_rows)}
        else:
            end = latest
        return to_json(end)

    def reportLatestOffset(self) -> dict | None:
        """The ends ``latestOffset`` just read (Spark asks right after it, for the progress
        report's ``latestOffset``): one ListOffsets per batch, not two, as Spark's source."""
        if self._reported is None:
            self._reported = self._latest()
        return to_json(self._reported)

    def _latest(self) -> Offsets:
        return self.cluster.latest(self.cluster.partitions())

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        return self.plan(from_json(start), from_json(end))

    def read(self, partition: object) -> Iterator:
        # Spark hands an empty plan one placeholder InputPartition(None): nothing to read.
        return read_range(partition) if isinstance(partition, OffsetRange) else iter(())

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in the broker."""
