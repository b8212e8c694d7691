"""The classic consumer-group coordinator and its records in ``__consumer_offsets``.

- ``coordinator.py`` — ``GroupCoordinator``: JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
  generations, rebalance and session deadlines; ``offsets.py`` — its offset commits,
  fetches and deletions, listing, describing and deleting groups; ``params.py`` — its
  configuration and request parameters.
- ``state.py`` — ``ClassicGroup``: one group's members and the state machine
  (Empty / PreparingRebalance / CompletingRebalance / Stable / Dead).
- ``manager.py`` — ``GroupMetadataManager``: the group map, "emit records, then apply"
  writes, and ``replay``, which also rebuilds groups when the broker starts.
- ``records.py`` — Kafka's on-disk key/value formats and the group -> partition rule.
- ``offsets_topic.py`` — the broker's ``__consumer_offsets`` (creation, appends, reads).
"""

from .coordinator import GroupCoordinator
from .params import GroupConfig, GroupListing, JoinGroupParams, LeavingMember, SyncGroupParams
from .records import OffsetAndMetadata, partition_for
from .state import GroupState, GroupSummary, JoinResult, SyncResult

__all__ = ["GroupConfig", "GroupCoordinator", "GroupListing", "GroupState", "GroupSummary",
           "JoinGroupParams", "JoinResult", "LeavingMember", "OffsetAndMetadata",
           "SyncGroupParams", "SyncResult", "partition_for"]
