"""The cluster's metadata as the broker reports it, with what confluent-kafka's metadata
leaves out: each partition's leader epoch and offline replicas, and the controller.

Used by ``oncelog cluster status`` and ``oncelog topics describe``; works against any
Kafka-protocol broker (Metadata v9).
"""

from __future__ import annotations

import asyncio

from ..protocol import messages
from ..net.client import BrokerClient
from ..net.connector import Connector
from .bootstrap import describe_connection_error, parse_bootstrap

METADATA_VERSION = 9


def fetch_metadata(bootstrap: str, topics: list[str] | None = None, timeout_s: float = 10.0,
                   connector: Connector | None = None):
    """A ``MetadataResponse`` from the first of ``bootstrap``'s servers that answers; raises
    ConnectionError saying why when none does, ValueError when ``bootstrap`` is not
    HOST:PORT[,...]. Never creates topics. ``connector``: TLS and SASL (None: PLAINTEXT)."""
    errors = []
    for host, port in parse_bootstrap(bootstrap):
        try:
            return asyncio.run(_ask(host, port, topics, timeout_s, connector))
        except ConnectionError as error:
            errors.append(describe_connection_error(error))
    raise ConnectionError("; ".join(errors))


async def _ask(host: str, port: int, topics: list[str] | None, timeout_s: float,
               connector: Connector | None = None):
    client = BrokerClient(host, port, timeout_s=timeout_s, connector=connector)
    M = messages.MetadataRequest
    request = M(topics=None if topics is None else [M.MetadataRequestTopic(name=t)
                                                    for t in topics],
                allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False)
    try:
        return await client.request(request, METADATA_VERSION)
    finally:
        client.close()
