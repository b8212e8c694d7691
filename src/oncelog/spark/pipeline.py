"""The example pipeline ``oncelog pipeline run`` runs: orders in, enriched and aggregated, out once.

    generator --(idempotent producer)--> topic "orders" --(oncelog source)--> Spark
        query "orders":  parse JSON, join the country table, price in EUR
                         -> TransactionalSink  table orders_enriched  (rows + offsets, one txn)
        query "revenue": the same stream, grouped by region and country (update mode)
                         -> UpsertSink         table revenue_by_country  (keyed by country)

With an output topic (``--output-topic``), query "orders" writes to that topic instead of the
table, through ``KafkaSink``: each batch's orders (JSON values keyed by customer) and its batch
id in one Kafka transaction; the revenue table stays in the database.

Each query keeps its offsets in its own checkpoint folder under the work directory, so a run
killed at any point and started again with the same ``--work-dir`` goes on where it stopped,
without losing or repeating an order. The orders sink's stored offsets (its marker rows, or
``KafkaSink``'s marker) are the truth:
with its checkpoint folder deleted, query "orders" starts right after them
(``startingOffsetsFromSink``), and a checkpoint that disagrees with them stops the query
with one sentence. Query "revenue" then recomputes its totals from the earliest offset: its
upserts overwrite every country with the full total again. The run ends when every record
in the topic is in the sink; its report checks that (reading an output topic with
``read_committed``), and that the revenue table agrees with the orders.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ORDERS_TABLE = "orders_enriched"
REVENUE_TABLE = "revenue_by_country"

# country -> (region, EUR per unit of the order's currency)
COUNTRIES = {
    "DE": ("EMEA", 1.0), "FR": ("EMEA", 1.0), "GB": ("EMEA", 1.17), "SE": ("EMEA", 0.087),
    "US": ("AMER", 0.92), "CA": ("AMER", 0.68), "BR": ("AMER", 0.18),
    "JP": ("APAC", 0.0062), "IN": ("APAC", 0.011), "AU": ("APAC", 0.61),
}


@dataclass
class PipelineSettings:
    bootstrap: str
    sink_url: str
    work_dir: Path
    topic: str = "orders"
    records: int = 20_000
    rate: float = 5_000.0            # orders per second from the generator
    max_offsets_per_trigger: int = 5_000
    trigger_ms: int = 500
    timeout_s: float = 600.0
    output_topic: str | None = None  # orders go to this topic (KafkaSink), not ORDERS_TABLE
    master: str = "local[2]"         # any master URL Spark accepts, e.g. spark://HOST:7077
    spark_conf: dict[str, str] = field(default_factory=dict)  # more Spark settings (--conf)
    # librdkafka's security settings (--command-config) for every client of the run
    security: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass
class Generator:
    """Produces order events with the exactly_once (idempotent) producer preset."""
    bootstrap: str
    topic: str
    records: int
    rate: float
    run_id: str = field(default_factory=lambda: time.strftime("%Y%m%d%H%M%S"))
    acknowledged: int = 0
    failed: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    error: str | None = None
    security: dict[str, str] = field(default_factory=dict, repr=False)

    def start(self) -> Generator:
        threading.Thread(target=self._run, name="order-generator", daemon=True).start()
        return self

    def _run(self) -> None:
        from ..client.producer import exactly_once
        try:
            producer = exactly_once(self.bootstrap, **{"linger.ms": 5,
                                                       "compression.type": "lz4",
                                                       **self.security})
            rng = random.Random(self.run_id)
            started = time.monotonic()
            for number in range(self.records):
                order = make_order(rng, f"o-{self.run_id}-{number:07d}")
                producer.produce(self.topic, key=order["customer_id"].encode(),
                                 value=json.dumps(order).encode(), on_delivery=self._delivered)
                producer.poll(0)
                ahead = number / self.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            producer.flush(60)
        except Exception as error:  # reported by the run, not a thread traceback
            self.error = str(error)
        finally:
            self.done.set()

    def _delivered(self, error, message) -> None:
        if error is None:
            self.acknowledged += 1
        else:
            self.failed += 1


def make_order(rng: random.Random, order_id: str) -> dict:
    return {
        "order_id": order_id,
        "customer_id": f"c-{rng.randrange(500):03d}",
        "country": rng.choice(sorted(COUNTRIES)),
        "sku": f"sku-{rng.randrange(40):02d}",
        "quantity": rng.randint(1, 5),
        "unit_price": round(rng.uniform(2, 200), 2),
        "ordered_at": int(time.time() * 1000),
    }


def start_queries(spark, settings: PipelineSettings) -> list:
    """Define and start the two streaming queries; returns them (orders first)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (IntegerType, LongType, StringType, StructField, StructType,
                                   DoubleType)

    from .sinks import TransactionalSink, UpsertSink

    order_schema = StructType([
        StructField("order_id", StringType()), StructField("customer_id", StringType()),
        StructField("country", StringType()), StructField("sku", StringType()),
        StructField("quantity", IntegerType()), StructField("unit_price", DoubleType()),
        StructField("ordered_at", LongType()),
    ])
    countries = spark.createDataFrame(
        [(code, region, rate) for code, (region, rate) in sorted(COUNTRIES.items())],
        "country string, region string, eur_rate double")

    def source(**options):
        return (spark.readStream.format("oncelog")
                .option("kafka.bootstrap.servers", settings.bootstrap)
                .options(**{f"kafka.{k}": v for k, v in settings.security.items()})
                .option("subscribe", settings.topic)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
                .options(**options)
                .load())

    def enriched(stream):
        orders = stream.select(F.from_json(F.col("value").cast("string"), order_schema)
                               .alias("order"), "topic", "partition", "offset")
        return (orders.select("order.*", "topic", "partition", "offset")
                .join(F.broadcast(countries), "country", "left")
                .withColumn("amount_eur", F.round(F.col("quantity") * F.col("unit_price")
                                                  * F.col("eur_rate"), 2))
                .withColumn("ordered_at", F.timestamp_millis("ordered_at"))
                .drop("eur_rate"))

    checkpoints = settings.work_dir / "checkpoints"
    trigger = f"{settings.trigger_ms} milliseconds"
    orders_sink = (orders_kafka_sink(settings) if settings.output_topic else
                   TransactionalSink(settings.sink_url, ORDERS_TABLE, query_name="orders"))
    # Without its checkpoint, query "orders" starts where the sink's stored offsets end.
    orders_from = orders_sink.source_options()
    orders_query = (enriched(source(**orders_from)).writeStream
                    .foreachBatch(orders_sink)
                    .option("checkpointLocation", str(checkpoints / "orders"))
                    .queryName("orders").trigger(processingTime=trigger).start())
    revenue = (enriched(source()).groupBy("region", "country")
               .agg(F.count("*").alias("orders"),
                    F.round(F.sum("amount_eur"), 2).alias("revenue_eur")))
    revenue_query = (revenue.writeStream.outputMode("update")
                     .foreachBatch(UpsertSink(settings.sink_url, REVENUE_TABLE,
                                              key_columns=["country"]))
                     .option("checkpointLocation", str(checkpoints / "revenue"))
                     .queryName("revenue").trigger(processingTime=trigger).start())
    return [orders_query, revenue_query]


def orders_kafka_sink(settings: PipelineSettings):
    """Orders into ``settings.output_topic``: no value column, so each row becomes a JSON
    value (source topic, partition and offset included: they are the marker's end offsets)."""
    from .sinks import KafkaSink
    assert settings.output_topic is not None  # asked for only with an output topic
    return KafkaSink(settings.bootstrap, settings.output_topic, sink_id="orders",
                     key_column="customer_id", security=settings.security)


@dataclass
class SinkState:
    rows: int = 0
    batches: int = 0
    end_offsets: dict = field(default_factory=dict)


def sink_state(settings: PipelineSettings) -> SinkState:
    """What the orders query has committed, read from the sink's marker table or, with an
    output topic, from ``KafkaSink``'s marker (its committed batch id's metadata)."""
    from .sinks import BATCHES_TABLE, SinkError, open_database
    if settings.output_topic:
        from .sinks.kafka import read_marker
        try:
            marker = read_marker(settings.bootstrap, settings.output_topic, "orders",
                                 config=settings.security)
        except SinkError:
            return SinkState()
        if marker is None:
            return SinkState()
        return SinkState(rows=int(marker["rows"]), batches=int(marker["batches"]),
                         end_offsets=marker.get("end_offsets") or {})
    sink_url = settings.sink_url
    try:
        with open_database(sink_url) as database:
            if not database.table_exists(BATCHES_TABLE):
                return SinkState()
            row = database.fetchrow(f"SELECT COUNT(*), COALESCE(SUM(row_count), 0) FROM "
                                    f"{BATCHES_TABLE} WHERE query_name = 'orders'")
            last = database.fetchone(f"SELECT end_offsets FROM {BATCHES_TABLE} WHERE "
                                     "query_name = 'orders' ORDER BY batch_id DESC LIMIT 1")
    except SinkError:
        return SinkState()
    offsets = json.loads(last[0]) if last and last[0] else {}
    return SinkState(rows=int(row[1]), batches=int(row[0]), end_offsets=offsets)


@dataclass
class Report:
    in_topic: int
    rows: int
    distinct_orders: int
    batches: int
    revenue_orders: int
    revenue_eur: float
    rows_eur: float
    elapsed_s: float
    orders_source: str = f"table {ORDERS_TABLE}"

    @property
    def duplicated(self) -> int:
        return self.rows - self.distinct_orders

    @property
    def missing(self) -> int:
        return max(0, self.in_topic - self.distinct_orders)

    @property
    def consistent(self) -> bool:
        return (self.revenue_orders == self.rows
                and abs(self.revenue_eur - self.rows_eur) < 0.01 * max(1, self.rows))

    @property
    def ok(self) -> bool:
        return self.duplicated == 0 and self.missing == 0 and self.consistent


def final_report(settings: PipelineSettings, in_topic: int, elapsed_s: float) -> Report:
    from .sinks import open_database
    with open_database(settings.sink_url) as database:
        if settings.output_topic:
            rows, distinct, rows_eur = orders_in_topic(settings.bootstrap,
                                                       settings.output_topic,
                                                       settings.security)
        else:
            rows, distinct, rows_eur = database.fetchrow(
                f"SELECT COUNT(*), COUNT(DISTINCT order_id), COALESCE(SUM(amount_eur), 0) "
                f"FROM {ORDERS_TABLE}")
        revenue_orders, revenue_eur = database.fetchrow(
            f"SELECT COALESCE(SUM(orders), 0), COALESCE(SUM(revenue_eur), 0) FROM {REVENUE_TABLE}")
    state = sink_state(settings)
    return Report(in_topic=in_topic, rows=int(rows), distinct_orders=int(distinct),
                  batches=state.batches, revenue_orders=int(revenue_orders),
                  revenue_eur=float(revenue_eur), rows_eur=float(rows_eur), elapsed_s=elapsed_s,
                  orders_source=(f"topic {settings.output_topic} (read_committed)"
                                 if settings.output_topic else f"table {ORDERS_TABLE}"))


def orders_in_topic(bootstrap: str, topic: str,
                    security: dict[str, str] | None = None) -> tuple[int, int, float]:
    """Orders, distinct order ids and their EUR in ``topic``, read with ``read_committed``:
    what a downstream consumer sees (an aborted batch's records are skipped)."""
    from ..client.reader import read_topic
    rows, order_ids, eur = 0, set(), 0.0
    for record in read_topic(bootstrap, topic, isolation_level="read_committed",
                             config=security):
        order = json.loads(record.value or b"")  # the sink writes a JSON value per order
        rows += 1
        order_ids.add(order["order_id"])
        eur += order["amount_eur"] or 0.0
    return rows, len(order_ids), eur
