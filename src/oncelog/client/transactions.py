"""Transactions as an administrator sees them (Kafka's ``kafka-transactions.sh``), over the
Kafka protocol, against any broker that speaks it: ListTransactions to every broker,
FindCoordinator + DescribeTransactions for one transactional id, DescribeProducers for the
transactions open on a partition, and ``abort_transaction`` for one open there - the methods
of a ``TransactionAdmin``, whose connections speak the cluster's security protocol.

Aborting is done by whoever knows the transaction. Kafka's admin abort (KIP-664) writes an
ABORT marker on the one partition (WriteTxnMarkers): that is for a *hanging* transaction,
one its coordinator lost, which nothing else would ever end. Done to a transaction its
coordinator still has Ongoing, it ended the transaction on that partition only: the
coordinator kept showing it Ongoing, and the producer could still commit its other
partitions - atomicity broken. So ``abort_transaction`` first asks the coordinators: if one
has the producer's transaction Ongoing with this partition, the abort goes through it, the
way a new instance of the producer aborts its predecessor's transaction: InitProducerId for
the transactional id fences the producer (epoch + 1) and the coordinator aborts the
transaction on every partition (PrepareEpochFence, PrepareAbort, CompleteAbort). Only a
transaction no coordinator has open there gets the marker.

Used by ``oncelog transactions``. Errors are ``ConnectionError`` (no broker answered) or
``TransactionAdminError`` (a broker answered with a Kafka error code).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..protocol import messages
from ..protocol.errors import ErrorCode
from ..net.client import BrokerClient
from .bootstrap import parse_bootstrap
from .metadata import fetch_metadata

if TYPE_CHECKING:
    from ..net.connector import Connector

FIND_COORDINATOR_VERSION = 3
INIT_PRODUCER_ID_VERSION = 4
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


@dataclass(frozen=True)
class Aborted:
    """What ``abort_transaction`` did. ``transactional_id`` is None for a hanging transaction
    (an ABORT marker on the one partition); otherwise its coordinator aborted it on every
    partition in ``partitions`` and left it in ``state`` with the producer at ``producer_epoch``
    (fenced)."""
    transactional_id: str | None
    partitions: list[str]
    state: str
    producer_epoch: int



class TransactionAdmin:
    """The transactions of the cluster ``bootstrap`` reaches, asked over connections that
    speak what ``connector`` says (PLAINTEXT without one; ``client.bootstrap.connector_for``
    makes one from a ``--command-config`` file's settings)."""

    def __init__(self, bootstrap: str, connector: Connector | None = None) -> None:
        self.bootstrap = bootstrap
        self.connector = connector

    def _brokers(self) -> dict[int, tuple[str, int]]:
        metadata = fetch_metadata(self.bootstrap, connector=self.connector)
        return {b.node_id: (b.host, b.port) for b in metadata.brokers}

    async def _ask_async(self, address: tuple[str, int], request, version: int,
                         timeout_s: float = 15.0):
        client = BrokerClient(*address, timeout_s=timeout_s, connector=self.connector)
        try:
            return await client.request(request, version)
        finally:
            client.close()

    def list_transactions(self, states: list[str] | None = None,
                          min_duration_ms: int = -1) -> list[Listed]:
        """Every transactional id known to a coordinator, from every broker."""
        request = messages.ListTransactionsRequest(state_filters=states or [],
                                                   producer_id_filters=[],
                                                   duration_filter=min_duration_ms)
        out = []
        for node_id, address in sorted(self._brokers().items()):
            response = asyncio.run(self._ask_async(address, request, LIST_TRANSACTIONS_VERSION))
            if response.error_code != ErrorCode.NONE:
                raise TransactionAdminError(ErrorCode(response.error_code),
                                            f"listing transactions at broker {node_id}")
            if response.unknown_state_filters:
                raise TransactionAdminError(ErrorCode.INVALID_REQUEST, "unknown states "
                                            + ", ".join(response.unknown_state_filters))
            out += [Listed(s.transactional_id, s.producer_id, s.transaction_state, node_id)
                    for s in response.transaction_states]
        return sorted(out, key=lambda listed: listed.transactional_id)

    def describe_transaction(self, transactional_id: str):
        """The coordinator's view (a DescribeTransactions state) and the coordinator's id."""
        node_id, address = self._coordinator(transactional_id)
        response = asyncio.run(self._ask_async(address, messages.DescribeTransactionsRequest(
            transactional_ids=[transactional_id]), DESCRIBE_TRANSACTIONS_VERSION))
        (state,) = response.transaction_states
        if state.error_code != ErrorCode.NONE:
            raise TransactionAdminError(ErrorCode(state.error_code),
                                        f"describing {transactional_id!r}")
        return state, node_id

    def _coordinator(self, transactional_id: str) -> tuple[int, tuple[str, int]]:
        """The node id and address of ``transactional_id``'s coordinator (FindCoordinator)."""
        request = messages.FindCoordinatorRequest(key=transactional_id, key_type=1)
        found = asyncio.run(self._ask_async(parse_bootstrap(self.bootstrap)[0], request,
                                            FIND_COORDINATOR_VERSION))
        if found.error_code != ErrorCode.NONE:
            raise TransactionAdminError(ErrorCode(found.error_code),
                                        f"finding the coordinator of {transactional_id!r}")
        return found.node_id, (found.host, found.port)

    def _leader(self, topic: str, partition: int) -> tuple[str, int]:
        metadata = fetch_metadata(self.bootstrap, [topic], connector=self.connector)
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

    def open_transactions(self, topic: str, partition: int) -> list[OpenTransaction]:
        """The producers with a transaction open on ``topic``-``partition``."""
        R = messages.DescribeProducersRequest
        response = asyncio.run(self._ask_async(self._leader(topic, partition),
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

    def abort_transaction(self, topic: str, partition: int, producer_id: int,
                          producer_epoch: int, coordinator_epoch: int = -1) -> Aborted:
        """End the producer's transaction open on ``topic``-``partition``: through its
        coordinator when one has it open there, with an ABORT marker on the partition when none
        does (a hanging transaction)."""
        owner = self._coordinator_view(producer_id)
        if owner is not None:
            state, coordinator = owner
            partitions = {(t.topic, p) for t in state.topics for p in t.partitions}
            if (topic, partition) in partitions and state.transaction_state == "Ongoing":
                return self._abort_through_coordinator(state, partitions)
            if (topic, partition) in partitions and state.transaction_state.startswith("Prepare"):
                raise TransactionAdminError(
                    ErrorCode.CONCURRENT_TRANSACTIONS,
                    f"the coordinator (broker {coordinator}) of {state.transactional_id!r} is "
                    f"completing its transaction ({state.transaction_state}); its markers will end "
                    f"it on {topic}-{partition}")
        self._write_abort_marker(topic, partition, producer_id, producer_epoch,
                            coordinator_epoch)
        return Aborted(None, [f"{topic}-{partition}"], "", producer_epoch)

    def _coordinator_view(self, producer_id: int):
        """(DescribeTransactions state, coordinator id) of the transactional id whose current
        producer is ``producer_id``, or None when no coordinator has one."""
        request = messages.ListTransactionsRequest(state_filters=[],
                                                   producer_id_filters=[producer_id],
                                                   duration_filter=-1)
        for address in self._brokers().values():
            response = asyncio.run(self._ask_async(address, request, LIST_TRANSACTIONS_VERSION))
            if response.error_code != ErrorCode.NONE:  # not knowing who has it: do nothing
                raise TransactionAdminError(ErrorCode(response.error_code),
                                            f"looking for producer {producer_id}'s coordinator")
            for listed in response.transaction_states:
                state, coordinator = self.describe_transaction(listed.transactional_id)
                if state.producer_id == producer_id:
                    return state, coordinator
        return None

    def _abort_through_coordinator(self, state, partitions: set[tuple[str, int]],
                                   timeout_s: float = 30.0) -> Aborted:
        """InitProducerId as a new instance of the transactional id would send it: the
        coordinator fences the producer and aborts its open transaction (answering
        CONCURRENT_TRANSACTIONS meanwhile); then wait until DescribeTransactions shows the
        transaction ended."""
        transactional_id = state.transactional_id
        _, address = self._coordinator(transactional_id)
        request = messages.InitProducerIdRequest(
            transactional_id=transactional_id, transaction_timeout_ms=state.transaction_timeout_ms,
            producer_id=-1, producer_epoch=-1)
        response = asyncio.run(self._ask_async(address, request, INIT_PRODUCER_ID_VERSION))
        if response.error_code == ErrorCode.NONE:
            # At rest already: the transaction ended (committed or aborted) since we looked.
            raise TransactionAdminError(ErrorCode.INVALID_TXN_STATE,
                                        f"the transaction of {transactional_id!r} ended before it "
                                        "could be aborted")
        if response.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:  # the abort is under way
            raise TransactionAdminError(ErrorCode(response.error_code),
                                        f"aborting the transaction of {transactional_id!r}")
        deadline = time.monotonic() + timeout_s
        while True:  # Kafka's coordinator writes the markers after answering
            now, _ = self.describe_transaction(transactional_id)
            if now.transaction_state not in ("Ongoing", "PrepareEpochFence", "PrepareAbort"):
                break
            if time.monotonic() > deadline:
                raise TransactionAdminError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"aborting the transaction of {transactional_id!r} (still "
                    f"{now.transaction_state} after {timeout_s:g} s)")
            time.sleep(0.2)
        return Aborted(transactional_id, [f"{t}-{p}" for t, p in sorted(partitions)],
                       now.transaction_state, now.producer_epoch)

    def _write_abort_marker(self, topic: str, partition: int, producer_id: int,
                            producer_epoch: int, coordinator_epoch: int) -> None:
        """Write an ABORT marker for the producer's transaction on one partition."""
        M = messages.WriteTxnMarkersRequest.WritableTxnMarker
        request = messages.WriteTxnMarkersRequest(markers=[M(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
            coordinator_epoch=coordinator_epoch)])
        response = asyncio.run(self._ask_async(self._leader(topic, partition), request,
                                    WRITE_TXN_MARKERS_VERSION))
        code = ErrorCode(response.markers[0].topics[0].partitions[0].error_code)
        if code != ErrorCode.NONE:
            raise TransactionAdminError(code, f"aborting producer {producer_id}'s transaction on "
                                              f"{topic}-{partition}")
