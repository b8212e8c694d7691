"""A simulated broker serves requests with the services a ``Broker`` builds.

Until the handlers were given ``BrokerServices`` (``oncelog.broker.services``) they reached
through ``ctx.broker``, and the simulation faked a ``Broker`` with a ``BrokerFacade`` holding
the few attributes Produce and Fetch happened to use: any other request would have failed on
a missing attribute. Now each ``Node`` builds its services with ``build_services``, as the
broker does: real producer ids over the simulated store, real coordinators, and transaction
markers whose connections go through the simulated network to the leader they name.
"""

from __future__ import annotations


from oncelog.coordinator.transaction.coordinator import TransactionCoordinator
from oncelog.protocol.errors import ErrorCode
from oncelog.protocol.messages import InitProducerIdRequest, WriteTxnMarkersRequest
from oncelog.simulation.cluster import Settings, SimulatedLeaderClient, serve

from .conftest import run_on_two_brokers

M = WriteTxnMarkersRequest.WritableTxnMarker


def test_a_simulated_broker_serves_with_real_services(tmp_path):
    async def scenario(sim, world) -> None:
        node = world.nodes[1]
        services = node.services
        assert services is not None
        assert services.partitions is node.partitions and services.brokers is node.brokers
        assert services.config is node.config and services.node_id == 1
        assert isinstance(services.transaction_coordinator, TransactionCoordinator)

        # a producer id, allocated from a block reserved in the (simulated) store
        answer = await serve(world, "client", node, InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1,
            producer_epoch=-1), 4, "producer")
        assert (answer.error_code, answer.producer_epoch) == (ErrorCode.NONE, 0)
        assert answer.producer_id >= 0

        # the markers connect to the broker registered at the address they look up
        address = services.brokers.address(2)
        assert address == ("broker-2", 9092)
        client = services.transaction_coordinator.markers._connect(*address)
        assert isinstance(client, SimulatedLeaderClient)
        assert (client.leader_id, client.host, client.port) == (2, "broker-2", 9092)
        response = await client.request(WriteTxnMarkersRequest(markers=[M(
            producer_id=answer.producer_id, producer_epoch=0, transaction_result=True,
            topics=[M.WritableTxnMarkerTopic(name="absent", partition_indexes=[0])],
            coordinator_epoch=0)]), 1)
        [marker] = response.markers
        [topic] = marker.topics
        assert topic.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run_on_two_brokers(tmp_path, scenario, Settings(brokers=2, steps=0))
