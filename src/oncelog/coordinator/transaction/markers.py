"""Transaction markers: the commit or abort control batch the coordinator writes into every
partition of a transaction (Kafka's ``TransactionMarkerChannelManager`` and the partition
side of WriteTxnMarkers).

``TransactionMarkers.write_all`` writes one marker per partition: through the partition
itself when this broker leads it, otherwise with a WriteTxnMarkers request to the broker that
does (one request per broker, one connection per broker). A marker that fails is retried
every ``RETRY_S`` while the coordinator still owns the transactional id - a partition whose
leader moved, or whose ISR is short, gets its marker later, never not at all (the
transaction stays in its Prepare state meanwhile, and the LSO of that partition waits). A
partition the metadata store says is gone (its topic deleted) is skipped - the store's word,
not this broker's view, which may not know yet that the topic was created again and holds
the transaction's records; so is one that already saw a newer epoch of the
producer (INVALID_PRODUCER_EPOCH: the marker is obsolete); TRANSACTION_COORDINATOR_FENCED
(a newer coordinator wrote there) stops this coordinator with NOT_COORDINATOR, as Kafka's
stops sending.

``write_marker_locally`` is the partition side, shared with the WriteTxnMarkers handler:
append the marker, wait until the ISR has it, and - for a partition of
``__consumer_offsets`` - let the group coordinator apply or drop the transaction's pending
offsets.

What it uses is handed to it at construction, as Kafka hands its marker channel manager the
metadata cache and a network client: this broker's node id, the partitions it hosts (their
leaders, as the metadata store last said), the group coordinator, a lookup of a broker's
address by node id, and a way to open a connection to one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import ApiMessage, WriteTxnMarkersRequest, WriteTxnMarkersResponse
from ...net.client import BrokerClient
from ...net.connector import Connector
from ..group.offsets_topic import OFFSETS_TOPIC

if TYPE_CHECKING:
    from ...partition import PartitionManager
    from ..group import GroupCoordinator

log = logging.getLogger(__name__)

RETRY_S = 0.1
MARKER_TIMEOUT_MS = 30_000
WRITE_TXN_MARKERS_VERSION = 1
# when the store confirms the partition is gone (this broker's view may lag behind a topic
# deleted and created again: seed 4710 of the simulation)
_GIVE_UP = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

M = WriteTxnMarkersRequest.WritableTxnMarker
_Results = dict[tuple[str, int], ErrorCode]  # per partition
# node id -> (host, port) of a live broker, or None when it is not live
BrokerAddress = Callable[[int], tuple[str, int] | None]


class MarkerClient(Protocol):
    """A connection to one partition leader (``BrokerClient``: one TCP connection; a
    simulation passes its own)."""
    host: str
    port: int

    async def request(self, request: ApiMessage, version: int) -> Any: ...

    def close(self) -> None: ...


Connect = Callable[[str, int], MarkerClient]


def connect_to_broker(host: str, port: int) -> BrokerClient:
    """One PLAINTEXT connection to a partition leader, for its WriteTxnMarkers requests."""
    return BrokerClient(host, port, timeout_s=MARKER_TIMEOUT_MS / 1000 + 5)


def connect_with(connector: Connector) -> Connect:
    """Connections to other brokers in the inter-broker listener's protocol (TLS, SASL)."""
    def connect(host: str, port: int) -> BrokerClient:
        return connector.client(host, port, timeout_s=MARKER_TIMEOUT_MS / 1000 + 5)
    return connect


async def write_marker_locally(partitions: PartitionManager,
                               group_coordinator: GroupCoordinator, topic: str, index: int,
                               producer_id: int, producer_epoch: int, commit: bool,
                               coordinator_epoch: int) -> ErrorCode:
    """Append the marker to this broker's leader replica and wait for its ISR."""
    try:
        partition = partitions.get_partition(topic, index)
        info = partition.write_txn_marker(producer_id, producer_epoch, commit,
                                          coordinator_epoch)
    except KafkaError as error:
        return error.code
    if partition.high_watermark <= info.last_offset:
        try:
            code = await asyncio.wait_for(partition.wait_for_acks(info.last_offset + 1),
                                          MARKER_TIMEOUT_MS / 1000)
        except TimeoutError:
            code = ErrorCode.REQUEST_TIMED_OUT
        if code != ErrorCode.NONE:
            return code
    if topic == OFFSETS_TOPIC:
        group_coordinator.complete_transaction(index, producer_id, commit)
    return ErrorCode.NONE


class TransactionMarkers:
    def __init__(self, node_id: int, partitions: PartitionManager,
                 group_coordinator: GroupCoordinator, broker_address: BrokerAddress,
                 connect: Connect = connect_to_broker) -> None:
        self.node_id = node_id
        self.partitions = partitions
        self.group_coordinator = group_coordinator
        self._broker_address = broker_address
        self._connect = connect
        self._clients: dict[int, MarkerClient] = {}
        self._last_error: dict[int, str] = {}  # per leader: the connection error last logged

    async def write_all(self, partitions: list[tuple[str, int]], producer_id: int,
                        producer_epoch: int, commit: bool, coordinator_epoch: int,
                        still_ours: Callable[[], bool]) -> None:
        """A marker in every partition; returns when each is written (or its topic gone).
        Raises NOT_COORDINATOR if the coordinator loses the id meanwhile."""
        pending = set(partitions)
        while pending:
            if not still_ours():
                raise KafkaError(ErrorCode.NOT_COORDINATOR,
                                 "the transaction moved to another coordinator while its "
                                 "markers were being written")
            results = await self._write_round(sorted(pending), producer_id, producer_epoch,
                                              commit, coordinator_epoch)
            for (topic, index), code in results.items():
                if code == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
                    raise KafkaError(ErrorCode.NOT_COORDINATOR,
                                     f"{topic}-{index} has markers from a newer coordinator: "
                                     "this one was replaced")
                if code == ErrorCode.INVALID_PRODUCER_EPOCH:
                    # the partition saw a newer epoch of this producer: a later transaction
                    # (or a fence) already ended what this marker would end
                    log.warning("marker for producer %d epoch %d in %s-%d is obsolete (a newer "
                                "epoch wrote there); not retrying", producer_id,
                                producer_epoch, topic, index)
                    pending.discard((topic, index))
                elif code == ErrorCode.NONE:
                    pending.discard((topic, index))
                elif code in _GIVE_UP and await self.partitions.partition_gone(topic, index):
                    log.info("marker for producer %d in %s-%d: the partition is gone (its "
                             "topic deleted); not retrying", producer_id, topic, index)
                    pending.discard((topic, index))
                else:
                    log.info("marker for producer %d in %s-%d: %s; retrying", producer_id,
                             topic, index, code.name)
            if pending:
                await asyncio.sleep(RETRY_S)

    async def _write_round(self, partitions: list[tuple[str, int]], producer_id: int,
                           producer_epoch: int, commit: bool, coordinator_epoch: int
                           ) -> _Results:
        by_leader: dict[int, list[tuple[str, int]]] = {}
        results: dict[tuple[str, int], ErrorCode] = {}
        for topic, index in partitions:
            leader = self._leader_of(topic, index)
            if leader is None:
                results[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif leader < 0:
                results[(topic, index)] = ErrorCode.LEADER_NOT_AVAILABLE
            else:
                by_leader.setdefault(leader, []).append((topic, index))
        rounds: list[Awaitable[_Results]] = []
        for leader, owned in by_leader.items():
            if leader == self.node_id:
                rounds += [self._local(topic, index, producer_id, producer_epoch, commit,
                                       coordinator_epoch) for topic, index in owned]
            else:
                rounds.append(self._remote(leader, owned, producer_id, producer_epoch, commit,
                                           coordinator_epoch))
        # One round (a transaction on partitions of one leader: the common case) is awaited
        # as it is; gather would wrap it in a task of its own and wait a turn of the loop.
        for outcome in ([await rounds[0]] if len(rounds) == 1 else await asyncio.gather(*rounds)):
            results.update(outcome)
        return results

    def _leader_of(self, topic: str, index: int) -> int | None:
        known = self.partitions.topics.get(topic)
        if known is None or not 0 <= index < len(known.states):
            return None
        return known.states[index].leader

    async def _local(self, topic: str, index: int, producer_id: int, producer_epoch: int,
                     commit: bool, coordinator_epoch: int) -> _Results:
        code = await write_marker_locally(self.partitions, self.group_coordinator, topic, index,
                                          producer_id, producer_epoch, commit, coordinator_epoch)
        return {(topic, index): code}

    async def _remote(self, leader: int, partitions: list[tuple[str, int]], producer_id: int,
                      producer_epoch: int, commit: bool, coordinator_epoch: int) -> _Results:
        address = self._broker_address(leader)
        if address is None:
            return {p: ErrorCode.LEADER_NOT_AVAILABLE for p in partitions}
        client = self._clients.get(leader)
        if client is None or (client.host, client.port) != address:
            client = self._clients[leader] = self._connect(*address)
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        request = WriteTxnMarkersRequest(markers=[M(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            topics=[M.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in topics.items()],
            coordinator_epoch=coordinator_epoch)])
        try:
            response: WriteTxnMarkersResponse = await client.request(
                request, WRITE_TXN_MARKERS_VERSION)
        except ConnectionError as error:
            # once per cause, not once per retry (a refused login fails every RETRY_S at once,
            # the connector backing off: net.connector)
            if self._last_error.get(leader) != str(error):
                log.info("WriteTxnMarkers to broker %d: %s", leader, error)
                self._last_error[leader] = str(error)
            return {p: ErrorCode.NETWORK_EXCEPTION for p in partitions}
        self._last_error.pop(leader, None)
        out = {p: ErrorCode.UNKNOWN_SERVER_ERROR for p in partitions}
        for marker in response.markers:
            for answered in marker.topics:
                for entry in answered.partitions:
                    out[(answered.name, entry.partition_index)] = ErrorCode(entry.error_code)
        return out

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
