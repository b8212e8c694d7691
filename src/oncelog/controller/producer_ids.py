"""Producer ids, unique across restarts (Kafka's ProducerIdManager, single-broker form).

Ids are handed out from a block reserved in ``producer-ids.json`` before any id of it is
used. After a crash the broker starts at the end of the last reserved block, so an id is
never given twice, at the price of skipping the unused rest of a block.
"""

from __future__ import annotations

from .metadata_store import LocalMetadataStore

BLOCK_SIZE = 1000
DOCUMENT = "producer-ids.json"


class ProducerIdManager:
    def __init__(self, store: LocalMetadataStore) -> None:
        self.store = store
        document = store.load_document(DOCUMENT) or {}
        self._next = self._block_end = int(document.get("block_end", 0))

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            self.store.save_document(DOCUMENT, {"version": 1, "block_end": self._block_end})
        producer_id = self._next
        self._next += 1
        return producer_id
