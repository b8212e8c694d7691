"""Where a micro-batch starts and ends, and whether it may follow what a sink already holds.

A sink that stores each batch's end offsets with its output (the HDFS connector's way) holds
the truth about its input position, whatever happens to Spark's checkpoint. This module
makes that truth authoritative:

- ``planned_offsets(batch_df)``: the start and end offsets Spark planned for the micro-batch
  running now, as ``{topic: {"partition": offset}}`` (the Kafka source's JSON, ours or
  Spark's). No public API hands them to ``foreachBatch``: they are read from the running
  query's current ``IncrementalExecution``, whose plan holds one
  ``StreamingDataSourceV2ScanRelation`` per source with its start and end offsets. The
  query is found by the ``sql.streaming.queryId`` local property Spark sets on the thread
  that runs the batch. Anything unexpected (Spark Connect, no such query, several sources
  reading one topic, another Spark version's internals) gives None, and the sinks fall back
  to the offsets seen in the rows (``columns.OffsetTracker`` for the end offsets they store,
  ``row_offsets`` for the check, rule 4 below) - never a failed batch.
- ``decide(...)``: given the last committed marker and the batch, write it, skip it (Spark
  re-running the last batch after a crash), or raise one ``SinkError`` sentence when the
  batch does not continue where the sink stands: a gap (records the sink never received
  would be skipped) or an overlap (records it holds would be written again).

Batch ids alone cannot tell these apart: a query restarted from a new checkpoint counts
from batch 0 again. Offsets can. Rules, with S the sink's stored end offsets and
[start, end) what Spark planned:

1. no marker yet: write;
2. the batch has the last marker's Spark batch id and its end offsets (or either is not
   known): a replay, skip;
3. start and S both known: per partition present in both, start == S, else the error.
   When S was taken from rows (``exact`` false: no planned offsets were known when it was
   written) it may lag behind Spark's end by offsets that gave no row (transaction markers,
   compacted or filtered records), so only start < S (an overlap) is then an error;
4. start unknown but the rows' offsets known (``row_offsets``: each partition's first and
   last offset in the batch, one small aggregation; Spark Connect, where no plan can be
   read): rows all below S are a replay when the batch has the last marker's Spark id
   (skip), else an overlap (the error); rows all at or past S (or in partitions S does not
   know) are new: write, whatever the batch id - a query restarted from the sink's offsets
   with a new checkpoint counts from 0 again, even up to the last marker's id, so ids alone
   would skip its records; some rows below S and some past it: an overlap, the error.
   Gaps cannot be seen from rows. A batch without rows writes nothing but its marker: a
   replay's id is skipped, any other written;
5. nothing known but batch ids: a batch id below the last one committed cannot be a replay
   (Spark re-runs only its last batch), so it is the error too; a higher one is written.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from .errors import SinkError

log = logging.getLogger(__name__)

EndOffsets = dict[str, dict[str, int]]

_SCAN_RELATION = "StreamingDataSourceV2ScanRelation"
_QUERY_ID_PROPERTY = "sql.streaming.queryId"  # StreamExecution.QUERY_ID_KEY


@dataclass(frozen=True)
class Marker:
    """What a sink stored for the last batch it committed for a query."""
    spark_batch_id: int
    end_offsets: EndOffsets | None
    exact: bool  # end_offsets are Spark's planned ones (not taken from rows)


@dataclass(frozen=True)
class Batch:
    """A micro-batch as the sink sees it: its Spark batch id and, if known, its offsets."""
    spark_batch_id: int
    start_offsets: EndOffsets | None = None
    end_offsets: EndOffsets | None = None
    # (first offset, last offset + 1) of the batch's rows per partition: for rule 4
    row_offsets: tuple[EndOffsets, EndOffsets] | None = None


def decide(last: Marker | None, batch: Batch, *, what: str) -> bool:
    """True: write the batch; False: skip it (a replay). A disagreement raises SinkError;
    ``what`` names the query or sink in that sentence (e.g. ``query 'orders'``)."""
    if last is None:
        return True
    if batch.start_offsets is None and batch.row_offsets is not None \
            and last.end_offsets is not None:
        return _decide_by_rows(last, batch, what)
    if batch.spark_batch_id == last.spark_batch_id and (
            batch.end_offsets is None or last.end_offsets is None or not last.exact
            or same_offsets(batch.end_offsets, last.end_offsets)):
        return False
    if batch.start_offsets is not None and last.end_offsets is not None:
        gaps, overlaps = compare(last.end_offsets, batch.start_offsets)
        if overlaps or (gaps and last.exact):
            raise SinkError(disagreement(what, batch, last, gaps if last.exact else [],
                                         overlaps))
        if gaps:
            log.info("%s: batch %d starts past the sink's stored offsets in %s; those were "
                     "taken from rows, so records without a row (markers, filtered or "
                     "compacted records) may lie between", what, batch.spark_batch_id,
                     ", ".join(gaps))
        return True
    if batch.spark_batch_id < last.spark_batch_id:
        raise SinkError(f"batch {batch.spark_batch_id} of {what} comes after batch "
                        f"{last.spark_batch_id} was committed, so it is from another "
                        "checkpoint, and its offsets are not known to check it against the "
                        "sink's; nothing was written (start the query from the sink's offsets, "
                        "or give it a new name).")
    return True


def _decide_by_rows(last: Marker, batch: Batch, what: str) -> bool:
    """Rule 4: where the batch's rows lie against the stored end offsets."""
    assert batch.row_offsets is not None and last.end_offsets is not None  # as decide asks
    first, end = batch.row_offsets
    stored = last.end_offsets
    if not any(end.values()):
        return batch.spark_batch_id != last.spark_batch_id  # no rows: nothing at stake
    _, overlaps = compare(stored, first)
    held = all(partition in stored.get(topic, {})
               and offset <= stored[topic][partition]
               for topic, partitions in end.items() for partition, offset in partitions.items())
    if held and batch.spark_batch_id == last.spark_batch_id:
        return False  # Spark's re-run of the last batch: every row is held already
    if overlaps:
        shown = Batch(batch.spark_batch_id, start_offsets=first)
        raise SinkError(disagreement(what, shown, last, [], overlaps))
    return True


def compare(stored: EndOffsets, start: EndOffsets) -> tuple[list[str], list[str]]:
    """Partitions in both where ``start`` is past ``stored`` (gaps) and before it
    (overlaps), each as ``topic-partition``. Partitions only one side knows are new ones
    (or ones the query no longer reads) and agree."""
    gaps, overlaps = [], []
    for topic in sorted(set(stored) & set(start)):
        for partition in sorted(set(stored[topic]) & set(start[topic]), key=int):
            stored_offset, start_offset = stored[topic][partition], start[topic][partition]
            if start_offset > stored_offset:
                gaps.append(f"{topic}-{partition}")
            elif start_offset < stored_offset:
                overlaps.append(f"{topic}-{partition}")
    return gaps, overlaps


def same_offsets(left: EndOffsets, right: EndOffsets) -> bool:
    return normalise(left) == normalise(right)


def normalise(offsets: EndOffsets) -> EndOffsets:
    """Topics sorted, partitions sorted as numbers, offsets as int (JSON keys as strings)."""
    return {str(topic): {str(partition): int(offset) for partition, offset in
                         sorted(partitions.items(), key=lambda item: int(item[0]))}
            for topic, partitions in sorted(offsets.items())}


def disagreement(what: str, batch: Batch, last: Marker, gaps: list[str],
                 overlaps: list[str]) -> str:
    def at(offsets: EndOffsets | None, names: list[str]) -> str:
        assert offsets is not None  # both known where offsets disagree
        return ", ".join(f"{name} {offsets[name.rsplit('-', 1)[0]][name.rsplit('-', 1)[1]]}"
                         for name in names)

    names = overlaps + gaps
    consequence = []
    if overlaps:
        consequence.append(f"records it holds would be written again in {', '.join(overlaps)}")
    if gaps:
        consequence.append(f"records it never received would be skipped in {', '.join(gaps)}")
    return (f"batch {batch.spark_batch_id} of {what} starts at offsets "
            f"{at(batch.start_offsets, names)} but the sink holds everything up to "
            f"{at(last.end_offsets, names)} (batch {last.spark_batch_id}): "
            f"{' and '.join(consequence)}; nothing was written (is the checkpoint from "
            "another query or older than the sink? start the query from the sink's offsets "
            "with a new checkpoint).")


def planned_offsets(batch_df: Any) -> tuple[EndOffsets, EndOffsets] | None:
    """(start, end) Spark planned for the batch ``batch_df`` is, or None (module docstring)."""
    try:
        return _planned_offsets(batch_df)
    except Exception as error:  # internals moved, or no JVM (Spark Connect): rows instead
        log.debug("the planned offsets of the batch are not available: %s", error)
        return None


def _planned_offsets(batch_df: Any) -> tuple[EndOffsets, EndOffsets] | None:
    from pyspark.sql import SparkSession

    session = batch_df.sparkSession
    query_id = session.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY)
    if not query_id:
        return None  # not inside a streaming query's batch
    # The batch's session is the query's clone; the query is registered with the session
    # that started it, which is the active or default one in the user's process.
    query = None
    for candidate in (session, SparkSession.getActiveSession(), SparkSession.builder.getOrCreate()):
        if candidate is not None:
            query = candidate.streams.get(query_id)
            if query is not None:
                break
    if query is None:
        return None
    execution = query._jsq.streamingQuery().lastExecution()
    if execution is None:
        return None
    starts: list[EndOffsets] = []
    ends: list[EndOffsets] = []
    leaves = execution.logical().collectLeaves().iterator()
    while leaves.hasNext():
        leaf = leaves.next()
        if leaf.nodeName() != _SCAN_RELATION:
            continue
        start, end = _offsets_json(leaf.startOffset()), _offsets_json(leaf.endOffset())
        if start is None or end is None:
            return None  # a source with another offset shape: the rows must tell
        starts.append(start)
        ends.append(end)
    if not ends:
        return None
    topics = [topic for offsets in ends for topic in offsets]
    if len(topics) != len(set(topics)):
        return None  # two sources read one topic: no single position per partition
    merged_start = {topic: parts for offsets in starts for topic, parts in offsets.items()}
    merged_end = {topic: parts for offsets in ends for topic, parts in offsets.items()}
    return normalise(merged_start), normalise(merged_end)


def row_offsets(batch_df: Any) -> tuple[EndOffsets, EndOffsets] | None:
    """Each partition's first offset and last offset + 1 among the batch's rows, from one
    aggregation over its ``topic``, ``partition`` and ``offset`` columns; None without them.

    For when ``planned_offsets`` is None (Spark Connect): rule 4 in the module docstring.
    Only the DataFrame API is used (no ``functions``, which pick classic or Connect by a
    process-wide flag), so it runs in Connect's foreachBatch worker as in classic PySpark."""
    if not {"topic", "partition", "offset"} <= set(batch_df.columns):
        return None
    try:
        return _row_offsets(batch_df)
    except Exception as error:  # columns of other types: batch ids alone decide (rule 5)
        log.debug("the rows' offsets of the batch are not available: %s", error)
        return None


def _row_offsets(batch_df: Any) -> tuple[EndOffsets, EndOffsets]:
    rows = (batch_df.selectExpr("topic", "partition", "offset AS first", "offset AS last")
            .where("topic IS NOT NULL AND partition IS NOT NULL AND offset IS NOT NULL")
            .groupBy("topic", "partition").agg({"first": "min", "last": "max"})
            .selectExpr("topic", "partition", "`min(first)`", "`max(last)`").collect())
    first: EndOffsets = {}
    end: EndOffsets = {}
    for topic, partition, low, high in rows:
        first.setdefault(topic, {})[str(partition)] = int(low)
        end.setdefault(topic, {})[str(partition)] = int(high) + 1
    return normalise(first), normalise(end)


def _offsets_json(option: Any) -> EndOffsets | None:
    """A Scala ``Option[Offset]``'s JSON, if it is Kafka-shaped ``{topic: {partition: n}}``."""
    if option.isEmpty():
        return None
    document = json.loads(option.get().json())
    if not isinstance(document, dict) or not all(
            isinstance(parts, dict) and all(str(p).isdigit() and isinstance(o, int)
                                            and not isinstance(o, bool) for p, o in parts.items())
            for parts in document.values()):
        return None
    return document
