"""MemoryZooKeeper's semantics, one rule at a time (ZooKeeper 3.8.0's, as its module docstring
cites them; tests/cluster/test_memory_zookeeper_differential.py holds them against a real one).

Every test runs on a hand-moved clock: nothing here sleeps or starts a thread.
"""

from __future__ import annotations

import pytest
from kazoo.exceptions import (BadArgumentsError, BadVersionError, NoAuthError,
                              NoChildrenForEphemeralsError, NodeExistsError, NoNodeError,
                              NotEmptyError, RolledBackError, RuntimeInconsistency,
                              SessionExpiredError)
from kazoo.protocol.serialization import CheckVersion, Create, Delete, SetData
from kazoo.protocol.states import EventType, WatchedEvent

from oncelog.simulation.java_hash_set import JavaHashSet
from oncelog.simulation.zookeeper import MemoryZooKeeper
from tests.unit.simulation.conftest import Clock


def events(zk: MemoryZooKeeper, session: int) -> list[tuple[str, str]]:
    return [(event.type, event.path) for event in zk.take_events(session)]


# -- the tree and its stats --------------------------------------------------------------------

def test_a_fresh_ensemble_has_zookeepers_own_nodes_with_zeroed_stats(zk):
    session = zk.open_session(10)
    children, root = zk.get_children(session, "/")
    assert children == ["zookeeper"]
    assert sorted(zk.get_children(session, "/zookeeper")[0]) == ["config", "quota"]
    assert (root.czxid, root.mzxid, root.pzxid, root.version) == (0, 0, 0, 0)
    # DataNode.copyStat reports cversion as creations * 2 - children: nothing created yet
    assert root.cversion == -1 and root.numChildren == 1
    assert zk.get(session, "/zookeeper")[1].cversion == -2
    assert zk.get(session, "/")[0] == b""


def test_a_created_node_has_its_zxid_everywhere_and_the_clocks_milliseconds(zk, clock):
    session = zk.open_session(10)
    clock.now = 1234.5678
    path, stat = zk.create(session, "/a", b"hello")
    assert path == "/a"
    assert stat.czxid == stat.mzxid == stat.pzxid == zk.last_zxid
    assert stat.ctime == stat.mtime == 1234567
    assert (stat.version, stat.cversion, stat.aversion, stat.ephemeralOwner) == (0, 0, 0, 0)
    assert (stat.dataLength, stat.numChildren) == (5, 0)
    assert zk.get(session, "/a") == (b"hello", stat)


def test_set_bumps_version_and_mzxid_and_mtime_only(zk, clock):
    session = zk.open_session(10)
    _path, created = zk.create(session, "/a", b"1")
    clock.now += 2
    stat = zk.set(session, "/a", b"22")
    assert stat.version == 1 and stat.mzxid == zk.last_zxid > created.czxid
    assert stat.mtime == created.mtime + 2000 and stat.ctime == created.ctime
    assert (stat.czxid, stat.pzxid, stat.dataLength) == (created.czxid, created.pzxid, 2)


def test_children_move_the_parents_pzxid_and_cversion_counts_creations_and_deletions(zk):
    session = zk.open_session(10)
    zk.create(session, "/p")
    zk.create(session, "/p/a")
    after_create = zk.exists(session, "/p")
    assert after_create.pzxid == zk.last_zxid and after_create.cversion == 1
    assert after_create.mzxid < after_create.pzxid  # the parent's own data did not change
    zk.delete(session, "/p/a")
    after_delete = zk.exists(session, "/p")
    assert after_delete.pzxid == zk.last_zxid > after_create.pzxid
    assert (after_delete.cversion, after_delete.numChildren) == (2, 0)
    assert after_delete.version == 0


def test_every_write_request_takes_a_zxid_even_when_it_fails_and_reads_take_none(zk):
    session = zk.open_session(10)
    opened = zk.last_zxid
    assert opened == 1  # createSession is a transaction
    zk.create(session, "/a")
    assert zk.last_zxid == 2
    with pytest.raises(NodeExistsError):
        zk.create(session, "/a")
    assert zk.last_zxid == 3
    zk.get(session, "/a")
    zk.get_children(session, "/")
    zk.exists(session, "/missing")
    assert zk.last_zxid == 3
    _path, stat = zk.create(session, "/b")
    assert stat.czxid == 4


def test_data_may_be_none_like_a_null_buffer(zk):
    session = zk.open_session(10)
    zk.create(session, "/a", None)
    data, stat = zk.get(session, "/a")
    assert data is None and stat.dataLength == 0


# -- errors, in ZooKeeper's order ----------------------------------------------------------------

def test_create_errors(zk):
    session = zk.open_session(10)
    zk.create(session, "/a")
    zk.create(session, "/eph", ephemeral=True)
    with pytest.raises(NoNodeError):
        zk.create(session, "/missing/child")
    with pytest.raises(NodeExistsError):
        zk.create(session, "/a")
    with pytest.raises(NodeExistsError):
        zk.create(session, "/")  # the root's parent is the root's alias: it exists
    with pytest.raises(NoChildrenForEphemeralsError):
        zk.create(session, "/eph/child")
    with pytest.raises(NodeExistsError):  # existence is checked before an ephemeral parent
        zk.create(session, "/eph")
    for bad in ("relative", "/a/", "/a//b", "/a/./b", "/a/../b", "/a/\u0001"):
        with pytest.raises((BadArgumentsError, NoNodeError)):
            zk.create(session, bad)
    with pytest.raises(BadArgumentsError):
        zk.create(session, "/a/")  # parent /a exists; the path itself is invalid
    with pytest.raises(NoAuthError):
        zk.create(session, "/zookeeper/config/x")
    assert zk.create(session, "/zookeeper/x")[0] == "/zookeeper/x"  # allowed, as in ZooKeeper


def test_set_and_delete_check_versions_and_minus_one_means_any(zk):
    session = zk.open_session(10)
    zk.create(session, "/a")
    with pytest.raises(BadVersionError):
        zk.set(session, "/a", b"x", version=3)
    assert zk.set(session, "/a", b"x", version=0).version == 1
    assert zk.set(session, "/a", b"y").version == 2
    with pytest.raises(BadVersionError):
        zk.delete(session, "/a", version=1)
    zk.delete(session, "/a", version=2)
    with pytest.raises(NoNodeError):
        zk.set(session, "/a", b"z")
    with pytest.raises(NoNodeError):
        zk.delete(session, "/a")


def test_delete_checks_the_version_before_the_children(zk):
    session = zk.open_session(10)
    zk.create(session, "/p")
    zk.create(session, "/p/c")
    with pytest.raises(BadVersionError):
        zk.delete(session, "/p", version=7)
    with pytest.raises(NotEmptyError):
        zk.delete(session, "/p", version=0)
    with pytest.raises(NotEmptyError):
        zk.delete(session, "/p")


def test_zookeepers_own_paths_cannot_be_deleted_and_its_config_not_written(zk):
    session = zk.open_session(10)
    for path in ("/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"):
        with pytest.raises(BadArgumentsError):
            zk.delete(session, path)
    with pytest.raises(NoAuthError):
        zk.set(session, "/zookeeper/config", b"x")
    with pytest.raises(BadArgumentsError):
        zk.set(session, "/a/", b"x")


# -- sequential nodes --------------------------------------------------------------------------

def test_sequence_suffix_counts_the_parents_child_creations(zk):
    session = zk.open_session(10)
    zk.create(session, "/q")
    assert zk.create(session, "/q/item-", sequence=True)[0] == "/q/item-0000000000"
    zk.create(session, "/q/other")
    zk.delete(session, "/q/other")
    assert zk.create(session, "/q/item-", sequence=True)[0] == "/q/item-0000000002"
    with pytest.raises(NodeExistsError):
        zk.create(session, "/q/x")  # a failed create counts nothing
        zk.create(session, "/q/x")
    assert zk.create(session, "/q/", sequence=True)[0] == "/q/0000000004"
    assert zk.create(session, "/root-", sequence=True)[0] == "/root-0000000001"  # after /q


# -- multi ---------------------------------------------------------------------------------------

def test_multi_is_one_zxid_and_each_operation_sees_the_ones_before(zk):
    session = zk.open_session(10)
    zk.create(session, "/p")
    results = zk.multi(session, [
        Create("/p/x", b"", None, 0), Create("/p/x/y", b"", None, 0),
        SetData("/p/x", b"1", -1), Delete("/p/x/y", -1), CheckVersion("/p/x", 1)])
    zxid = zk.last_zxid
    assert results[:2] == ["/p/x", "/p/x/y"] and results[3:] == [True, True]
    set_stat = results[2]  # the stat of that moment: /p/x/y was still there
    assert (set_stat.version, set_stat.numChildren, set_stat.cversion) == (1, 1, 1)
    assert set_stat.czxid == set_stat.mzxid == set_stat.pzxid == zxid
    x = zk.exists(session, "/p/x")
    assert (x.numChildren, x.cversion, x.pzxid) == (0, 2, zxid)
    assert zk.exists(session, "/p").pzxid == zxid


def test_a_failed_multi_applies_nothing_fires_nothing_and_still_takes_a_zxid(zk):
    session, watcher = zk.open_session(10), zk.open_session(10)
    zk.create(session, "/a")
    zk.get(watcher, "/a", watch=True)
    zk.exists(watcher, "/b", watch=True)
    before = zk.last_zxid
    results = zk.multi(session, [Create("/b", b"", None, 0), SetData("/a", b"x", 5),
                                 Delete("/a", -1)])
    assert [type(result) for result in results] == [RolledBackError, BadVersionError,
                                                    RuntimeInconsistency]
    assert zk.last_zxid == before + 1
    assert zk.exists(session, "/b") is None and zk.get(session, "/a")[1].version == 0
    assert events(zk, watcher) == []
    # a create beneath one created earlier in the same multi fails only if that one failed
    results = zk.multi(session, [Create("/c", b"", None, 0), Create("/c", b"", None, 0)])
    assert [type(result) for result in results] == [RolledBackError, NodeExistsError]


def test_multi_may_delete_a_parent_after_its_children(zk):
    session = zk.open_session(10)
    zk.create(session, "/p")
    zk.create(session, "/p/c")
    assert zk.multi(session, [Delete("/p/c", -1), Delete("/p", 0)]) == [True, True]
    assert zk.exists(session, "/p") is None
    results = zk.multi(session, [Delete("/nope", -1)])
    assert [type(result) for result in results] == [NoNodeError]
    assert zk.multi(session, []) == []


def test_an_ephemeral_created_in_a_multi_belongs_to_the_session(zk):
    session = zk.open_session(10)
    zk.multi(session, [Create("/e", b"", None, 1)])
    assert zk.exists(session, "/e").ephemeralOwner == session


# -- watches -------------------------------------------------------------------------------------

def test_data_watches_fire_once_on_change_and_delete(zk):
    writer, watcher = zk.open_session(10), zk.open_session(10)
    zk.create(writer, "/a")
    zk.get(watcher, "/a", watch=True)
    zk.get(watcher, "/a", watch=True)  # the same watch: one event
    zk.set(writer, "/a", b"1")
    zk.set(writer, "/a", b"2")  # not watched any more
    assert events(zk, watcher) == [(EventType.CHANGED, "/a")]
    zk.exists(watcher, "/a", watch=True)
    zk.delete(writer, "/a")
    assert events(zk, watcher) == [(EventType.DELETED, "/a")]
    assert events(zk, writer) == []  # watches are per session


def test_exists_watches_a_missing_node_and_fires_on_creation_then_parent_child_event(zk):
    writer, watcher = zk.open_session(10), zk.open_session(10)
    zk.create(writer, "/p")
    assert zk.exists(watcher, "/p/new", watch=True) is None
    zk.get_children(watcher, "/p", watch=True)
    zk.create(writer, "/p/new")
    assert events(zk, watcher) == [(EventType.CREATED, "/p/new"), (EventType.CHILD, "/p")]


def test_a_get_of_a_missing_node_sets_no_watch(zk):
    writer, watcher = zk.open_session(10), zk.open_session(10)
    with pytest.raises(NoNodeError):
        zk.get(watcher, "/a", watch=True)
    with pytest.raises(NoNodeError):
        zk.get_children(watcher, "/a", watch=True)
    zk.create(writer, "/a")
    assert events(zk, watcher) == []


def test_deleting_a_node_tells_each_session_once_then_fires_the_parents_child_watch(zk):
    writer, both, children_only = (zk.open_session(10) for _ in range(3))
    zk.create(writer, "/p")
    zk.create(writer, "/p/n")
    zk.get(both, "/p/n", watch=True)
    zk.get_children(both, "/p/n", watch=True)
    zk.get_children(both, "/p", watch=True)
    zk.get_children(children_only, "/p/n", watch=True)
    zk.delete(writer, "/p/n")
    assert events(zk, both) == [(EventType.DELETED, "/p/n"), (EventType.CHILD, "/p")]
    assert events(zk, children_only) == [(EventType.DELETED, "/p/n")]


def test_child_watches_ignore_data_changes_and_grandchildren(zk):
    writer, watcher = zk.open_session(10), zk.open_session(10)
    zk.create(writer, "/p")
    zk.create(writer, "/p/c")
    zk.get_children(watcher, "/p", watch=True)
    zk.set(writer, "/p", b"x")
    zk.set(writer, "/p/c", b"x")
    zk.create(writer, "/p/c/g")
    assert events(zk, watcher) == []
    zk.delete(writer, "/p/c/g")
    zk.delete(writer, "/p/c")
    assert events(zk, watcher) == [(EventType.CHILD, "/p")]


def test_events_carry_absolute_paths_and_wait_until_taken(zk):
    writer, watcher = zk.open_session(10), zk.open_session(10)
    zk.exists(watcher, "/a", watch=True)
    zk.create(writer, "/a")
    assert zk.has_events(watcher)
    taken = zk.take_events(watcher)
    assert taken == [WatchedEvent(EventType.CREATED, "CONNECTED", "/a")]
    assert zk.take_events(watcher) == [] and not zk.has_events(watcher)


# -- sessions -------------------------------------------------------------------------------------

def test_sessions_expire_after_their_timeout_without_a_heartbeat(zk, clock):
    quiet, chatty = zk.open_session(5), zk.open_session(5)
    assert chatty == quiet + 1 and quiet >> 56 == 1  # a standalone server's ids
    clock.now += 4
    zk.touch(chatty)
    clock.now += 0.9
    assert zk.expire_due() == []
    clock.now += 0.1
    assert zk.expire_due() == [quiet]
    assert not zk.is_alive(quiet) and zk.is_alive(chatty)
    clock.now += 3.9
    zk.get_children(chatty, "/")  # any request is a heartbeat
    clock.now += 4.9
    assert zk.expire_due() == []
    with pytest.raises(SessionExpiredError):
        zk.get(quiet, "/")
    with pytest.raises(SessionExpiredError):
        zk.touch(quiet)
    assert zk.session_ids() == [chatty]


def test_a_sessions_end_deletes_its_ephemerals_in_one_transaction_and_fires_watches(zk):
    owner, watcher = zk.open_session(10), zk.open_session(10)
    zk.create(owner, "/p")
    zk.create(owner, "/p/e1", ephemeral=True)
    zk.create(owner, "/p/e2", ephemeral=True)
    _path, kept = zk.create(owner, "/p/kept")
    zk.get(watcher, "/p/e1", watch=True)
    zk.get_children(watcher, "/p", watch=True)
    zk.get(owner, "/p/kept", watch=True)
    before = zk.last_zxid
    order = zk.ephemerals(owner)
    assert sorted(order) == ["/p/e1", "/p/e2"]
    assert zk.expire(owner) and not zk.expire(owner)
    assert zk.last_zxid == before + 1  # one closeSession transaction for both deletions
    assert zk.get_children(watcher, "/p")[0] == ["kept"]
    assert zk.exists(watcher, "/p").pzxid == before + 1
    expected = []
    for path in order:  # each deletion: its data watches, then (once) the parent's child watch
        if path == "/p/e1":
            expected.append((EventType.DELETED, "/p/e1"))
        if path == order[0]:
            expected.append((EventType.CHILD, "/p"))
    assert events(zk, watcher) == expected
    assert zk.take_events(owner) == []  # an ended session is told nothing
    assert zk.exists(watcher, "/p/kept") == kept


def test_a_closed_session_ends_like_an_expired_one(zk):
    owner, watcher = zk.open_session(10), zk.open_session(10)
    zk.create(owner, "/e", ephemeral=True)
    zk.exists(watcher, "/e", watch=True)
    assert zk.close_session(owner)
    assert events(zk, watcher) == [(EventType.DELETED, "/e")]
    with pytest.raises(SessionExpiredError):
        zk.create(owner, "/again")


def test_events_fired_before_a_session_ended_can_still_be_taken(zk):
    watcher, writer = zk.open_session(10), zk.open_session(10)
    zk.exists(watcher, "/a", watch=True)
    zk.create(writer, "/a")
    zk.expire(watcher)
    assert events(zk, watcher) == [(EventType.CREATED, "/a")]
    assert events(zk, watcher) == []


def test_a_session_ends_deleting_ephemerals_in_java_hashset_clone_order(zk):
    owner, watcher = zk.open_session(10), zk.open_session(10)
    zk.create(owner, "/s")
    for index in range(30):
        zk.create(owner, f"/s/e{index}", ephemeral=True)
    for index in range(25):
        zk.delete(owner, f"/s/e{index}")
    zk.get_children(watcher, "/s")
    for index in range(25, 30):
        zk.exists(watcher, f"/s/e{index}", watch=True)
    # what JDK 17 printed for the same adds and removes (see JavaHashSet)
    assert zk.ephemerals(owner) == ["/s/e27", "/s/e26", "/s/e25", "/s/e29", "/s/e28"]
    zk.expire(owner)
    assert [path for _type, path in events(zk, watcher)] == [
        "/s/e27", "/s/e26", "/s/e25", "/s/e29", "/s/e28"]


# -- java.util.HashSet's order (expected lists printed by JDK 17.0.15) ----------------------------

def test_children_iterate_in_the_order_of_a_java_hashset_of_initial_capacity_8():
    children = JavaHashSet(8)
    for index in range(20):
        children.add(f"n{index}")
    assert list(children) == ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10",
                              "n12", "n11", "n14", "n13", "n16", "n15", "n18", "n17", "n19"]
    for name in ("n3", "n10"):
        children.discard(name)
    for name in ("n3", "brokers", "topics"):
        children.add(name)
    assert list(children) == ["n0", "n1", "brokers", "n2", "n3", "n4", "topics", "n5", "n6",
                              "n7", "n8", "n9", "n12", "n11", "n14", "n13", "n16", "n15",
                              "n18", "n17", "n19"]
    mixed = JavaHashSet(8)
    for name in ("a", "b", "c", "ids", "topics", "0", "1", "2", "state", "partitions"):
        mixed.add(name)
    assert list(mixed) == ["0", "partitions", "a", "1", "b", "2", "c", "topics", "ids", "state"]
    unicode = JavaHashSet(8)
    for name in ("é", "日本", "\U0001F600", "z"):
        unicode.add(name)
    assert list(unicode) == ["\U0001F600", "é", "z", "日本"]


def test_a_clone_is_presized_to_its_size_and_may_iterate_differently():
    paths = JavaHashSet()
    for index in range(30):
        paths.add(f"/s/e{index}")
    for index in range(25):
        paths.discard(f"/s/e{index}")
    assert list(paths) == ["/s/e29", "/s/e28", "/s/e27", "/s/e26", "/s/e25"]
    assert paths.clone_order() == ["/s/e27", "/s/e26", "/s/e25", "/s/e29", "/s/e28"]
    small = JavaHashSet()
    prefix = "/test-0123456789ab"
    for path in (f"{prefix}/e0", f"{prefix}/e1", f"{prefix}/d/e2", "/brokers/ids/1",
                 "/controller", "/brokers/ids/2", "/x"):
        small.add(path)
    assert small.clone_order() == list(small) == [
        f"{prefix}/e0", "/controller", f"{prefix}/e1", "/brokers/ids/1", "/brokers/ids/2", "/x",
        f"{prefix}/d/e2"]


# -- determinism ---------------------------------------------------------------------------------

def test_the_same_operations_on_the_same_clock_give_the_same_everything():
    def run() -> list[object]:
        clock = Clock(50.0)
        zk = MemoryZooKeeper(clock)
        first, second = zk.open_session(3), zk.open_session(3)
        trace: list[object] = [first, second]
        for index in range(20):
            clock.now += 0.25
            zk.create(first if index % 2 else second, f"/n{index}", b"%d" % index,
                      ephemeral=index % 3 == 0)
            zk.exists(second, f"/n{index + 1}", watch=True)
        zk.expire(first)
        trace += [zk.get_children(second, "/"), zk.take_events(second), zk.last_zxid]
        return trace
    assert run() == run()
