"""Coordinators: state machines that emit records to an internal topic, then reply.

- ``group`` — the classic consumer-group coordinator (JoinGroup/SyncGroup/Heartbeat/
  LeaveGroup, generations, committed offsets in ``__consumer_offsets``).
- ``transaction`` — the transaction coordinator (KIP-98, KIP-447): InitProducerId with a
  transactional id, AddPartitionsToTxn/AddOffsetsToTxn, EndTxn, commit and abort markers
  written to every partition of a transaction, timeouts, recovery from
  ``__transaction_state``.
- ``internal_topic`` — a coordinator's internal topic on this broker: created when
  missing, appended to, read back when a partition is loaded, waited on until replicated.
- ``leadership`` — in a cluster, each coordinator loads the partitions of its topic this
  broker leads and unloads the ones it stopped leading.
- ``timer`` — keyed deadlines (session, rebalance and join timeouts) driven by an injected
  clock.
- ``record_codec`` — Kafka's primitive types as both internal topics' records use them.
"""

from .group import GroupConfig, GroupCoordinator
from .timer import Timer

__all__ = ["GroupConfig", "GroupCoordinator", "Timer"]
