"""What a handler receives: the request's header facts and the broker's named services."""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.api_keys import ApiKey
from .services import BrokerServices


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_key: ApiKey
    api_version: int
    correlation_id: int
    client_id: str | None
    client_address: str
    # the state owners a handler may use, the same object for every request to this broker
    services: BrokerServices
    # the listener the request came in on: a client is told the endpoints of that listener
    listener: str
    # who sent it: "User:NAME" as SASL or a client certificate said, else "User:ANONYMOUS"
    principal: str = "User:ANONYMOUS"
