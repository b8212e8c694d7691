"""The on-disk log of a partition: segments of record batches in Kafka's format, their
offset and time indexes, recovery after a crash, roll and retention.

``Log`` is the whole of it for callers (``log.py``); ``segment.py`` is one segment and its
files, ``index.py`` the two sparse indexes, ``txn_index.py`` the aborted-transaction index,
``config.py`` the ``log.*`` settings.
"""

from .config import LogConfig
from .file_region import FileRegion
from .index import OffsetAndTimestamp
from .log import AppendInfo, Log
from .txn_index import AbortedTxn

__all__ = ["AbortedTxn", "AppendInfo", "FileRegion", "Log", "LogConfig", "OffsetAndTimestamp"]
