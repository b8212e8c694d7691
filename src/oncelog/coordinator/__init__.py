"""Coordinators: state machines that emit records to an internal topic, then reply.

- ``group`` — the classic consumer-group coordinator (JoinGroup/SyncGroup/Heartbeat/
  LeaveGroup, generations, committed offsets in ``__consumer_offsets``).
- ``timer`` — keyed deadlines (session, rebalance and join timeouts) driven by an injected
  clock.

- ``transaction`` — the transaction coordinator's state table, transitions and
  ``__transaction_state`` records (being built: issue 12).
- ``record_codec`` — Kafka's primitive types as both internal topics' records use them.
"""

from .group import GroupConfig, GroupCoordinator
from .timer import Timer

__all__ = ["GroupConfig", "GroupCoordinator", "Timer"]
