"""The ``oncelog`` source and ``KafkaSink`` on a SASL_SSL broker (SCRAM-SHA-512), configured
with the options Spark's own Kafka connector takes: ``kafka.security.protocol``,
``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config`` and a PEM truststore
(``kafka.ssl.truststore.location``/``.type``). The broker is the test kit's
(``oncelog.testing.broker(security="SASL_SSL")``)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from pyspark.errors import PySparkException

from oncelog.spark.sinks import KafkaSink
from oncelog.testing import broker as kit_broker


@pytest.fixture(scope="module")
def secured():
    with kit_broker(security="SASL_SSL") as started:
        yield started


def kafka_options(broker) -> dict[str, str]:
    """What a Spark user passes to ``format("kafka")`` for this broker, Java names and all."""
    return {
        "kafka.bootstrap.servers": broker.bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{broker.username}" password="{broker.password}";',
        "kafka.ssl.truststore.location": str(broker.ca_file),
        "kafka.ssl.truststore.type": "PEM",
    }


@pytest.mark.timeout(600)
def test_a_stream_reads_a_sasl_ssl_topic_into_a_secured_kafka_sink_once(spark, secured,
                                                                        tmp_path):
    """300 records over 3 partitions, read by a streaming query (executors and driver both
    on SASL_SSL) and written by ``KafkaSink`` (its producer and marker reader too): every
    record once in the output, read back with ``read_committed``."""
    topic, out = secured.topic("secure-in", partitions=3), secured.topic("secure-out", 3)
    producer = Producer(secured.client_config({"linger.ms": 5}))
    for i in range(300):
        producer.produce(topic, value=f"r{i}".encode(), partition=i % 3)
    assert producer.flush(20) == 0

    options = kafka_options(secured)
    security = {name[len("kafka."):]: value for name, value in options.items()
                if name != "kafka.bootstrap.servers"}
    sink = KafkaSink(secured.bootstrap, out, sink_id=out, security=security)
    seen: list[str] = []

    def write(batch_df, batch_id) -> None:
        seen.extend(row.value.decode() for row in batch_df.select("value").collect())
        sink(batch_df.select("key", "value"), batch_id)

    query = (spark.readStream.format("oncelog").options(**options)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "120").load()
             .writeStream.foreachBatch(write)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(180)
        assert query.exception() is None
    finally:
        query.stop()
        sink.close()
    expected = sorted(f"r{i}" for i in range(300))
    assert sorted(seen) == expected
    assert sorted(r.value.decode() for r in secured.read_all(out)) == expected
    assert sink.last_marker()["rows"] == 300

    # without the truststore's type a PEM file is taken for a JKS store: refused at load
    refused = {**options, "kafka.ssl.truststore.type": "JKS"}
    with pytest.raises(PySparkException, match="kafka.ssl.truststore.type JKS is not "
                                               "supported: set kafka.ssl.truststore.type=PEM"):
        spark.read.format("oncelog").options(**refused).option("subscribe", topic).load()
