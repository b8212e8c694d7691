"""What the group coordinator is configured with and what handlers pass it: Kafka's broker
configs for groups, and one parameter object per request that has many fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...config import BrokerConfig

CLASSIC_GROUP_TYPE = "classic"


@dataclass(frozen=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> GroupConfig:
        return cls(initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
                   min_session_timeout_ms=config["group.min.session.timeout.ms"],
                   max_session_timeout_ms=config["group.max.session.timeout.ms"],
                   offset_metadata_max_bytes=config["offset.metadata.max.bytes"])


@dataclass(frozen=True)
class JoinGroupParams:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool = True  # JoinGroup v4+ (KIP-394)
    supports_skip_assignment: bool = True  # JoinGroup v9+ (KIP-814)
    reason: str | None = None


@dataclass(frozen=True)
class SyncGroupParams:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC_GROUP_TYPE


TopicPartition = tuple[str, int]
