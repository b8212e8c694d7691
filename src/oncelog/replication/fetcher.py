"""A follower's fetcher: copies every partition this broker follows from one leader broker
(Kafka's ``ReplicaFetcherThread``, one per leader).

Each round:

1. **Truncate first.** A partition whose leader or leader epoch changed since we last
   checked asks the leader, with OffsetForLeaderEpoch, where our latest epoch ended in the
   leader's log, and truncates there (KIP-101/KIP-279). If the leader never had our latest
   epoch it answers with the largest epoch it had below it; we cut to the smaller of the two
   logs' ends for that epoch and ask again, until both agree. A leader that knows none of
   our epochs (-1) makes us truncate to our high watermark.
2. **Fetch** with ``replica_id`` = our node id from our log end offset, for every partition
   at once, waiting up to ``replica.fetch.wait.max.ms`` at the leader for new data. Batches
   are appended as they are (the leader's offsets and epochs); the leader's high watermark
   comes back with them. Our fetch offset is how the leader learns what we have, which is
   what moves its high watermark and keeps us in the ISR.

Errors: a partition answered FENCED_LEADER_EPOCH or UNKNOWN_TOPIC_OR_PARTITION waits
``replica.fetch.backoff.ms`` (the metadata store will tell us of the new state meanwhile);
UNKNOWN_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER mean the leader has not yet applied the
state we know (brokers learn from the store independently), so they are retried after
20 ms; any back-off ends when the partition's leader epoch changes; OFFSET_OUT_OF_RANGE
with our log end before the leader's log start starts our log over at the leader's start
(retention), otherwise it triggers a new truncation check. A lost connection backs off and
reconnects.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..net.connector import PLAINTEXT, AuthenticationError, Connector
from ..partition import Partition
from ..protocol import messages
from ..protocol.messages import FetchResponse, OffsetForLeaderEpochResponse, builder
from ..protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from ..config import BrokerConfig

log = logging.getLogger(__name__)


class LeaderClient(Protocol):
    """What the fetcher asks its leader through (``net.BrokerClient``: one TCP connection)."""

    async def request(self, request: Any, version: int) -> Any: ...

    def close(self) -> None: ...


# v13 names topics by id (KIP-516): a leader still holding an older incarnation of the topic
# (deleted and created again; leader epochs start over at 0) answers UNKNOWN_TOPIC_ID instead
# of handing over that incarnation's records
FETCH_VERSION = 13
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
# The leader has not applied the state we already know (it learns from the store a moment
# after us): ask again soon, not after a whole replica.fetch.backoff.ms.
_LEADER_CATCHING_UP = {ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                       ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
CATCH_UP_RETRY_S = 0.02
FetchRequest = messages.FetchRequest
FetchTopic = FetchRequest.FetchTopic
EpochRequest = messages.OffsetForLeaderEpochRequest
EpochTopic = EpochRequest.OffsetForLeaderTopic
# kafka-python's constructors, minus their walk over every field of every version
_fetch_request = builder(FetchRequest)
_fetch_topic = builder(FetchTopic)
_fetch_partition = builder(FetchTopic.FetchPartition)


class ReplicaFetcher:
    def __init__(self, node_id: int, leader_id: int, host: str, port: int,
                 partitions: Callable[[], Iterable[Partition]], config: BrokerConfig, *,
                 client: LeaderClient | None = None, connector: Connector = PLAINTEXT,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.node_id = node_id
        self.leader_id = leader_id
        self.address = (host, port)
        self._partitions = partitions  # every local replica (filtered here by leader)
        self.wait_max_ms = config["replica.fetch.wait.max.ms"]
        self.partition_max_bytes = config["replica.fetch.max.bytes"]
        self.response_max_bytes = config["replica.fetch.response.max.bytes"]
        self.backoff_s = config["replica.fetch.backoff.ms"] / 1000
        # how requests reach the leader (the inter-broker listener's protocol, through
        # ``connector``; a simulation passes its own client) and the clock
        self.client: LeaderClient = client or connector.client(
            host, port, timeout_s=self.wait_max_ms / 1000 + 30)
        self.monotonic = monotonic
        self._checked_epoch: dict[str, int] = {}  # partition -> leader epoch we truncated for
        self._retry_at: dict[str, tuple[float, int]] = {}  # partition -> (when, for epoch)
        self.wake = asyncio.Event()

    def __repr__(self) -> str:
        return f"ReplicaFetcher(broker {self.node_id} <- leader {self.leader_id})"

    def followed(self) -> list[Partition]:
        leader_id = self.leader_id
        if not self._retry_at:  # nothing backs off
            return [p for p in self._partitions()
                    if p.leader_id == leader_id and not p.is_leader]
        now = self.monotonic()
        return [p for p in self._partitions()
                if p.leader_id == leader_id and not p.is_leader
                and not self._backing_off(p, now)]

    def _backing_off(self, partition: Partition, now: float) -> bool:
        """A back-off ends early when the partition's leader epoch changed since."""
        until, epoch = self._retry_at.get(str(partition), (0.0, -1))
        return now < until and epoch == partition.leader_epoch

    async def run(self) -> None:
        connected = True
        try:
            while True:
                partitions = self.followed()
                if not partitions:
                    self.wake.clear()
                    try:
                        await asyncio.wait_for(self.wake.wait(), self._idle_wait_s())
                    except TimeoutError:
                        pass
                    continue
                try:
                    await self._truncate_where_needed(partitions)
                    await self._fetch(partitions)
                    if not connected:
                        log.info("%s: connected again", self)
                    connected = True
                except ConnectionError as error:
                    if connected:
                        # a refused login is retried on the connector's longer back-off
                        retry = ("retrying with a back-off from 2 s to 30 s"
                                 if isinstance(error, AuthenticationError)
                                 else f"retrying every {self.backoff_s:.1f} s")
                        log.warning("%s: %s; %s", self, error, retry)
                    connected = False
                    await asyncio.sleep(self.backoff_s)
        finally:
            self.client.close()

    def _idle_wait_s(self) -> float:
        """Until the earliest back-off ends (or a state change wakes us)."""
        now = self.monotonic()
        ends = [until - now for until, _ in self._retry_at.values() if until > now]
        return max(0.005, min(ends, default=self.backoff_s or 0.1))

    # -- truncation ------------------------------------------------------------------------

    async def _truncate_where_needed(self, partitions: list[Partition]) -> None:
        for partition in partitions:
            if self._checked_epoch.get(str(partition)) == partition.leader_epoch:
                continue
            epoch = partition.leader_epoch
            if await self._truncate(partition):
                self._checked_epoch[str(partition)] = epoch

    async def _truncate(self, partition: Partition) -> bool:
        """Cut ``partition`` where its log diverges from the leader's; False to retry."""
        for _ in range(16):
            leader_epoch = partition.leader_epoch
            ours = partition.epoch_cache.latest_epoch
            if ours < 0:
                partition.truncate_to(partition.high_watermark)
                return True
            request = EpochRequest(replica_id=self.node_id, topics=[EpochTopic(
                topic=partition.topic, partitions=[EpochTopic.OffsetForLeaderPartition(
                    partition=partition.index, current_leader_epoch=leader_epoch,
                    leader_epoch=ours)])])
            response: OffsetForLeaderEpochResponse = await self.client.request(
                request, OFFSET_FOR_LEADER_EPOCH_VERSION)
            answer = response.topics[0].partitions[0]
            if partition.removed:
                return False  # deleted while we asked (simulation seed 119)
            if partition.leader_epoch != leader_epoch or partition.is_leader:
                return False  # our state moved while we asked; start again
            if answer.error_code != ErrorCode.NONE:
                self._retry_later(partition, ErrorCode(answer.error_code))
                return False
            if answer.leader_epoch < 0 or answer.end_offset < 0:
                # the leader knows no epoch at or below ours (UNDEFINED_EPOCH_OFFSET): Kafka
                # truncates to the high watermark (seed 2399 truncated to -1)
                partition.truncate_to(partition.high_watermark)
                return True
            if answer.leader_epoch == ours:
                partition.truncate_to(min(answer.end_offset, partition.log_end_offset))
                return True
            _, our_end = partition.end_offset_for_epoch(answer.leader_epoch)
            if our_end < 0:  # we know no epoch at or below the leader's: its end bounds us
                our_end = partition.log_end_offset
            partition.truncate_to(min(answer.end_offset, our_end))
        log.error("%s: %s did not settle where to truncate", self, partition)
        return False

    # -- fetching --------------------------------------------------------------------------

    async def _fetch(self, partitions: list[Partition]) -> None:
        ready = [p for p in partitions if self._checked_epoch.get(str(p)) == p.leader_epoch]
        if not ready:  # truncation must be retried first; partitions backing off are not here
            await asyncio.sleep(CATCH_UP_RETRY_S)
            return
        asked = {(p.topic_id, p.index): (p, p.leader_epoch, p.log_end_offset) for p in ready}
        topics: dict[str, list[FetchTopic.FetchPartition]] = {}
        for partition in ready:
            topics.setdefault(partition.topic_id, []).append(_fetch_partition(
                partition=partition.index,
                current_leader_epoch=partition.leader_epoch,
                fetch_offset=partition.log_end_offset, log_start_offset=partition.log_start_offset,
                partition_max_bytes=self.partition_max_bytes))
        request = _fetch_request(
            replica_id=self.node_id, max_wait_ms=self.wait_max_ms, min_bytes=1,
            max_bytes=self.response_max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[_fetch_topic(topic_id=_uuid(t), partitions=ps)
                    for t, ps in topics.items()],
            forgotten_topics_data=[], rack_id="")
        response: FetchResponse = await self.client.request(request, FETCH_VERSION)
        for topic in response.responses:
            for entry in topic.partitions:
                found = asked.get((uuid_text(topic.topic_id), entry.partition_index))
                if found is not None:
                    self._apply(*found, entry)

    def _apply(self, partition: Partition, leader_epoch: int, fetch_offset: int,
               entry: FetchResponse.FetchableTopicResponse.PartitionData) -> None:
        if (partition.removed or partition.leader_epoch != leader_epoch or partition.is_leader
                or partition.log_end_offset != fetch_offset):
            return  # the partition moved on while we waited: this answer is stale
        code = ErrorCode(entry.error_code)
        try:
            if code == ErrorCode.NONE:
                # a view of the client's buffer (decode_response_views), None for no records
                partition.append_as_follower(cast("memoryview | None", entry.records))
                partition.update_follower_high_watermark(entry.high_watermark)
            elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                self._out_of_range(partition, entry.log_start_offset)
            else:
                self._retry_later(partition, code)
        except KafkaError as error:
            log.error("%s: cannot append what leader %d sent: %s; checking where we diverge",
                      partition, self.leader_id, error)
            self._checked_epoch.pop(str(partition), None)
            self._retry_later(partition, error.code)

    def _out_of_range(self, partition: Partition, leader_log_start: int) -> None:
        if 0 <= partition.log_end_offset < leader_log_start:
            partition.reset_to(leader_log_start)
        else:
            self._checked_epoch.pop(str(partition), None)

    def _retry_later(self, partition: Partition, code: ErrorCode) -> None:
        delay_s = min(CATCH_UP_RETRY_S, self.backoff_s) if code in _LEADER_CATCHING_UP \
            else self.backoff_s
        log.debug("%s: %s from leader %d; retrying in %.2f s", partition, code.name,
                  self.leader_id, delay_s)
        self._retry_at[str(partition)] = (self.monotonic() + delay_s, partition.leader_epoch)


# A topic id in the two forms a fetch round trip uses, converted once per id (each
# conversion is a few microseconds of pure Python; a follower makes two per round).
_uuid = functools.lru_cache(maxsize=4096)(uuid.UUID)
uuid_text = functools.lru_cache(maxsize=4096)(str)
