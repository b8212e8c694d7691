"""Sockets to other Kafka-protocol brokers, under everything that needs one: ``client`` -
``BrokerClient``, one connection and one request in flight at a time, with the codecs the
broker serves with (``protocol.messages``). Used by a follower's fetcher (``replication``),
the transaction coordinator's markers (``coordinator.transaction.markers``) and the tools
that ask a broker what confluent-kafka does not say (``oncelog.client.metadata``,
``oncelog.client.transactions``). ``connector`` - ``Connector``: how a broker reaches the
others in the inter-broker listener's protocol (TLS, a SASL login), handed to each part that
opens such connections. It depends on ``protocol``, ``config`` and ``security``."""

from .client import BrokerClient
from .connector import AuthenticationError, Connector

__all__ = ["AuthenticationError", "BrokerClient", "Connector"]
