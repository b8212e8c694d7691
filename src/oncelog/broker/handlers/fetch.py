"""Fetch (API key 1), versions 4-13, for consumers and follower replicas.

Behaviour:
- Reads whole batches from each requested partition's fetch offset, bounded by the
  partition's ``partition_max_bytes`` and the response's ``max_bytes`` (capped by the broker's
  ``fetch.max.bytes``). The first partition with data returns at least one batch even if it
  is larger than either limit (KIP-74), so a large batch never stalls a consumer.
- Reads stop at the high watermark (``read_uncommitted``) or the last stable offset
  (``read_committed``). A ``read_committed`` answer with records also lists the aborted
  transactions (producer id, first offset) that overlap them, sorted by first offset, from
  the partition's ``.txnindex`` files: the client drops those producers' records from each
  first offset up to their ABORT marker. The list is bounded by the offset after the last
  batch returned (a ``FileRegion`` knows it without being read); an empty answer has an
  empty list, and ``read_uncommitted`` a null one.
- A fetch offset outside [log start, log end] answers OFFSET_OUT_OF_RANGE, so the client's
  ``auto.offset.reset`` fires.
- Long polling: if fewer than ``min_bytes`` are available and no partition has an error, the
  request waits on every requested partition and is answered as soon as ``min_bytes`` are
  there, or when ``max_wait_ms`` expires - not only at the timeout.
- Record sets of ``SPLICE_MIN_BYTES`` or more are not read: they are ``FileRegion``s the
  server sends from the segment file with ``os.sendfile`` (``protocol.fetch_body`` leaves
  them out of the encoded body).
- Fetch sessions (KIP-227) are not kept: every response has session id 0, which tells the
  client to send full fetch requests.
- ``current_leader_epoch`` (v9+) is checked: newer than ours is UNKNOWN_LEADER_EPOCH, older
  is FENCED_LEADER_EPOCH.
- Only the leader serves fetches (NOT_LEADER_OR_FOLLOWER elsewhere; no KIP-392 follower
  reads). A request with ``replica_id >= 0`` comes from a follower broker: it reads up to
  the log end, not the HW, and its fetch offset is that follower's log end offset, which may
  advance the HW and bring it back into the ISR (``Partition.read_for_follower``).
- v13 (KIP-516) names topics by id: a partition of a topic this broker knows under another
  id (deleted and created again) or not at all is UNKNOWN_TOPIC_ID. oncelog's followers
  fetch with v13, so a follower of a topic's new incarnation never copies records from a
  leader still holding the old one (both start at leader epoch 0; found by the cluster
  simulation). Clients are offered v4-v12 (``ADVERTISED_VERSIONS``) until topic ids are
  supported end to end.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from typing import cast

from ...partition import IsolationLevel, Partition
from ...protocol.api_keys import ApiKey
from ...protocol.batches import iter_headers
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.fetch_body import SPLICE_MIN_BYTES, Part, records_of
from ...protocol.messages import FetchRequest, FetchResponse, builder
from ...security.acl import AclOperation, ResourceType
from ..context import RequestContext

API_KEY = ApiKey.FETCH
VERSIONS = range(4, 14)
ADVERTISED_VERSIONS = range(4, 13)

TopicData = FetchResponse.FetchableTopicResponse
PartitionData = TopicData.PartitionData
AbortedTransaction = PartitionData.AbortedTransaction
# kafka-python's constructors, minus their walk over every field of every version
_response = builder(FetchResponse)
_topic_data = builder(TopicData)
_partition_data = builder(PartitionData)


async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    if request.replica_id >= 0:  # a follower: replication is the cluster's own action
        if not ctx.allowed(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
            return error_response(request, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    denied: frozenset[str] = frozenset()
    if request.replica_id < 0 and ctx.services.acls.authorizer.enabled:
        denied = frozenset(name for t in request.topics if (name := (
            _topic_named(ctx, t.topic_id) if ctx.api_version >= 13 else t.topic)) is not None
            and not ctx.allowed(AclOperation.READ, ResourceType.TOPIC, name))
    isolation = IsolationLevel.from_wire(request.isolation_level)
    max_bytes = min(request.max_bytes, ctx.services.config["fetch.max.bytes"])
    loop = asyncio.get_running_loop()  # its clock: a simulation's loop keeps virtual time
    deadline = loop.time() + max(request.max_wait_ms, 0) / 1000
    while True:
        topics, total_bytes, has_error, partitions = _read_all(ctx, request, isolation, max_bytes,
                                                               denied)
        remaining = deadline - loop.time()
        if total_bytes >= request.min_bytes or has_error or remaining <= 0:
            return _response(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0,
                             responses=topics)
        await _wait_for_data(partitions, remaining)


async def _wait_for_data(partitions: list[Partition], timeout_s: float) -> None:
    waiter = asyncio.get_running_loop().create_future()
    for partition in partitions:
        partition.add_data_waiter(waiter)
    try:
        await asyncio.wait_for(waiter, timeout_s)
    except TimeoutError:
        pass
    finally:
        for partition in partitions:
            partition.remove_data_waiter(waiter)


def _read_all(ctx: RequestContext, request: FetchRequest, isolation: IsolationLevel,
              max_bytes: int, denied: frozenset[str] = frozenset()
              ) -> tuple[list[TopicData], int, bool, list[Partition]]:
    total, has_error = 0, False
    topics: list[TopicData] = []
    partitions: list[Partition] = []
    by_id = ctx.api_version >= 13
    for fetch_topic in request.topics:
        entries = []
        name = _topic_named(ctx, fetch_topic.topic_id) if by_id else fetch_topic.topic
        for fetch_partition in fetch_topic.partitions:
            if name is None or name in denied:
                entry = _entry(fetch_partition.partition,
                               ErrorCode.UNKNOWN_TOPIC_ID if name is None
                               else ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, isolation, b"")
                if name is not None:
                    entry.aborted_transactions = []  # as Kafka's refusal has it
                entries.append(entry)
                has_error = True
                continue
            entry, partition = _read_partition(ctx, name, fetch_partition,
                                               isolation, max_bytes - total, total == 0,
                                               request.replica_id)
            entries.append(entry)
            if partition is not None:
                partitions.append(partition)
            total += len(records_of(entry) or b"")
            has_error = has_error or entry.error_code != ErrorCode.NONE
        topics.append(_topic_data(topic=name or "", topic_id=fetch_topic.topic_id,
                                  partitions=entries) if by_id
                      else _topic_data(topic=fetch_topic.topic, partitions=entries))
    return topics, total, has_error, partitions


def _topic_named(ctx: RequestContext, topic_id: uuid.UUID) -> str | None:
    """The name of the topic this broker knows under ``topic_id`` (None: none)."""
    wanted = _text_of(topic_id)
    for name, topic in ctx.services.partitions.topics.items():
        if topic.record.topic_id == wanted:
            return name
    return None


_text_of = functools.lru_cache(maxsize=4096)(str)  # a topic id's text, made once per id


def _read_partition(ctx: RequestContext, topic: str,
                    request_partition: FetchRequest.FetchTopic.FetchPartition,
                    isolation: IsolationLevel, budget: int, first: bool, replica_id: int
                    ) -> tuple[PartitionData, Partition | None]:
    index = request_partition.partition
    partition = None
    try:
        partition = ctx.services.partitions.get_partition(topic, index)
        partition.check_leader_epoch(request_partition.current_leader_epoch)
        limit = min(request_partition.partition_max_bytes, max(budget, 0))
        records: Part = b""
        if replica_id >= 0:
            records = partition.read_for_follower(replica_id, request_partition.fetch_offset,
                                                  limit if limit > 0 else 0, SPLICE_MIN_BYTES)
        elif limit > 0 or first:
            records = partition.read(request_partition.fetch_offset, limit, isolation,
                                     min_one_batch=first, region_min_bytes=SPLICE_MIN_BYTES)
    except KafkaError as error:
        # As Kafka answers a consumer: -1 offsets with any error, and no aborted list when
        # the read itself failed (an unknown partition, refused before reading, keeps [] when
        # read_committed). One of oncelog's followers out of range reads the leader's log
        # start offset here (Kafka's follower asks ListOffsets instead).
        known = error.code == ErrorCode.OFFSET_OUT_OF_RANGE and replica_id >= 0
        return _entry(index, error.code, partition if known else None,
                      isolation if partition is None else None, b""), None
    entry = _entry(index, ErrorCode.NONE, partition, isolation, records)
    if isolation is IsolationLevel.READ_COMMITTED and replica_id < 0 and len(records):
        entry.aborted_transactions = [
            AbortedTransaction(producer_id=producer_id, first_offset=first_offset)
            for producer_id, first_offset in partition.aborted_transactions(
                request_partition.fetch_offset, _end_offset(records, partition))]
    return entry, partition


def _end_offset(records: Part, partition: Partition) -> int:
    """The offset after the last batch in ``records``: a region knows it, a small buffer
    (below SPLICE_MIN_BYTES) is walked header by header; the LSO bounds it otherwise."""
    next_offset = getattr(records, "next_offset", -1)
    if next_offset < 0 and isinstance(records, (bytes, bytearray, memoryview)):
        for _, header in iter_headers(records):
            next_offset = header.next_offset
    return next_offset if next_offset >= 0 else partition.last_stable_offset


def _entry(index: int, code: ErrorCode, partition: Partition | None,
           isolation: IsolationLevel | None, records: Part) -> PartitionData:
    """One partition's answer; ``isolation`` None for an error (no aborted list)."""
    return _partition_data(
        partition_index=index, error_code=code,
        high_watermark=partition.high_watermark if partition is not None else -1,
        last_stable_offset=partition.last_stable_offset if partition is not None else -1,
        log_start_offset=partition.log_start_offset if partition is not None else -1,
        aborted_transactions=[] if isolation is IsolationLevel.READ_COMMITTED else None,
        preferred_read_replica=-1,
        records=cast(bytes, records))  # or a FileRegion, sent as it lies (protocol.fetch_body)


def error_response(request: FetchRequest, code: ErrorCode, message: str | None) -> FetchResponse:
    return FetchResponse(throttle_time_ms=0, error_code=code, session_id=0, responses=[
        TopicData(topic=t.topic, topic_id=t.topic_id, partitions=[
            _entry(p.partition, code, None, None, b"")
            for p in t.partitions])
        for t in request.topics])
