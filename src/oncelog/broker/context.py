"""What a handler receives: the request's header facts and the broker's named services."""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.api_keys import ApiKey
from ..security.acl import CLUSTER_NAME, AclOperation, ResourceType
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
    client_host: str = ""  # its address, as ACLs name hosts

    def allowed(self, operation: AclOperation, resource_type: ResourceType,
                name: str = CLUSTER_NAME, *, log_denial: bool = True) -> bool:
        """May this request's principal, from its host, do ``operation`` on the resource
        (the cluster when no name is given)? Always, without an authorizer."""
        return self.services.acls.authorizer.authorize(
            self.principal, self.client_host, operation, resource_type, name,
            log_denial=log_denial)

    def allowed_on_some(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: allowed on at least one resource of the type."""
        return self.services.acls.authorizer.authorize_any(
            self.principal, self.client_host, operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType,
                              name: str = CLUSTER_NAME) -> set[int]:
        """KIP-430: the operations this principal may do on the resource (every one the
        type supports, without an authorizer)."""
        return self.services.acls.authorizer.authorized_operations(
            self.principal, self.client_host, resource_type, name)
