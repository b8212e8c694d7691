"""Sockets to other Kafka-protocol brokers, under everything that needs one: ``client`` -
``BrokerClient``, one connection and one request in flight at a time, with the codecs the
broker serves with (``protocol.messages``). Used by a follower's fetcher (``replication``),
the transaction coordinator's markers (``coordinator.transaction.markers``) and the tools
that ask a broker what confluent-kafka does not say (``oncelog.client.metadata``,
``oncelog.client.transactions``). It depends on ``protocol`` alone."""

from .client import BrokerClient

__all__ = ["BrokerClient"]
