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
    broker: "Broker"

    @property
    def partitions(self):
        return self.broker.partitions
