"""Cluster metadata: which topics exist, their ids, partition counts and config overrides.

``LocalMetadataStore`` keeps it in one JSON file in the data directory (the single-broker
default, no extra process). A ZooKeeper-backed store with the same interface arrives with
cluster mode.
"""

from .metadata_store import LocalMetadataStore, TopicRecord

__all__ = ["LocalMetadataStore", "TopicRecord"]
