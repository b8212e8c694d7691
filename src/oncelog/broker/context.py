"""What a handler receives: the request's header facts and the broker's state owners."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from .broker import Broker


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_key: ApiKey
    api_version: int
    correlation_id: int
    client_id: str | None
    client_address: str
    broker: Broker

    @property
    def partitions(self):
        return self.broker.partitions

    async def wait_for_group_records(self, group_id: str):
        """Once a group operation wrote to ``__consumer_offsets``: wait until the ISR has it,
        so a coordinator failover cannot bring back an older generation (Kafka's coordinator
        appends with acks=all). Returns the ErrorCode to answer with (NONE to go on)."""
        broker = self.broker
        return await broker.offsets_topic.wait_for_group_replication(
            broker.group_coordinator, group_id, broker.config["offsets.commit.timeout.ms"])
