"""Per-partition offsets as Spark's checkpoint stores them, and how a trigger's limit splits.

Spark keeps a source's offsets as JSON and compares two of them as strings, so the same
offsets must always serialise the same way: ``to_json`` sorts topics by name and partitions
by number (as Spark's Kafka source does: ``{"orders": {"0": 120, "1": 98}}``). Inside the
source offsets are a ``dict[(topic, partition), next offset]``.
"""

from __future__ import annotations

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


def to_json(offsets: Offsets) -> dict:
    """The checkpoint form: ``{topic: {"partition": offset}}`` in a fixed order."""
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return result


def from_json(document: dict) -> Offsets:
    return {(topic, int(partition)): int(offset)
            for topic, partitions in document.items()
            for partition, offset in partitions.items()}


def limit_offsets(start: Offsets, latest: Offsets, max_records: int) -> Offsets:
    """End offsets that take at most ``max_records`` records in all, shared between partitions
    in proportion to what each has waiting (Spark's Kafka source does the same), at least one
    from every partition that has any. Partitions not in ``start`` start at 0 here."""
    waiting = {tp: max(0, latest[tp] - start.get(tp, 0)) for tp in latest}
    total = sum(waiting.values())
    if total <= max_records:
        return dict(latest)
    end: Offsets = {}
    remaining = max_records
    for tp in sorted(waiting):
        begin = latest[tp] - waiting[tp]
        share = waiting[tp] * max_records // total
        if waiting[tp] and share == 0 and remaining > 0:
            share = 1
        share = min(share, remaining, waiting[tp])
        remaining -= share
        end[tp] = begin + share
    # Integer division leaves a few records unallocated: hand them out in order.
    for tp in sorted(waiting):
        if remaining <= 0:
            break
        extra = min(remaining, latest[tp] - end[tp])
        end[tp] += extra
        remaining -= extra
    return end
