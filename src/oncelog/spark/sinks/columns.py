"""Columns of a sink's table, derived from a Spark schema, and the rows Spark hands the driver.

Each Spark type maps to one ``kind``, which each dialect turns into an SQL type and a value
converter (``dialects.py``):

    Spark type                      kind            SQLite     PostgreSQL
    string, varchar, char           text            TEXT       TEXT
    binary                          binary          BLOB       BYTEA
    byte, short / int / long        smallint/integer/bigint    INTEGER    SMALLINT/INTEGER/BIGINT
    float / double                  real / double   REAL       REAL / DOUBLE PRECISION
    boolean                         boolean         INTEGER    BOOLEAN
    timestamp                       timestamp       TEXT (ISO 8601, UTC)   TIMESTAMPTZ
    timestamp_ntz                   timestamp_ntz   TEXT (ISO 8601)        TIMESTAMP
    date                            date            TEXT (ISO 8601)        DATE
    decimal(p, s)                   decimal         TEXT (exact digits)    NUMERIC(p, s)
    anything else (array, map,      json            TEXT       JSONB
    struct, interval, variant...)

JSON values: structs become objects, arrays lists, map keys strings, bytes base64 text,
datetimes ISO 8601 as PySpark returns them (a nested ``timestamp`` is the driver's local time),
decimals strings. PySpark returns a ``timestamp`` as a naive datetime in the driver process's
local time zone (``TimestampType.fromInternal``); the converters make it aware before storing
it, so the stored instant is right whatever the database's time zone.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import SinkError, quote_identifier

KAFKA_POSITION_COLUMNS = ("topic", "partition", "offset")


@dataclass(frozen=True)
class Column:
    name: str
    kind: str
    precision: int | None = None  # decimals only
    scale: int | None = None


def columns_from_schema(schema: Any) -> list[Column]:
    """The sink columns for a PySpark ``StructType``; names must be simple identifiers."""
    from pyspark.sql import types as T

    simple = [
        ((T.StringType, T.VarcharType, T.CharType), "text"),
        ((T.BinaryType,), "binary"),
        ((T.ByteType, T.ShortType), "smallint"),
        ((T.IntegerType,), "integer"),
        ((T.LongType,), "bigint"),
        ((T.FloatType,), "real"),
        ((T.DoubleType,), "double"),
        ((T.BooleanType,), "boolean"),
        ((T.TimestampNTZType,), "timestamp_ntz"),  # before TimestampType: keep them apart
        ((T.TimestampType,), "timestamp"),
        ((T.DateType,), "date"),
    ]
    columns = []
    for field in schema.fields:
        if isinstance(field.dataType, T.DecimalType):
            column = Column(field.name, "decimal", field.dataType.precision, field.dataType.scale)
        else:
            kind = next((kind for types, kind in simple if isinstance(field.dataType, types)),
                        "json")
            column = Column(field.name, kind)
        columns.append(column)
    check_column_names([column.name for column in columns])
    return columns


def check_column_names(names: Sequence[str]) -> None:
    """Every name a simple identifier, none twice (SQL compares them case-sensitively quoted)."""
    if not names:
        raise SinkError("a sink needs at least one column.")
    seen = set()
    for name in names:
        quote_identifier(name)
        if name in seen:
            raise SinkError(f"column {name!r} appears twice.")
        seen.add(name)


def to_json_text(value: Any) -> str:
    return json.dumps(_jsonable(value), ensure_ascii=False, separators=(",", ":"))


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    as_dict = getattr(value, "asDict", None)  # a pyspark Row (a struct)
    if isinstance(value, tuple) and callable(as_dict):
        return {name: _jsonable(item) for name, item in as_dict(recursive=False).items()}
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return str(value)


class OffsetTracker:
    """Watches Kafka-schema rows go by and reports ``{topic: {partition: max(offset) + 1}}``.

    Topics and partitions come out sorted (partitions numerically, as strings: JSON keys).
    """

    def __init__(self, column_names: Sequence[str]) -> None:
        self.enabled = all(name in column_names for name in KAFKA_POSITION_COLUMNS)
        self._positions = ([list(column_names).index(name) for name in KAFKA_POSITION_COLUMNS]
                           if self.enabled else [])
        self._next: dict[tuple[str, int], int] = {}

    def observe(self, row: Sequence[Any]) -> None:
        topic, partition, offset = (row[position] for position in self._positions)
        if topic is None or partition is None or offset is None:
            return
        key = (topic, int(partition))
        if offset + 1 > self._next.get(key, -1):
            self._next[key] = int(offset) + 1

    def end_offsets(self) -> dict[str, dict[str, int]] | None:
        if not self.enabled:
            return None
        result: dict[str, dict[str, int]] = {}
        for (topic, partition), next_offset in sorted(self._next.items()):
            result.setdefault(topic, {})[str(partition)] = next_offset
        return result


def spark_rows(batch_df: Any, converters: Sequence[Callable[[Any], Any]],
               observe: Callable[[Sequence[Any]], None] | None = None
               ) -> Generator[tuple[Any, ...], None, None]:
    """The batch's rows, converted for the database, pulled a partition at a time.

    A generator: no Spark job runs until the first row is asked for, so a skipped batch costs
    nothing. ``local_rows`` holds at most two partitions on the driver at once.
    """
    for row in local_rows(batch_df):
        if observe is not None:
            observe(row)
        yield tuple(None if value is None else convert(value)
                    for convert, value in zip(converters, row, strict=True))


def local_rows(batch_df: Any) -> Iterator[Any]:
    """The batch's rows on the driver, partition after partition, the next one computed on
    the executors while the driver writes the current one (``prefetchPartitions``): without
    it Spark runs one partition's job at a time and every executor but one waits for the
    driver. The driver holds two partitions at most, never the whole batch. Over Spark
    Connect the rows come as the server streams them."""
    return batch_df.toLocalIterator(prefetchPartitions=True)
