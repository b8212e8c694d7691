"""replica.cache.retain.bytes on a real cluster: a follower keeps only the newest of its copy
in the OS page cache (nobody reads it until it leads), the leader keeps what it wrote, and a
follower that becomes leader keeps what it writes from then on. Residency is the kernel's
answer (mincore, ``tests.page_residency``)."""

from __future__ import annotations

import pytest

from tests.page_residency import MIB, produce_mib, resident_bytes, write_back

from .helpers import create_topic, wait_for_leader

pytestmark = pytest.mark.slow


def test_a_follower_keeps_only_the_newest_of_its_copy_in_the_page_cache(cluster_factory):
    cluster = cluster_factory(2, **{"replica.cache.retain.bytes": str(4 * MIB),
                                    "min.insync.replicas": "1"})
    create_topic(cluster, "cached", assignment=[[1, 2]])  # broker 1 leads, 2 follows
    segments = {n: cluster.broker(n).data_dir / "cached-0" / f"{0:020d}.log" for n in (1, 2)}
    produce_mib(cluster.broker(1).bootstrap, "cached", 48)
    for segment in segments.values():
        write_back(segment)  # clean pages: the follower's next drop step takes them
    produce_mib(cluster.broker(1).bootstrap, "cached", 20)  # acks=all: the follower has it

    follower, leader = segments[2], segments[1]
    size = follower.stat().st_size
    assert size > 67 * MIB and leader.stat().st_size == size
    assert resident_bytes(follower, 0, 40 * MIB) <= MIB
    assert resident_bytes(follower, size - 4 * MIB) >= 3 * MIB
    assert resident_bytes(leader) >= size * 9 // 10  # log.cache.retain.bytes=-1: all of it

    cluster.stop_broker(1)  # controlled shutdown: broker 2 leads
    assert wait_for_leader(cluster, "cached", node_ids=[2]) == 2
    produce_mib(cluster.broker(2).bootstrap, "cached", 40)
    write_back(follower)
    produce_mib(cluster.broker(2).bootstrap, "cached", 20)
    new_size = follower.stat().st_size
    assert new_size > size + 59 * MIB
    assert resident_bytes(follower, size, new_size) >= (new_size - size) * 9 // 10
