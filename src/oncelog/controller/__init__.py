"""Cluster metadata and who decides it.

``store.MetadataStore`` is the interface: brokers, the controller, topics with their replica
assignment, per-partition state ``{leader, leader_epoch, isr}`` changed only by
compare-and-set, producer-id blocks; every record carries the store's versions, so a broker
applies metadata only forward. ``StoreCalls`` runs its blocking calls on threads of their own,
awaited by the event loop. ``LocalMetadataStore`` (``metadata_store``) keeps it in
one JSON file in the data directory (the single-broker default, no extra process);
``ZooKeeperMetadataStore`` (``zookeeper_store``) keeps it in ZooKeeper for a cluster.

- ``controller`` — the controller role: elections over the whole cluster, by compare-and-set,
  after the pure rules of ``elections`` (clean and unclean, controlled shutdown).
- ``live_brokers`` — which brokers are live, the controller, and which brokers Metadata
  lists. (What a broker does in a cluster besides serving requests - the metadata sync, ISR
  changes, the lease, the controller role - is ``oncelog.membership``, above the partitions
  and fetchers it drives.)
- ``producer_ids`` — producer ids unique across restarts and brokers, in reserved blocks.
"""

from .metadata_store import LocalMetadataStore
from .store import (NO_LEADER, BrokerRegistration, MetadataChange, MetadataEvent,
                    MetadataStore, NodeIdInUse, PartitionState, StoreCalls, StoreTimedOut,
                    StoreUnavailable, TopicExists, TopicGrew, TopicListing, TopicRecord,
                    new_topic_id)

__all__ = ["LocalMetadataStore", "MetadataStore", "TopicRecord", "PartitionState",
           "BrokerRegistration", "MetadataChange", "MetadataEvent", "NodeIdInUse",
           "StoreCalls", "StoreTimedOut", "StoreUnavailable", "TopicExists", "TopicGrew",
           "TopicListing",
           "NO_LEADER", "new_topic_id"]
