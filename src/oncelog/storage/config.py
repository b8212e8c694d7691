"""Per-partition log settings, named after Kafka's broker configs (``log.*``).

Invariants checked at construction, so a bad value fails when the broker starts rather than
on the first append: ``segment_bytes`` fits the 32-bit file positions of the offset index
(Kafka caps ``log.segment.bytes`` at ``Int.MaxValue`` for the same reason), and the two
"forever" values are ``-1`` as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

_INT32_MAX = (1 << 31) - 1
_WEEK_MS = 7 * 24 * 3600 * 1000


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30  # log.segment.bytes
    segment_ms: int = _WEEK_MS  # log.roll.ms
    retention_ms: int = _WEEK_MS  # log.retention.ms, -1 = keep forever
    retention_bytes: int = -1  # log.retention.bytes (per partition), -1 = no limit
    index_interval_bytes: int = 4096  # log.index.interval.bytes
    # cleanup.policy includes compact: the cleaner may leave gaps between segments, so
    # recovery must accept them (in any other log a gap is data that never reached the disk)
    compacted: bool = False
    # log.cache.retain.bytes (oncelog's own, broker-wide): how much of a segment's newest
    # bytes stay in the OS page cache as it is written; -1 = everything (Kafka's way)
    cache_retain_bytes: int = -1

    def __post_init__(self) -> None:
        if not 1 <= self.segment_bytes <= _INT32_MAX:
            raise ValueError(f"log.segment.bytes must be between 1 and {_INT32_MAX}, "
                             f"not {self.segment_bytes}")
        if self.segment_ms < 1:
            raise ValueError(f"log.roll.ms must be at least 1, not {self.segment_ms}")
        if self.retention_ms < -1:
            raise ValueError(f"log.retention.ms must be -1 or more, not {self.retention_ms}")
        if self.retention_bytes < -1:
            raise ValueError(f"log.retention.bytes must be -1 or more, not {self.retention_bytes}")
        if self.cache_retain_bytes < -1:
            raise ValueError(f"log.cache.retain.bytes must be -1 or more, "
                             f"not {self.cache_retain_bytes}")
        if not 0 <= self.index_interval_bytes <= _INT32_MAX:
            raise ValueError(f"log.index.interval.bytes must be between 0 and {_INT32_MAX}, "
                             f"not {self.index_interval_bytes}")
