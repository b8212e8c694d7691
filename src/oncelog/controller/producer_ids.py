"""Producer ids, unique across restarts and brokers (Kafka's ProducerIdManager).

Ids are handed out from a block reserved in the metadata store (``producer-ids.json`` on a
single broker, ``/latest_producer_id_block`` in ZooKeeper) before any id of it is used. After
a crash the broker reserves a fresh block, so an id is never given twice, at the price of
skipping the unused rest of a block.
"""

from __future__ import annotations

from .store import MetadataStore

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._next = self._block_end = 0

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._next = self.store.allocate_producer_id_block(BLOCK_SIZE)
            self._block_end = self._next + BLOCK_SIZE
        producer_id = self._next
        self._next += 1
        return producer_id
