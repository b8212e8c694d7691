"""Transaction markers for partitions another broker leads: ``TransactionMarkers`` is given
what it uses (its node id, the partitions, a broker's address by node id, a way to connect)
instead of the whole broker, so the remote path runs here with no broker and no socket."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from oncelog.coordinator.transaction.markers import TransactionMarkers
from oncelog.broker.handlers import write_txn_markers
from oncelog.protocol.errors import ErrorCode
from oncelog.protocol.messages import WriteTxnMarkersRequest


class FakeClient:
    def __init__(self, host: str, port: int, codes: list[ErrorCode]) -> None:
        self.host, self.port = host, port
        self.codes = codes  # the answer to each request, in turn
        self.requests: list[WriteTxnMarkersRequest] = []
        self.closed = False

    async def request(self, request: WriteTxnMarkersRequest, version: int):
        self.requests.append(request)
        code = self.codes.pop(0) if self.codes else ErrorCode.NONE
        # every partition answered with one code: the handler's own error answer has that shape
        return write_txn_markers.error_response(request, code, None)

    def close(self) -> None:
        self.closed = True


def partitions_led_by(leaders: dict[str, list[int]]):
    """A stand-in for the partition manager: each topic's partition states, with leaders."""
    return SimpleNamespace(topics={
        topic: SimpleNamespace(states=[SimpleNamespace(leader=leader) for leader in led])
        for topic, led in leaders.items()})


def markers_for(partitions, addresses: dict[int, tuple[str, int]], codes=()):
    clients: list[FakeClient] = []

    def connect(host: str, port: int) -> FakeClient:
        clients.append(FakeClient(host, port, list(codes)))
        return clients[-1]

    markers = TransactionMarkers(1, partitions, group_coordinator=None,
                                 broker_address=addresses.get, connect=connect)  # type: ignore[arg-type]
    return markers, clients


def test_markers_for_another_leader_go_to_its_address_in_one_request():
    addresses = {2: ("10.0.0.2", 9093)}
    markers, clients = markers_for(partitions_led_by({"orders": [2, 2]}), addresses)
    asyncio.run(markers.write_all([("orders", 0), ("orders", 1)], 7, 3, True, 5, lambda: True))
    [client] = clients
    assert (client.host, client.port) == ("10.0.0.2", 9093)
    [request] = client.requests
    [marker] = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result,
            marker.coordinator_epoch) == (7, 3, True, 5)
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("orders", [0, 1])]


def test_a_leader_that_moved_address_gets_a_new_connection():
    addresses = {2: ("10.0.0.2", 9093)}
    markers, clients = markers_for(partitions_led_by({"orders": [2]}), addresses)
    asyncio.run(markers.write_all([("orders", 0)], 7, 3, True, 5, lambda: True))
    asyncio.run(markers.write_all([("orders", 0)], 7, 4, False, 5, lambda: True))
    assert len(clients) == 1  # the same leader at the same address: the same connection
    addresses[2] = ("10.0.0.9", 9093)
    asyncio.run(markers.write_all([("orders", 0)], 7, 5, True, 5, lambda: True))
    assert [(c.host, c.port) for c in clients] == [("10.0.0.2", 9093), ("10.0.0.9", 9093)]
    markers.close()
    assert clients[-1].closed


def test_a_retriable_answer_is_retried_until_the_marker_is_written():
    markers, clients = markers_for(partitions_led_by({"orders": [2]}), {2: ("h", 1)},
                                   codes=[ErrorCode.NOT_LEADER_OR_FOLLOWER])
    asyncio.run(markers.write_all([("orders", 0)], 7, 3, True, 5, lambda: True))
    assert len(clients[0].requests) == 2


def _manager(tmp_path):
    from oncelog.config import BrokerConfig
    from oncelog.controller import LocalMetadataStore
    from oncelog.partition import PartitionManager
    from tests.fake_clock import FakeClock
    config = BrokerConfig({"log.dirs": str(tmp_path / "data")})
    return PartitionManager(config, LocalMetadataStore(tmp_path / "store"), FakeClock(),
                            node_id=1)


def test_a_marker_for_a_topic_this_broker_has_not_heard_of_yet_is_written_not_dropped(
        tmp_path):
    """Found by the simulation (seed 4710): a topic deleted and created again while the
    coordinator's broker was cut off from ZooKeeper; the transaction's batch went into the
    new topic, and the coordinator - not knowing the new topic yet - took "unknown topic"
    for "deleted" and dropped the marker. The transaction stayed open in the partition for
    good. The coordinator now asks the store before it gives a marker up."""
    from oncelog.controller import PartitionState, TopicRecord
    partitions = _manager(tmp_path)
    # another broker created it, led by broker 2; this one has not read it yet
    partitions.store.create_topic(TopicRecord("orders", "id-1", 1, assignment=[[2]]),
                                  [PartitionState(2, 0, (2,))])
    assert "orders" not in partitions.topics
    markers, clients = markers_for(partitions, {2: ("h", 1)})
    asyncio.run(markers.write_all([("orders", 0)], 7, 3, True, 5, lambda: True))
    [client] = clients
    [request] = client.requests
    assert [(t.name, t.partition_indexes) for t in request.markers[0].topics] == [
        ("orders", [0])]
    assert partitions.topics["orders"].states[0].leader == 2  # read from the store


def test_a_marker_for_a_partition_the_store_does_not_have_is_given_up(tmp_path):
    partitions = _manager(tmp_path)
    markers, clients = markers_for(partitions, {2: ("h", 1)})
    asyncio.run(asyncio.wait_for(
        markers.write_all([("deleted", 0)], 7, 3, False, 5, lambda: True), 5))
    assert clients == []
