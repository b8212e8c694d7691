"""Producer ids, unique across restarts and brokers (Kafka's ProducerIdManager).

Ids are handed out from a block reserved in the metadata store (``producer-ids.json`` on a
single broker, ``/latest_producer_id_block`` in ZooKeeper) before any id of it is used. After
a crash the broker reserves a fresh block, so an id is never given twice, at the price of
skipping the unused rest of a block.

A block is reserved off the event loop (``StoreCalls``): InitProducerId awaits ``reserve()``,
then takes an id with ``allocate()``, which never waits. While the store cannot be reached
the request gets COORDINATOR_NOT_AVAILABLE, which clients retry; every other request goes on.
"""

from __future__ import annotations

import asyncio

from ..protocol.errors import ErrorCode, KafkaError
from .store import MetadataStore, StoreCalls, StoreUnavailable

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, store: MetadataStore, calls: StoreCalls | None = None) -> None:
        self.store = store
        self.calls = calls or StoreCalls()
        self._next = self._block_end = 0
        self._reserving = asyncio.Lock()

    @property
    def available(self) -> int:
        return self._block_end - self._next

    async def reserve(self, count: int = 1) -> None:
        """Make sure ``count`` ids can be allocated without waiting (at most one block)."""
        async with self._reserving:
            if self.available >= count:
                return
            try:
                start = await self.calls(self.store.allocate_producer_id_block, BLOCK_SIZE)
            except StoreUnavailable as error:
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                 f"no producer id block: {error}") from None
            self._next, self._block_end = start, start + BLOCK_SIZE

    def allocate(self) -> int:
        """The next id of the reserved block (``reserve`` first; never waits)."""
        if self._next >= self._block_end:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                             "no producer id reserved; retry")
        producer_id = self._next
        self._next += 1
        return producer_id

    async def next_id(self) -> int:
        await self.reserve()
        return self.allocate()
