"""Client-side helpers over confluent-kafka, named after the guarantee they give.

- ``producer`` — ``producer.at_most_once`` / ``at_least_once`` / ``exactly_once``: producers.
- ``consumer`` — ``consumer.at_most_once`` / ``at_least_once``: consumer-group members that
  call your ``process(record)`` and commit before (at-most-once) or after (at-least-once)
  processing; ``GuaranteedConsumer`` is the class behind them.
- ``reader`` — reads a topic from a chosen position, without a group.
- ``transform`` — ``exactly_once_transform``: consume, transform and produce, each batch's
  output and input offsets committed in one Kafka transaction (KIP-98, KIP-447).
- ``transactions`` — transactions as an administrator sees them (Kafka's
  ``kafka-transactions.sh``): list, describe, find hanging ones, abort.
- ``metadata`` — the cluster's metadata with what confluent-kafka's leaves out (leader
  epochs, offline replicas, the controller).
- ``bootstrap`` — ``check_bootstrap``: a bootstrap address parsed and probed (resolves,
  connects, answers ApiVersions; over TLS and logged in with SASL when the security
  settings say so) before a command builds a client, so an unreachable one is one sentence
  within seconds, not a librdkafka timeout.
- ``security`` — ``client_security``: a ``--command-config`` file (Kafka's client security
  settings or librdkafka's) as librdkafka settings; ``translate`` for settings from elsewhere
  (the Spark source's ``kafka.*`` options).
- ``librdkafka`` — ``quiet_logger``: keeps librdkafka's own log lines out of the terminal of
  oncelog's tools (the CLI, the example pipeline).

The same guarantee names exist on both sides, so import the module and pick from it::

    from oncelog.client import consumer
    consumer.at_least_once("127.0.0.1:9092", "billing", ["orders"], handle).run()
"""

from . import consumer, producer, reader
from .consumer import AT_LEAST_ONCE, AT_MOST_ONCE, GuaranteedConsumer

__all__ = ["AT_LEAST_ONCE", "AT_MOST_ONCE", "GuaranteedConsumer", "consumer", "producer",
           "reader"]
