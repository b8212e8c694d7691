"""kazoo's ``KazooClient`` talking to a ``MemoryZooKeeper`` instead of a socket.

``MemoryKazooClient(server, hosts="sim/chroot", timeout=10.0)`` IS a ``KazooClient`` (kazoo
2.11, pinned): its public methods are kazoo's own code (argument checks, chroot prefixing and
stripping, ``makepath``, ``ensure_path``, ``TransactionRequest``, ``retry``, the recipes), and
only the layer below them is replaced, where kazoo's ``ConnectionHandler`` would write a request
and read its reply: ``_call(request, async_result)`` hands the request to the server
(``MemoryZooKeeper.handle``) and resolves the result at once, registering a watcher exactly when
kazoo's connection does (after a success, and after an ``exists`` of a missing node). So every
``*_async`` returns kazoo's own ``AsyncResult``, already resolved: ``get(timeout)`` returns or
raises without waiting, ``rawlink`` calls back at once, ``get_nowait`` works.

Nothing is ever called back from inside an operation: watch callbacks, state listeners and
anything kazoo ``spawn``s go to the client's queue (``SimulatedHandler``), and run only when the
simulation calls ``deliver_events()``: first the session's watch events waiting on the server
become callbacks as kazoo's ``_read_watch_event`` makes them (the watchers of that path and kind
popped, the path un-chrooted), then the queue runs, in order, until empty (what a callback
queues runs too). An exception in a callback is logged, as kazoo's callback thread does.

Sessions, as kazoo lives them (its own ``_session_callback`` does the work): ``start()`` opens
a session (CONNECTED). When the server has ended the session (``expire``/``expire_due``), the
client notices at its next request, which fails with ``SessionExpiredError`` as a request queued
while kazoo reconnects does, or at ``heartbeat()`` (the simulation telling it: a ping): the
connection drops (SUSPENDED; every watcher called with a NONE event), the server says the
session expired (LOST), and a new session opens (CONNECTED); watches do not survive. ``stop()``
closes the session (its ephemerals go at once) and reports LOST. Requests touch the session on
the server as real ones do; an idle client stays alive only through ``heartbeat()``.

What kazoo needs from its handler for ``DataWatch``/``ChildrenWatch`` (a lock, events,
``spawn``, a ``sleep_func`` for ``KazooRetry``) is faked without threads: locks raise instead of
deadlocking, ``spawn`` queues, ``sleep_func`` is given (default: returns at once; it is only
reached when a request failed with SessionExpiredError, and the retry then goes to the new
session).

Not here: ``client_id=`` (attaching to an existing session), connection loss without expiry
(SUSPENDED then CONNECTED to the same session), read-only mode, auth and SASL, ``add_watch``,
``reconfig``, ``command``/``server_version``; those requests fail with UnimplementedError.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (ConnectionClosedError, NoNodeError, SessionExpiredError,
                              UnimplementedError, ZookeeperError)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.handlers.utils import AsyncResult
from kazoo.protocol.serialization import Exists, GetChildren, GetChildren2, Transaction
from kazoo.protocol.states import (Callback, EventType, KazooState, KeeperState,
                                   WatchedEvent)

from .zookeeper import MemoryZooKeeper

log = logging.getLogger(__name__)


class _NoWaitLock:
    """A lock for one thread: taking it twice is a bug that would hang a real handler's
    thread, so it raises instead."""

    def __init__(self) -> None:
        self._held = False

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._held:
            if not blocking:
                return False
            raise RuntimeError("lock already held: this would deadlock")
        self._held = True
        return True

    def release(self) -> None:
        self._held = False

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class _NoWaitCondition:
    """The condition of an ``AsyncResult`` in one thread: taking it is free (and re-entrant,
    as the RLock of ``threading.Condition`` is), and nobody else could ever notify a waiter,
    so a wait with a timeout ends at once (kazoo then raises its timeout) and one without
    raises instead of hanging the simulation."""

    def __enter__(self) -> bool:
        return True

    def __exit__(self, *exc_info: object) -> None:
        pass

    def notify_all(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None:
            raise RuntimeError("waiting for a result nobody can set: this would hang")
        return False


class SimulatedHandler:
    """kazoo's ``IHandler`` without threads: callbacks and spawned functions queue, and run
    when ``run_queued()`` is called. ``running`` is False so that kazoo's ``AsyncResult`` calls
    its ``rawlink`` callbacks at once (kazoo does so for a stopped handler)."""

    name = "simulated_handler"
    timeout_exception = KazooTimeoutError
    running = False

    def __init__(self, sleep_func: Callable[[float], object] | None = None) -> None:
        self.sleep_func = sleep_func or _no_sleep
        self._queue: deque[Callable[[], Any]] = deque()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def event_object(self) -> threading.Event:
        return threading.Event()

    def lock_object(self) -> _NoWaitLock:
        return _NoWaitLock()

    def rlock_object(self) -> threading.RLock:
        return threading.RLock()

    def async_result(self) -> AsyncResult:
        return AsyncResult(self, _NoWaitCondition, KazooTimeoutError)

    def spawn(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self._queue.append(lambda: func(*args, **kwargs))

    def dispatch_callback(self, callback: Callback) -> None:
        self._queue.append(lambda: callback.func(*callback.args))

    def pending(self) -> int:
        return len(self._queue)

    def run_queued(self) -> int:
        """Run the queue until it is empty; how many ran."""
        count = 0
        while self._queue:
            function = self._queue.popleft()
            count += 1
            try:
                function()
            except Exception:
                log.exception("exception in a simulated kazoo callback")
        return count

    def select(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the simulated handler has no sockets")

    socket = create_connection = create_socket_pair = select


def _no_sleep(_seconds: float) -> None:
    return None


class MemoryKazooClient(KazooClient):  # type: ignore[misc]  # kazoo has no type information
    """A ``KazooClient`` whose server is ``server``; see the module docstring."""

    # set by KazooClient.__init__ (kazoo has no annotations)
    state: str
    _session_id: int | None
    _live: threading.Event

    def __init__(self, server: MemoryZooKeeper, *, hosts: str = "sim", timeout: float = 10.0,
                 sleep_func: Callable[[float], object] | None = None, **kwargs: Any) -> None:
        if kwargs.get("client_id"):
            raise NotImplementedError("MemoryKazooClient cannot attach to an existing session")
        self.server = server
        super().__init__(hosts=hosts, timeout=timeout, handler=SimulatedHandler(sleep_func),
                         **kwargs)

    # -- the session ----------------------------------------------------------------------

    @property
    def session_id(self) -> int | None:
        """The current session's id (None before ``start`` and after ``stop``)."""
        return self._session_id

    def start(self, timeout: float = 15) -> None:
        """Open a session (``timeout`` is how long kazoo would wait to connect: unused)."""
        if self._live.is_set():
            return
        self._stopped.clear()
        self._open_session()
        if self.chroot and not self.exists("/"):
            warnings.warn("No chroot path exists, the chroot path should be created before "
                          "normal use.", stacklevel=2)

    def start_async(self) -> threading.Event:
        self.start()
        return self._live

    def _open_session(self) -> None:
        self._session_id = self.server.open_session(self._session_timeout / 1000)
        self._session_passwd = self.server.session_password(self._session_id)
        self._session_callback(KeeperState.CONNECTING)
        self._session_callback(KeeperState.CONNECTED)

    def stop(self) -> None:
        """Close the session: the server deletes its ephemerals at once; LOST is reported."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self.server.is_alive(self._session_id):
            self.server.close_session(self._session_id)
        self.server.take_events(self._session_id)  # kazoo ignores events once stopped
        self._session_callback(KeeperState.CLOSED)

    def close(self) -> None:
        """Nothing to free (kazoo closes its sockets here)."""

    def restart(self) -> None:
        self.stop()
        self.start()

    def heartbeat(self) -> bool:
        """A ping: the server hears from the session, or the client learns that it ended and
        opens a new one (SUSPENDED, LOST, CONNECTED). False if the session had ended."""
        if not self._live.is_set():
            return not self._stopped.is_set()
        if self._session_id is not None and self.server.is_alive(self._session_id):
            self.server.touch(self._session_id)
            return True
        self._renew_expired_session()
        return False

    def _renew_expired_session(self) -> None:
        """What kazoo goes through when the server has expired its session: the events fired
        before the end had arrived; then the connection drops, the reconnection is told
        "session expired", and a new session opens."""
        for event in self.server.take_events(self._session_id):
            self._receive_watch_event(event)
        self._session_callback(KeeperState.CONNECTING)   # SUSPENDED; watchers get NONE
        self._session_callback(KeeperState.EXPIRED_SESSION)  # LOST; session forgotten
        self._open_session()

    def _make_state_change(self, state: str) -> None:
        """kazoo calls the state listeners at once, on its connection thread; here they are
        queued like every other callback (the listeners as they are now)."""
        if self.state == state:
            return
        self.state = state
        listeners = list(self.state_listeners)
        if listeners:
            self.handler.dispatch_callback(Callback("state", self._call_listeners,
                                                    (state, listeners)))

    def _call_listeners(self, state: str, listeners: list[Callable[[str], Any]]) -> None:
        for listener in listeners:
            try:
                if listener(state) is True:
                    self.remove_listener(listener)
            except Exception:
                self.logger.exception("Error in connection state listener")

    # -- requests ---------------------------------------------------------------------------

    def _call(self, request: Any, async_object: AsyncResult) -> bool | None:
        """Where kazoo would queue ``request`` for its connection: answered by the server now."""
        if self._state == KeeperState.CLOSED or self._stopped.is_set():
            async_object.set_exception(ConnectionClosedError("Connection has been closed"))
            return False
        if self._state == KeeperState.AUTH_FAILED:  # pragma: no cover - no auth here
            async_object.set_exception(UnimplementedError())
            return False
        if self._session_id is None or not self.server.is_alive(self._session_id):
            # the request went to a dead session: it fails, and the client moves on
            self._renew_expired_session()
            async_object.set_exception(SessionExpiredError())
            return None
        try:
            response = self.server.handle(self._session_id, request)
        except NoNodeError:
            if not isinstance(request, Exists):
                async_object.set_exception(NoNodeError())
                return None
            response = None
        except ZookeeperError as error:
            async_object.set_exception(error)
            return None
        self.last_zxid = self.server.last_zxid
        if isinstance(request, Transaction):
            response = Transaction.unchroot(self, response)
        async_object.set(response)
        watcher = getattr(request, "watcher", None)
        if watcher and not self._stopped.is_set():
            watchers = (self._child_watchers if isinstance(request, (GetChildren, GetChildren2))
                        else self._data_watchers)
            watchers[request.path].add(watcher)
        return None

    # -- events ---------------------------------------------------------------------------

    def deliver_events(self, events: Iterable[WatchedEvent] | None = None) -> int:
        """Run what waits for this client: ``events`` (by default every watch event waiting on
        the server for the session, taken now), then the queued callbacks until none is left.
        How many callbacks ran."""
        if events is None:
            events = self.server.take_events(self._session_id)
        for event in events:
            self._receive_watch_event(event)
        return self.handler.run_queued()  # type: ignore[no-any-return]

    def pending_callbacks(self) -> int:
        return self.handler.pending()  # type: ignore[no-any-return]

    def _receive_watch_event(self, event: WatchedEvent) -> None:
        """kazoo's ``ConnectionHandler._read_watch_event``."""
        path = event.path
        watchers: list[Callable[[WatchedEvent], Any]] = []
        if event.type in (EventType.CREATED, EventType.CHANGED):
            watchers.extend(self._data_watchers.pop(path, []))
        elif event.type == EventType.DELETED:
            watchers.extend(self._data_watchers.pop(path, []))
            watchers.extend(self._child_watchers.pop(path, []))
        elif event.type == EventType.CHILD:
            watchers.extend(self._child_watchers.pop(path, []))
        if self._stopped.is_set():
            return
        delivered = WatchedEvent(event.type, self._state, self.unchroot(path))
        for watcher in watchers:
            self.handler.dispatch_callback(Callback("watch", watcher, (delivered,)))

    # -- what a simulated client cannot do ------------------------------------------------------

    def command(self, cmd: bytes = b"ruok") -> str:
        raise UnimplementedError("no four-letter words in the simulation")

    def server_version(self, retries: int = 3) -> tuple[int, ...]:
        return (3, 8, 0)


__all__ = ["MemoryKazooClient", "SimulatedHandler", "KazooState"]
