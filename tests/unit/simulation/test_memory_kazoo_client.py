"""MemoryKazooClient: kazoo's KazooClient on a MemoryZooKeeper. Chroots, resolved async
results, kazoo-shaped transaction results, callbacks only on ``deliver_events()``, sessions that
expire and come back as kazoo's do, and kazoo's own DataWatch/ChildrenWatch recipes.
"""

from __future__ import annotations

import warnings

import pytest
from kazoo.exceptions import (BadVersionError, ConnectionClosedError, NodeExistsError,
                              NoNodeError, RolledBackError, SessionExpiredError)
from kazoo.protocol.states import EventType, KazooState, WatchedEvent
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from oncelog.simulation import MemoryKazooClient, MemoryZooKeeper


def started(zk: MemoryZooKeeper, hosts: str = "sim", timeout: float = 10.0
            ) -> MemoryKazooClient:
    client = MemoryKazooClient(zk, hosts=hosts, timeout=timeout)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No chroot path exists")
        client.start()
    return client


def test_a_client_opens_a_session_and_chroots_every_path(zk):
    root = started(zk)
    root.ensure_path("/app")
    client = started(zk, hosts="sim/app")
    assert client.chroot == "/app"
    assert client.client_id == (client.session_id, zk.session_password(client.session_id))
    assert client.create("/a/b", b"x", makepath=True) == "/a/b"
    assert root.get("/app/a/b")[0] == b"x"
    path, stat = client.create("/e", ephemeral=True, include_data=True)
    assert path == "/e" and stat.ephemeralOwner == client.session_id
    assert sorted(client.get_children("/")) == ["a", "e"]
    assert client.ensure_path("/a/b") is True
    client.delete("/a", recursive=True)
    assert client.exists("/a") is None


def test_a_missing_chroot_is_warned_about_as_kazoo_does(zk):
    with pytest.warns(UserWarning, match="No chroot path exists"):
        MemoryKazooClient(zk, hosts="sim/nowhere").start()


def test_async_results_are_resolved_already(zk):
    client = started(zk)
    answer = client.create_async("/a", b"1")
    assert answer.ready() and answer.get_nowait() == "/a" and answer.get(timeout=0) == "/a"
    seen = []
    client.get_async("/a").rawlink(lambda result: seen.append(result.get()[0]))
    assert seen == [b"1"]
    failed = client.get_async("/missing")
    assert failed.ready() and isinstance(failed.exception, NoNodeError)
    with pytest.raises(NoNodeError):
        failed.get()
    assert client.exists_async("/missing").get() is None
    assert client.get_children_async("/", include_data=True).get()[1].numChildren == 2


def test_transactions_answer_as_kazoo_reads_a_multi_reply(zk):
    root = started(zk)
    root.ensure_path("/app")
    client = started(zk, hosts="sim/app")
    client.create("/x", b"0")
    transaction = client.transaction()
    transaction.create("/y", b"1")
    transaction.set_data("/x", b"2", version=0)
    transaction.check("/x", 1)
    transaction.delete("/y")
    results = transaction.commit_async().get()
    assert results[0] == "/y" and results[2:] == [True, True]  # the chroot is taken off
    assert results[1].version == 1 and results[1].mzxid == zk.last_zxid
    transaction = client.transaction()
    transaction.create("/z")
    transaction.set_data("/x", b"3", version=0)
    results = transaction.commit()
    assert [type(result) for result in results] == [RolledBackError, BadVersionError]
    assert client.exists("/z") is None


def test_watch_callbacks_run_only_when_events_are_delivered_with_unchrooted_paths(zk):
    root = started(zk)
    root.ensure_path("/app")
    client, writer = started(zk, hosts="sim/app"), started(zk, hosts="sim/app")
    seen: list[WatchedEvent] = []
    client.exists("/a", watch=seen.append)
    client.get_children("/", watch=seen.append)
    writer.create("/a")
    writer.set("/a", b"1")
    assert seen == []
    assert client.deliver_events() == 2
    assert seen == [WatchedEvent(EventType.CREATED, "CONNECTED", "/a"),
                    WatchedEvent(EventType.CHILD, "CONNECTED", "/")]
    assert client.deliver_events() == 0  # one-shot


def test_one_function_is_called_once_per_kind_of_watch_it_set_on_a_path(zk):
    """kazoo keeps a path's watchers in a set per kind; on DELETED it pops both kinds."""
    client, writer = started(zk), started(zk)
    writer.create("/a")
    seen: list[WatchedEvent] = []
    client.get("/a", watch=seen.append)
    client.exists("/a", watch=seen.append)
    client.get_children("/a", watch=seen.append)
    writer.delete("/a")
    client.deliver_events()
    assert seen == [WatchedEvent(EventType.DELETED, "CONNECTED", "/a")] * 2


def test_the_simulation_may_deliver_taken_events_in_its_own_order(zk):
    client, writer = started(zk), started(zk)
    seen: list[str] = []
    for name in ("/a", "/b"):
        client.exists(name, watch=lambda event: seen.append(event.path))
    writer.create("/a")
    writer.create("/b")
    taken = zk.take_events(client.session_id)
    client.deliver_events(reversed(taken))
    assert seen == ["/b", "/a"]


def test_an_expired_session_fails_the_next_request_then_the_client_carries_on(zk):
    client, other = started(zk), started(zk)
    states: list[str] = []
    client.add_listener(states.append)
    none_events: list[WatchedEvent] = []
    client.create("/e", ephemeral=True)
    client.exists("/watched", watch=none_events.append)
    old = client.session_id
    zk.expire(old)
    assert other.exists("/e") is None
    with pytest.raises(SessionExpiredError):
        client.get("/")
    assert client.session_id != old and zk.is_alive(client.session_id)
    assert client.get_children("/") == ["zookeeper"]
    assert states == []  # nothing is called back inside a request
    client.deliver_events()
    assert states == [KazooState.SUSPENDED, KazooState.LOST, KazooState.CONNECTED]
    assert [event.type for event in none_events] == [EventType.NONE]
    other.create("/watched")  # the watch died with the session
    client.deliver_events()
    assert len(none_events) == 1


def test_a_heartbeat_keeps_a_session_alive_and_notices_its_end(zk, clock):
    client = started(zk, timeout=2.0)
    states: list[str] = []
    client.add_listener(states.append)
    for _ in range(5):
        clock.now += 1.5
        assert client.heartbeat()
        assert zk.expire_due() == []
    clock.now += 2.0
    assert zk.expire_due() == [client.session_id]
    assert not client.heartbeat()  # the simulation tells the client: it reconnects
    assert client.heartbeat()
    client.deliver_events()
    assert states == [KazooState.SUSPENDED, KazooState.LOST, KazooState.CONNECTED]


def test_events_fired_before_the_expiry_are_delivered_before_the_session_states(zk):
    client, writer = started(zk), started(zk)
    order: list[str] = []
    client.add_listener(order.append)
    client.exists("/a", watch=lambda event: order.append(event.type))
    writer.create("/a")
    zk.expire(client.session_id)
    client.heartbeat()
    client.deliver_events()
    assert order == [EventType.CREATED, KazooState.SUSPENDED, KazooState.LOST,
                     KazooState.CONNECTED]


def test_stop_closes_the_session_at_once(zk):
    client, other = started(zk), started(zk)
    states: list[str] = []
    client.add_listener(states.append)
    client.create("/e", ephemeral=True)
    seen: list[WatchedEvent] = []
    other.exists("/e", watch=seen.append)
    session = client.session_id
    client.stop()
    client.close()
    assert not zk.is_alive(session) and client.client_id is None
    with pytest.raises(ConnectionClosedError):
        client.get("/")
    other.deliver_events()
    client.deliver_events()
    assert seen == [WatchedEvent(EventType.DELETED, "CONNECTED", "/e")]
    assert states == [KazooState.LOST]
    client.start()  # kazoo's clients restart with a new session
    assert zk.is_alive(client.session_id) and client.session_id != session


def test_kazoo_recipes_run_on_the_simulated_handler_and_survive_a_session_loss(zk):
    client, writer = started(zk), started(zk)
    writer.create("/group")
    children_seen: list[list[str]] = []
    data_seen: list[bytes | None] = []
    ChildrenWatch(client, "/group", lambda children: children_seen.append(sorted(children)))
    DataWatch(client, "/leader", lambda data, _stat: data_seen.append(data))
    assert children_seen == [[]] and data_seen == [None]  # called once at once, as in kazoo
    writer.create("/group/a")
    writer.create("/leader", b"1")
    client.deliver_events()
    assert children_seen == [[], ["a"]] and data_seen == [None, b"1"]

    zk.expire(client.session_id)
    client.heartbeat()
    writer.create("/group/b")
    client.deliver_events()  # CONNECTED: the recipes read again and watch again
    assert children_seen[-1] == ["a", "b"]
    writer.set("/leader", b"2")
    writer.create("/group/c")
    client.deliver_events()
    assert children_seen[-1] == ["a", "b", "c"] and data_seen[-1] == b"2"


def test_a_callback_that_fails_is_logged_and_the_others_still_run(zk, caplog):
    client, writer = started(zk), started(zk)
    seen: list[str] = []

    def broken(_event: WatchedEvent) -> None:
        raise RuntimeError("boom")
    client.exists("/a", watch=broken)
    client.exists("/b", watch=lambda event: seen.append(event.path))
    writer.create("/a")
    writer.create("/b")
    assert client.deliver_events() == 2
    assert seen == ["/b"]
    assert "exception in a simulated kazoo callback" in caplog.text


def test_errors_are_kazoos_exceptions(zk):
    client = started(zk)
    client.create("/a")
    with pytest.raises(NodeExistsError):
        client.create("/a")
    with pytest.raises(BadVersionError):
        client.set("/a", b"x", version=9)
    with pytest.raises(TypeError):  # kazoo's own argument checks run
        client.create("/b", "not bytes")
