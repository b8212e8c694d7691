"""``java.util.HashSet<String>``'s iteration order, for orders a ZooKeeper client can see.

ZooKeeper keeps a node's children (``DataNode``: ``new HashSet<String>(8)``) and each session's
ephemeral paths (``DataTree.ephemerals``: ``new HashSet<String>()``) in Java HashSets, so
``getChildren`` lists children in that set's iteration order and a session's end deletes its
ephemerals (firing watches) in the order of a clone of it. ``JavaHashSet`` computes both as
JDK 17's ``HashMap`` would; tests/unit/simulation/test_memory_zookeeper.py holds it to lists
JDK 17.0.15 printed.

Not reproduced: a bucket of 9 or more colliding entries in a table of 64 or more buckets
becomes a red-black tree bin in Java, iterated in another order; here it keeps list order
(it takes many paths with colliding hashes under one parent or session).
"""

from __future__ import annotations

from collections.abc import Iterator


def _java_string_hash(text: str) -> int:
    """``String.hashCode()`` as an unsigned 32-bit number (over UTF-16 code units)."""
    encoded = text.encode("utf-16-be", "surrogatepass")
    value = 0
    for index in range(0, len(encoded), 2):
        value = (value * 31 + (encoded[index] << 8 | encoded[index + 1])) & 0xFFFFFFFF
    return value


def _spread(text: str) -> int:
    """``HashMap.hash(key)``: the hash with its high half folded into the low half."""
    value = _java_string_hash(text)
    return value ^ (value >> 16)


def _table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two at least ``capacity`` (1 at least)."""
    size = 1
    while size < capacity:
        size *= 2
    return size


class JavaHashSet:
    """The iteration order of a ``java.util.HashSet<String>`` (JDK 17's ``HashMap``).

    Entries iterate by bucket (``hash & (capacity - 1)``), and within a bucket in the order they
    were added (resizing splits a bucket keeping that order). The table is allocated at the first
    add with the initial capacity, doubles when the size passes three quarters of it, and also
    when a bucket reaches 9 entries while the table is under 64 (``treeifyBin`` resizes instead of
    making a tree bin). It never shrinks."""

    __slots__ = ("_members", "_initial_capacity", "_capacity")

    def __init__(self, initial_capacity: int = 16) -> None:
        self._members: dict[str, int] = {}  # insertion order; value: the spread hash
        self._initial_capacity = _table_size_for(initial_capacity)
        self._capacity = 0

    def add(self, text: str) -> None:
        if text in self._members:
            return
        spread = _spread(text)
        self._members[text] = spread
        if self._capacity == 0:
            self._capacity = self._initial_capacity
        mask = self._capacity - 1
        if self._capacity < 64 and sum(1 for other in self._members.values()
                                       if other & mask == spread & mask) >= 9:
            self._capacity *= 2
        if len(self._members) > int(self._capacity * 0.75):
            self._capacity *= 2

    def discard(self, text: str) -> None:
        self._members.pop(text, None)

    def __contains__(self, text: object) -> bool:
        return text in self._members

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ordered(self._members, self._capacity))

    def clone_order(self) -> list[str]:
        """The iteration order of ``clone()`` (``HashMap.putMapEntries`` pre-sizes the copy to
        ``tableSizeFor((int) (size / 0.75f + 1))`` and adds the entries in iteration order)."""
        capacity = _table_size_for(int(len(self._members) / 0.75 + 1.0))
        return self._ordered({text: self._members[text] for text in self}, capacity)

    @staticmethod
    def _ordered(members: dict[str, int], capacity: int) -> list[str]:
        mask = max(capacity, 1) - 1
        return sorted(members, key=lambda text: members[text] & mask)  # stable: bucket order


__all__ = ["JavaHashSet"]
