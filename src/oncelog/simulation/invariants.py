"""What must hold after every step of a simulated run, and at its end.

``Observer.check()`` looks at the store (``MemoryZooKeeper``, read directly: the truth) and
at every live broker's view, and remembers what it saw before:

- **one leader per partition and epoch**: no two states of one partition of one topic
  incarnation ever named different leaders in the same leader epoch, and epochs only grow
  with the state's version;
- **no split brain**: at any moment at most one broker acts as a partition's leader (leads
  it by its own view and holds a valid leadership lease), per incarnation of its topic;
- **metadata only moves forward on a broker**: a partition state a broker holds is never
  older than one it held before;
- **no topic forgotten, none resurrected**: a broker drops a topic incarnation only when
  the store no longer has it, and never takes back an incarnation it dropped;
- **the high watermark never moves back** on a broker (while it runs).

``Observer.converged()`` is for the end, after every fault healed and a quiet while: every
live broker knows exactly the store's topics (incarnation, partition count) and partition
states, the live brokers and the controller. ``durable()`` then: every record acknowledged
with acks=all is in its partition's log (unless the topic was deleted), and every in-sync
replica holds the leader's records up to the high watermark, and no record of an
idempotent producer is in a log twice (however often it was retried).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from kazoo.protocol.states import ZnodeStat

from ..controller.zookeeper_store import TOPICS_PATH
from ..storage import FileRegion

if TYPE_CHECKING:
    from ..partition import PartitionManager
    from .cluster import Node, World

Incarnation = tuple[str, int]  # topic name, created_version
CHROOT = "/oncelog"


class Observer:
    def __init__(self, world: World) -> None:
        self.world = world
        # (topic, czxid, partition, epoch) -> leader, from every state the store held
        self.leaders: dict[tuple[str, int, int, int], int] = {}
        # (topic, czxid, partition) -> (version, epoch) last seen in the store
        self.versions: dict[tuple[str, int, int], tuple[int, int]] = {}
        # node -> (topic, partition) -> the order of the state it held
        self.held: dict[int, dict[tuple[str, int], tuple[int, int]]] = {}
        # node -> incarnations it held / dropped
        self.known: dict[int, set[Incarnation]] = {}
        self.dropped: dict[int, set[Incarnation]] = {}
        # node -> (topic, created_version, partition) -> high watermark
        self.high_watermarks: dict[int, dict[tuple[str, int, int], int]] = {}
        # node -> (topic, created_version, partition, leader epoch) -> LSO while it leads
        self.stable_offsets: dict[int, dict[tuple[str, int, int, int], int]] = {}

    # -- the store ---------------------------------------------------------------------------

    def store_topics(self) -> dict[str, tuple[int, dict[int, dict[str, Any]]]]:
        """name -> (czxid, partition -> state document with its version) in the store."""
        topics = {}
        for name in self._children(TOPICS_PATH):
            path = f"{TOPICS_PATH}/{name}"
            found = self._node(path)
            if found is None:
                continue
            states = {}
            for index in self._children(f"{path}/partitions"):
                state = self._node(f"{path}/partitions/{index}/state")
                if state is not None:
                    document = json.loads(state[0] or b"{}")
                    document["_version"] = state[1].version
                    document["_czxid"] = state[1].czxid
                    states[int(index)] = document
            topics[name] = (found[1].czxid, states)
        return topics

    def _node(self, path: str) -> tuple[bytes | None, ZnodeStat] | None:
        """A znode as the store holds it (read without a session: the observer is not a
        client)."""
        node = self.world.zookeeper._nodes.get(CHROOT + path)
        return None if node is None else (node.data, node.stat())

    def _children(self, path: str) -> list[str]:
        node = self.world.zookeeper._nodes.get(CHROOT + path)
        return sorted(node.children) if node is not None else []

    # -- after every step --------------------------------------------------------------------

    def check(self) -> list[str]:
        problems: list[str] = []
        store = self.store_topics()
        self._check_store(store, problems)
        self._check_leaders(problems)
        for node in self.world.nodes.values():
            if node.alive and node.partitions is not None:
                self._check_node(node.node_id, node.partitions, store, problems)
        return problems

    def _check_store(self, store: dict[str, tuple[int, dict[int, dict[str, Any]]]],
                     problems: list[str]) -> None:
        for name, (czxid, states) in store.items():
            for index, document in states.items():
                epoch, leader = int(document["leader_epoch"]), int(document["leader"])
                key = (name, czxid, index, epoch)
                if leader >= 0 and self.leaders.setdefault(key, leader) != leader:
                    problems.append(f"{name}-{index} epoch {epoch} had leaders "
                                    f"{self.leaders[key]} and {leader}")
                seen = self.versions.get((name, czxid, index))
                now = (int(document["_version"]), epoch)
                if seen is not None and (now[0] < seen[0] or now[1] < seen[1]):
                    problems.append(f"{name}-{index}: the store's state went back from "
                                    f"version/epoch {seen} to {now}")
                self.versions[(name, czxid, index)] = now

    def _check_leaders(self, problems: list[str]) -> None:
        acting: dict[tuple[str, int, int], list[int]] = {}
        for node in self.world.nodes.values():
            if not node.alive or node.partitions is None or node.lease is None:
                continue
            if not node.lease.valid():
                continue
            # per incarnation: a broker cut off from ZooKeeper may lead a deleted topic's
            # old incarnation while another leads the new one (nothing it acknowledges with
            # acks=all can be lost with it: its ISR cannot shrink to itself without the store)
            for name, topic in node.partitions.topics.items():
                for index, partition in topic.local.items():
                    if partition.is_leader:
                        acting.setdefault((name, topic.record.created_version, index),
                                          []).append(node.node_id)
        for (name, _created, index), nodes in acting.items():
            if len(nodes) > 1:
                problems.append(f"{name}-{index}: brokers {nodes} all act as its leader")

    def _check_node(self, node_id: int, partitions: PartitionManager,
                    store: dict[str, tuple[int, dict[int, dict[str, Any]]]],
                    problems: list[str]) -> None:
        held = self.held.setdefault(node_id, {})
        known = self.known.setdefault(node_id, set())
        dropped = self.dropped.setdefault(node_id, set())
        now: set[Incarnation] = set()
        for name, topic in partitions.topics.items():
            incarnation = (name, topic.record.created_version)
            now.add(incarnation)
            if incarnation in dropped:
                problems.append(f"broker {node_id} took back {name} (created at "
                                f"{incarnation[1]}) after dropping it")
            marks = self.high_watermarks.setdefault(node_id, {})
            for index, partition in topic.local.items():
                mark = (name, topic.record.created_version, index)
                before_hw = marks.get(mark, -1)
                if partition.high_watermark < before_hw:
                    problems.append(f"broker {node_id}: the high watermark of {name}-{index} "
                                    f"went back from {before_hw} to {partition.high_watermark}")
                marks[mark] = partition.high_watermark
                if partition.is_leader:
                    stable = self.stable_offsets.setdefault(node_id, {})
                    lso_key = (*mark, partition.leader_epoch)
                    before_lso = stable.get(lso_key, -1)
                    if partition.last_stable_offset < before_lso:
                        problems.append(f"broker {node_id}: the last stable offset of "
                                        f"{name}-{index} went back from {before_lso} to "
                                        f"{partition.last_stable_offset}")
                    stable[lso_key] = partition.last_stable_offset
            for index, state in enumerate(topic.states):
                key = (name, index)
                before = held.get(key)
                if before is not None and state.order < before and \
                        state.created_version >= before[0]:
                    problems.append(f"broker {node_id}: {name}-{index} went back from "
                                    f"{before} to {state.order}")
                held[key] = state.order
        for incarnation in known - now:
            name, czxid = incarnation
            in_store = store.get(name)
            if in_store is not None and in_store[0] == czxid:
                problems.append(f"broker {node_id} forgot {name} (created at {czxid}), which "
                                "the store still has")
            dropped.add(incarnation)
        self.known[node_id] = now

    def forget_node(self, node_id: int) -> None:
        """A restarted broker starts from its files: what it held in memory is gone."""
        self.held.pop(node_id, None)
        self.known.pop(node_id, None)
        self.dropped.pop(node_id, None)
        self.high_watermarks.pop(node_id, None)
        self.stable_offsets.pop(node_id, None)

    # -- at the end --------------------------------------------------------------------------

    def converged(self) -> list[str]:
        problems: list[str] = []
        store = self.store_topics()
        live = sorted(int(n) for n in self._children("/brokers/ids"))
        found = self._node("/controller")
        controller = json.loads(found[0] or b"{}")["brokerid"] if found else -1
        for node in self.world.nodes.values():
            if not node.alive or node.partitions is None or node.brokers is None:
                problems.append(f"{node.name} is not running")
                continue
            view = {name: (topic.record.created_version, topic.partition_count)
                    for name, topic in node.partitions.topics.items()}
            expected = {name: (czxid, len(states)) for name, (czxid, states) in store.items()}
            if view != expected:
                problems.append(f"{node.name} holds topics {view}, the store {expected}")
                continue
            for name, topic in node.partitions.topics.items():
                for index, state in enumerate(topic.states):
                    document = store[name][1].get(index)
                    if document is None or (state.version, state.leader, state.leader_epoch) \
                            != (document["_version"], document["leader"],
                                document["leader_epoch"]):
                        problems.append(f"{node.name}: {name}-{index} is {state}, the store "
                                        f"{document}")
            if sorted(node.brokers.live) != live:
                problems.append(f"{node.name} sees live brokers {sorted(node.brokers.live)}, "
                                f"the store {live}")
            if node.brokers.controller_id != controller:
                problems.append(f"{node.name} sees controller {node.brokers.controller_id}, "
                                f"the store {controller}")
        return problems

    def durable(self) -> list[str]:
        problems: list[str] = []
        store = self.store_topics()
        nodes = self.world.nodes
        for (name, czxid, index), values in sorted(self.world.acknowledged.items()):
            in_store = store.get(name)
            if in_store is None or in_store[0] != czxid:
                continue  # deleted since: its records went with it
            state = in_store[1].get(index)
            leader = nodes.get(int(state["leader"])) if state else None
            if leader is None:
                problems.append(f"{name}-{index} has no leader at the end ({state})")
                continue
            held = set(values_of(leader, name, index))
            missing = [v for v in values if v not in held]
            if missing:
                problems.append(f"{name}-{index}: {len(missing)} acknowledged records are not "
                                f"in leader {leader.node_id}'s log, e.g. {missing[:3]}")
        idempotent = self.world.idempotent
        for name, (_czxid, states) in sorted(store.items()):
            for index, state in sorted(states.items()):
                leader = nodes.get(int(state["leader"]))
                if leader is None:
                    continue
                counts = Counter(values_of(leader, name, index))
                twice = sorted(v for v, n in counts.items() if n > 1 and v in idempotent)
                if twice:
                    problems.append(f"{name}-{index}: an idempotent producer's record is in "
                                    f"leader {leader.node_id}'s log more than once: {twice[:3]}")
                committed = values_of(leader, name, index, committed_only=True)
                for member in state["isr"]:
                    node = nodes.get(int(member))
                    if node is None or node is leader:
                        continue
                    theirs = values_of(node, name, index)
                    if theirs[:len(committed)] != committed:
                        problems.append(f"{name}-{index}: in-sync replica {member} holds "
                                        f"{theirs[:5]}..., the leader {committed[:5]}...")
        return problems

    def transactions(self) -> list[str]:
        """At the end, every transaction as a ``read_committed`` consumer of each partition's
        leader sees it: a committed one wholly, an aborted one not at all, one whose outcome
        its client never learnt all or nothing; no record twice; and none left open - every
        partition's last stable offset has reached its high watermark."""
        problems: list[str] = []
        store = self.store_topics()
        nodes = self.world.nodes
        views: dict[tuple[str, int, int], Counter[bytes | None] | None] = {}

        def leader_of(name: str, index: int) -> Node | None:
            state = store[name][1].get(index)
            return nodes.get(int(state["leader"])) if state else None

        def view(key: tuple[str, int, int]) -> Counter[bytes | None] | None:
            name, czxid, index = key
            if name not in store or store[name][0] != czxid:
                return None  # deleted since: its records went with it
            if key not in views:
                leader = leader_of(name, index)
                views[key] = None if leader is None else Counter(
                    read_committed(leader, name, index))
            return views[key]

        for txn in self.world.transactions:
            counted = [(key, value, found[value]) for key, value in txn.values
                       if (found := view(key)) is not None]
            visible = [f"{value!r} on {key[0]}-{key[2]}" for key, value, n in counted if n]
            what = f"transaction of {txn.transactional_id} (producer {txn.producer_id} " \
                   f"epoch {txn.epoch}, {txn.outcome})"
            if any(n > 1 for _key, _value, n in counted):
                problems.append(f"{what}: a record is read more than once")
            if (txn.outcome == "aborted" or not txn.all_acknowledged) and visible:
                # a batch not acknowledged means no commit was asked for
                problems.append(f"{what}: read_committed reads {visible[:3]}")
            elif txn.outcome == "committed" and len(visible) < len(counted):
                problems.append(f"{what}: read_committed reads only {visible[:3]} of "
                                f"{len(counted)} records")
            elif 0 < len(visible) < len(counted):
                problems.append(f"{what}: read_committed reads part of it: {visible[:3]} of "
                                f"{len(counted)} records")
        for name, (_czxid, states) in sorted(store.items()):
            for index in sorted(states):
                leader = leader_of(name, index)
                topic = leader.partitions.topics.get(name) \
                    if leader is not None and leader.partitions is not None else None
                partition = topic.local.get(index) if topic is not None else None
                if partition is not None and \
                        partition.last_stable_offset < partition.high_watermark:
                    problems.append(
                        f"{name}-{index}: a transaction is left open on leader "
                        f"{partition.replica_id}: last stable offset "
                        f"{partition.last_stable_offset}, high watermark "
                        f"{partition.high_watermark}")
        return problems


def values_of(node: Node, topic: str, index: int, committed_only: bool = False
              ) -> list[bytes | None]:
    """The values in ``node``'s replica of a partition, in offset order (below the high
    watermark when ``committed_only``)."""
    from ..protocol.batches import iter_headers
    from ..protocol.records import decode_records
    if node.partitions is None or topic not in node.partitions.topics:
        return []
    partition = node.partitions.topics[topic].local.get(index)
    if partition is None:
        return []
    end = partition.high_watermark if committed_only else partition.log_end_offset
    read = partition.log.read(partition.log_start_offset, 1 << 30, max_offset=end)
    data = read.read() if isinstance(read, FileRegion) else bytes(read)
    values: list[bytes | None] = []
    for position, header in iter_headers(data):
        if header.base_offset >= end:
            break
        if not header.is_control:
            batch = data[position:position + header.size]
            values.extend(record.value for record in decode_records(batch, header))
    return values


def read_committed(node: Node, topic: str, index: int) -> list[bytes | None]:
    """The values a ``read_committed`` consumer gets from ``node``'s replica: below the LSO,
    without the records of aborted transactions, filtered as Kafka's consumer filters them
    (the partition's aborted-transaction list; a producer's batches skipped from its entry's
    first offset up to its ABORT marker)."""
    from ..protocol.batches import iter_headers
    from ..protocol.control_records import decode_marker
    from ..protocol.records import decode_records
    if node.partitions is None or topic not in node.partitions.topics:
        return []
    partition = node.partitions.topics[topic].local.get(index)
    if partition is None:
        return []
    start, end = partition.log_start_offset, partition.last_stable_offset
    # by first offset, whatever the order the broker lists them in (Kafka's consumer keeps
    # them in a priority queue)
    aborted = sorted(partition.aborted_transactions(start, end), key=lambda a: (a[1], a[0]))
    read = partition.log.read(start, 1 << 30, max_offset=end)
    data = read.read() if isinstance(read, FileRegion) else bytes(read)
    skipping: set[int] = set()
    values: list[bytes | None] = []
    for position, header in iter_headers(data):
        if header.base_offset >= end:
            break
        while aborted and aborted[0][1] <= header.last_offset:
            skipping.add(aborted.pop(0)[0])
        batch = data[position:position + header.size]
        if header.is_control:
            if not decode_marker(batch, header).commit:
                skipping.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in skipping:
            continue
        values.extend(record.value for record in decode_records(batch, header))
    return values
