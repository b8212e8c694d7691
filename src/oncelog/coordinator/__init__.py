"""Coordinators: state machines that emit records to an internal topic, then reply.

- ``group`` — the classic consumer-group coordinator (JoinGroup/SyncGroup/Heartbeat/
  LeaveGroup, generations, committed offsets in ``__consumer_offsets``).
- ``timer`` — keyed deadlines (session, rebalance and join timeouts) driven by an injected
  clock.

The transaction coordinator (``__transaction_state``) will live next to them.
"""

from .group import GroupConfig, GroupCoordinator
from .timer import Timer

__all__ = ["GroupConfig", "GroupCoordinator", "Timer"]
