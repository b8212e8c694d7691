"""Transactions as an administrator sees them (Kafka's ``kafka-transactions.sh``), over the
Kafka protocol, against any broker that speaks it: ListTransactions to every broker,
FindCoordinator + DescribeTransactions for one transactional id, DescribeProducers for the
transactions open on a partition, and WriteTxnMarkers to abort one that hangs there (its
coordinator lost it, so nothing would ever end it and the partition's last stable offset
would stay behind it).

Used by ``oncelog transactions``. Errors are ``ConnectionError`` (no broker answered) or
``TransactionAdminError`` (a broker answered with a Kafka error code).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..protocol import messages
from ..protocol.errors import ErrorCode
from ..replication.client import BrokerClient
from .bootstrap import parse_bootstrap
from .metadata import fetch_metadata

FIND_COORDINATOR_VERSION = 3
LIST_TRANSACTIONS_VERSION = 1
DESCRIBE_TRANSACTIONS_VERSION = 0
DESCRIBE_PRODUCERS_VERSION = 0
WRITE_TXN_MARKERS_VERSION = 1


class TransactionAdminError(Exception):
    def __init__(self, code: ErrorCode, what: str) -> None:
        super().__init__(f"{what}: {code.name}")
        self.code = code


@dataclass(frozen=True)
class Listed:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True)
class OpenTransaction:
    """A producer with a transaction open on a partition (DescribeProducers)."""
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp: int


def _brokers(bootstrap: str) -> dict[int, tuple[str, int]]:
    metadata = fetch_metadata(bootstrap)
    return {b.node_id: (b.host, b.port) for b in metadata.brokers}


async def _ask(address: tuple[str, int], request, version: int, timeout_s: float = 15.0):
    client = BrokerClient(*address, timeout_s=timeout_s)
    try:
        return await client.request(request, version)
    finally:
        client.close()


def list_transactions(bootstrap: str, states: list[str] | None = None,
                      min_duration_ms: int = -1) -> list[Listed]:
    """Every transactional id known to a coordinator, from every broker."""
    request = messages.ListTransactionsRequest(state_filters=states or [],
                                               producer_id_filters=[],
                                               duration_filter=min_duration_ms)
    out = []
    for node_id, address in sorted(_brokers(bootstrap).items()):
        response = asyncio.run(_ask(address, request, LIST_TRANSACTIONS_VERSION))
        if response.error_code != ErrorCode.NONE:
            raise TransactionAdminError(ErrorCode(response.error_code),
                                        f"listing transactions at broker {node_id}")
        if response.unknown_state_filters:
            raise TransactionAdminError(ErrorCode.INVALID_REQUEST, "unknown states "
                                        + ", ".join(response.unknown_state_filters))
        out += [Listed(s.transactional_id, s.producer_id, s.transaction_state, node_id)
                for s in response.transaction_states]
    return sorted(out, key=lambda listed: listed.transactional_id)


def describe_transaction(bootstrap: str, transactional_id: str):
    """The coordinator's view (a DescribeTransactions state) and the coordinator's id."""
    found = asyncio.run(_ask(parse_bootstrap(bootstrap)[0], messages.FindCoordinatorRequest(
        key=transactional_id, key_type=1), FIND_COORDINATOR_VERSION))
    if found.error_code != ErrorCode.NONE:
        raise TransactionAdminError(ErrorCode(found.error_code),
                                    f"finding the coordinator of {transactional_id!r}")
    response = asyncio.run(_ask((found.host, found.port),
                                messages.DescribeTransactionsRequest(
                                    transactional_ids=[transactional_id]),
                                DESCRIBE_TRANSACTIONS_VERSION))
    (state,) = response.transaction_states
    if state.error_code != ErrorCode.NONE:
        raise TransactionAdminError(ErrorCode(state.error_code),
                                    f"describing {transactional_id!r}")
    return state, found.node_id


def _leader(bootstrap: str, topic: str, partition: int) -> tuple[str, int]:
    metadata = fetch_metadata(bootstrap, [topic])
    brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
    for entry in metadata.topics:
        if entry.name == topic and entry.error_code == ErrorCode.NONE:
            for p in entry.partitions:
                if p.partition_index == partition and p.leader_id in brokers:
                    return brokers[p.leader_id]
                if p.partition_index == partition:
                    raise TransactionAdminError(ErrorCode.LEADER_NOT_AVAILABLE,
                                                f"{topic}-{partition} has no leader")
            raise TransactionAdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        f"topic {topic} has no partition {partition}")
    raise TransactionAdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic}")


def open_transactions(bootstrap: str, topic: str, partition: int) -> list[OpenTransaction]:
    """The producers with a transaction open on ``topic``-``partition``."""
    R = messages.DescribeProducersRequest
    response = asyncio.run(_ask(_leader(bootstrap, topic, partition),
                                R(topics=[R.TopicRequest(name=topic,
                                                         partition_indexes=[partition])]),
                                DESCRIBE_PRODUCERS_VERSION))
    (entry,) = response.topics[0].partitions
    if entry.error_code != ErrorCode.NONE:
        raise TransactionAdminError(ErrorCode(entry.error_code),
                                    f"describing the producers of {topic}-{partition}")
    return [OpenTransaction(p.producer_id, p.producer_epoch, p.coordinator_epoch,
                            p.current_txn_start_offset, p.last_timestamp)
            for p in entry.active_producers if p.current_txn_start_offset >= 0]


def abort_transaction(bootstrap: str, topic: str, partition: int, producer_id: int,
                      producer_epoch: int, coordinator_epoch: int = -1) -> None:
    """Write an ABORT marker for the producer's transaction on one partition."""
    M = messages.WriteTxnMarkersRequest.WritableTxnMarker
    request = messages.WriteTxnMarkersRequest(markers=[M(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
        topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
        coordinator_epoch=coordinator_epoch)])
    response = asyncio.run(_ask(_leader(bootstrap, topic, partition), request,
                                WRITE_TXN_MARKERS_VERSION))
    code = ErrorCode(response.markers[0].topics[0].partitions[0].error_code)
    if code != ErrorCode.NONE:
        raise TransactionAdminError(code, f"aborting producer {producer_id}'s transaction on "
                                          f"{topic}-{partition}")
