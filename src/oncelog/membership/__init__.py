"""A broker's membership of a cluster: what it does in cluster mode besides serving requests.

- ``membership`` — ``ClusterMembership``: registration, the metadata sync, ISR changes, the
  leadership lease, the controller role, follower fetchers, controlled shutdown.
- ``metadata_sync`` — the broker's view of the cluster's metadata kept up to date one reported
  change at a time, applied only forward.

It sits above ``controller`` (the store, elections), ``partition`` and ``replication``,
whose parts it drives, and below ``broker``, which wires it.
"""

from .membership import ClusterMembership
from .metadata_sync import MetadataSync

__all__ = ["ClusterMembership", "MetadataSync"]
