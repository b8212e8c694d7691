"""The on-disk log of a partition: segments of record batches in Kafka's format, their
offset and time indexes, recovery after a crash, roll, retention and compaction.

``Log`` is the whole of it for callers (``log.py``); ``segment.py`` is one segment and its
files, ``index.py`` the two sparse indexes, ``txn_index.py`` the aborted-transaction index,
``cleaner.py`` log compaction (transaction-aware), ``config.py`` the ``log.*`` settings.
Beside the log: ``leader_epoch.py`` the leader-epoch checkpoint, ``producer_snapshots.py``
the producer-state snapshot files, ``files.py`` small files written whole and fsyncs by
name, ``file_region.py`` a range of a segment file sent with ``os.sendfile``.
"""

from .config import LogConfig
from .file_region import FileRegion
from .index import OffsetAndTimestamp
from .log import AppendInfo, Log
from .txn_index import AbortedTxn

__all__ = ["AbortedTxn", "AppendInfo", "FileRegion", "Log", "LogConfig", "OffsetAndTimestamp"]
