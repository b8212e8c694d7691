"""Replication between brokers: a follower's fetcher per leader (``fetcher``), over the
inter-broker client of ``net``. The leader's side — follower progress, the ISR, the high
watermark — lives with the partition (``partition.replicas``, ``Partition``); ISR changes are
written to the metadata store by ``membership``."""

from .fetcher import ReplicaFetcher

__all__ = ["ReplicaFetcher"]
