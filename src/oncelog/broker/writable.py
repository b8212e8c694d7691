"""Waiting until a connection's socket can take more bytes, for ``os.sendfile``.

The server sends a large fetch response's records straight from the segment file with
``os.sendfile`` on the connection's socket (``server.Connection._send_region``). When the
socket fills in the middle of a region - a follower or consumer asked for more than the
socket holds, and reads it as it arrives - the rest must wait until the reader drained some
of it. The event loop cannot be asked to watch the socket for us: uvloop refuses a writer
of our own on a transport's socket, and a ``dup`` of it would keep the connection open
after the transport closed it. So the wait goes through an epoll instance of our own: the
socket is registered there for ``EPOLLOUT`` (one-shot), and the event loop watches the
epoll's own descriptor, which is readable while one of its sockets is writable.

Without it (``select.epoll`` is Linux's), the server reads what the socket did not take
and hands it to the transport: correct, but a copy of every such byte through this process.
"""

from __future__ import annotations

import asyncio
import select

_epoll = getattr(select, "epoll", None)
_EVENTS = getattr(select, "EPOLLOUT", 0) | getattr(select, "EPOLLONESHOT", 0)


class WriteWaiter:
    """One per broker (its event loop); each connection waits for at most one socket."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._epoll = _epoll() if _epoll is not None else None
        self._waiting: dict[int, asyncio.Future[None]] = {}
        if self._epoll is not None:
            loop.add_reader(self._epoll.fileno(), self._on_ready)

    @property
    def available(self) -> bool:
        return self._epoll is not None

    async def wait(self, fd: int) -> None:
        """Return once socket ``fd`` has room to write (or an error to report on writing);
        cancel to stop waiting, e.g. when the connection closes."""
        epoll = self._epoll
        assert epoll is not None, "callers wait only when available"
        future = self._loop.create_future()
        self._waiting[fd] = future
        try:
            try:
                epoll.register(fd, _EVENTS)
            except FileExistsError:  # registered by an earlier wait on this fd: re-arm it
                epoll.modify(fd, _EVENTS)
            await future
        finally:
            # Our entry only: once a connection closed, its fd number may be another's.
            if self._waiting.get(fd) is future:
                del self._waiting[fd]
                try:
                    epoll.unregister(fd)
                except OSError:
                    pass  # the socket is closed already, which removed it from the epoll

    def _on_ready(self) -> None:
        assert self._epoll is not None  # the reader is added only with one
        for fd, _ in self._epoll.poll(0):
            future = self._waiting.get(fd)
            if future is not None and not future.done():
                future.set_result(None)

    def close(self) -> None:
        if self._epoll is not None:
            self._loop.remove_reader(self._epoll.fileno())
            self._epoll.close()
            self._epoll = None
        for future in self._waiting.values():
            future.cancel()
        self._waiting.clear()
