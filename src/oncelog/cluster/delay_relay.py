"""The userspace relay that delays TCP for ``IsolatedNetwork.slow`` (``isolation.py``): this
kernel has no netem, so delay and jitter are made by a process in the middle.

How a connection reaches it: an nftables ``nat`` rule in a node's namespace sends the node's
new TCP connections to a target (its ``output`` chain) or, for a node slowed for all its
traffic, also the connections arriving at it (``prerouting``) to ``NamespaceRelay``'s
listening socket, which lives in that same namespace (sockets belong to the namespace of the
thread that created them: ``socket_in_namespace`` makes them from a short-lived thread that
``setns``-es into the namespace). The relay reads the connection's original destination
(``SO_ORIGINAL_DST``, the conntrack entry of the ``dnat``), opens its own connection to it from
the same namespace, marked with ``RELAY_MARK`` so the rule lets it through, and forwards both
directions. The target sees the connection come from the node's own address, as it would
without the relay; a connection captured on arrival reaches its server from the node's own
address instead of the client's.

What it delays: each chunk read from one side (up to ``CHUNK_BYTES``, what one ``recv``
returned) is written to the other side ``delay ± jitter`` ms later (uniform jitter from a
seeded ``random.Random``), never before the chunk read before it, so order within a connection
holds and jitter never reorders bytes. Both directions of a relayed connection are delayed:
a request/response round trip takes at least twice the delay, like netem's delay on both
hosts. Limits, all of them a relay's:

- It delays byte chunks, not packets: a chunk is whatever the kernel had buffered when the
  relay read, so small writes in quick succession may travel as one, and TCP's own
  segmentation, window and acknowledgements between the node and the relay are not delayed.
- Only TCP, and only connections opened after the rule was added (conntrack keeps existing
  connections on their direct path). Healing removes the rule; connections already relayed
  keep going through the relay, from then on without delay, until they close.
- A connection the target refuses or that cannot be made is reset towards the client after
  the relay's attempt fails, which for an unreachable target takes as long as the kernel's
  SYN retries (as it would without the relay).
- Bandwidth is not limited; each direction holds at most ``QUEUE_CHUNKS`` chunks in flight.

One ``RelayLoop`` (an asyncio event loop on a thread of its own) serves every namespace's
relay of one ``IsolatedNetwork``; ``close()`` ends every relayed connection and the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import random
import socket
import struct
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

RELAY_MARK = 0x6F6C  # "ol": the relay's own connections carry it and are not sent back to it
CHUNK_BYTES = 65536
QUEUE_CHUNKS = 256
CONNECT_TIMEOUT_S = 30.0
_SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h
_SO_MARK = getattr(socket, "SO_MARK", 36)
_CLONE_NEWNET = 0x40000000

T = TypeVar("T")

# (delay_ms, jitter_ms) by original destination address; None: any destination
DelayTable = dict[str | None, tuple[float, float]]


def namespace_path(namespace: str) -> str:
    """Where ``ip netns add`` mounts a named network namespace."""
    return f"/run/netns/{namespace}"


def socket_in_namespace(namespace: str, kind: socket.SocketKind = socket.SOCK_STREAM
                        ) -> socket.socket:
    """A new IPv4 socket that belongs to the named network namespace: created by a thread
    that joins the namespace and then ends (a namespace is a thread's, so the caller's own
    threads stay where they are). Binding, connecting and routing follow the socket's
    namespace from any thread."""
    made: list[socket.socket] = []
    failed: list[BaseException] = []

    def make() -> None:
        try:
            descriptor = os.open(namespace_path(namespace), os.O_RDONLY | os.O_CLOEXEC)
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.setns(descriptor, _CLONE_NEWNET) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, f"setns into {namespace}: {os.strerror(code)}")
            finally:
                os.close(descriptor)
            made.append(socket.socket(socket.AF_INET, kind))
        except BaseException as error:  # handed to the caller's thread
            failed.append(error)

    thread = threading.Thread(target=make, name=f"netns-{namespace}")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return made[0]


def original_destination(sock: socket.socket | Any) -> tuple[str, int]:
    """The address a ``dnat``-ed connection was opened to (``SO_ORIGINAL_DST``)."""
    raw = sock.getsockopt(socket.SOL_IP, _SO_ORIGINAL_DST, 16)
    port, packed = struct.unpack_from("!2xH4s", raw)
    return socket.inet_ntoa(packed), port


class RelayLoop:
    """An asyncio event loop on a daemon thread of its own, started on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def call(self, coroutine: Callable[[], Coroutine[Any, Any, T]], timeout_s: float = 10.0) -> T:
        """Run ``coroutine()`` on the loop and wait for its result."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever,
                                            name="isolation-relay", daemon=True)
            self._thread.start()
        future = asyncio.run_coroutine_threadsafe(coroutine(), self._loop)
        return future.result(timeout_s)

    def close(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = self._thread = None


class NamespaceRelay:
    """The relay of one node's namespace: listens on ``address:port`` there and forwards each
    accepted connection to its original destination, delaying chunks by the delay the
    ``delays`` table gives for that destination (looked up per chunk, so changing the table
    changes live connections too)."""

    def __init__(self, namespace: str, node_address: str, seed: int) -> None:
        self.namespace = namespace
        self.node_address = node_address
        self.port = 0
        self.delays: DelayTable = {}
        self._random = random.Random(seed)
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        listener = socket_in_namespace(self.namespace)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.node_address, 0))
        listener.listen(128)
        listener.setblocking(False)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._accepting = asyncio.create_task(self._accept(listener))
        return self.port

    async def close(self) -> None:
        """End the listener and every relayed connection."""
        tasks = [task for task in (self._accepting, *self._connections) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._listener is not None:
            self._listener.close()

    async def _accept(self, listener: socket.socket) -> None:
        # an accept loop of its own rather than asyncio.start_server: Python 3.11's server
        # callback logs a spurious error for each handler task cancelled at close()
        loop = asyncio.get_running_loop()
        while True:
            client, _ = await loop.sock_accept(listener)
            task = asyncio.create_task(self._serve(client))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

    def delay_for(self, destination: str) -> tuple[float, float]:
        """The (delay_ms, jitter_ms) for a connection to ``destination``: the larger of its own
        entry and the node-wide one (a connection that arrived at the node has the node's own
        address as destination and only the node-wide entry)."""
        entries = [self.delays.get(destination), self.delays.get(None)]
        return max((entry for entry in entries if entry is not None), default=(0.0, 0.0))

    async def _serve(self, client: socket.socket) -> None:
        client_writer: asyncio.StreamWriter | None = None
        server_writer: asyncio.StreamWriter | None = None
        try:
            destination = original_destination(client)
            try:
                server_reader, server_writer = await self._connect(destination)
            except OSError:
                _reset(client)
                return
            client_reader, client_writer = await asyncio.open_connection(sock=client)
            async with asyncio.TaskGroup() as group:
                group.create_task(self._pump(client_reader, server_writer, destination[0]))
                group.create_task(self._pump(server_reader, client_writer, destination[0]))
        except* OSError:
            pass  # a reset on either side ends the relayed connection
        finally:
            for writer in (client_writer, server_writer):
                if writer is not None:
                    writer.close()
            if client_writer is None:
                client.close()

    async def _connect(self, destination: tuple[str, int]
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        upstream = socket_in_namespace(self.namespace)
        try:
            upstream.setsockopt(socket.SOL_SOCKET, _SO_MARK, RELAY_MARK)
            upstream.setblocking(False)
            loop = asyncio.get_running_loop()
            await asyncio.wait_for(loop.sock_connect(upstream, destination), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as error:
            upstream.close()
            raise OSError(errno.ECONNREFUSED, str(error)) from error
        return await asyncio.open_connection(sock=upstream)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    destination: str) -> None:
        """One direction: chunks queued with the time they are due, written in order."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(QUEUE_CHUNKS)

        async def receive() -> None:
            due_last = 0.0
            while True:
                chunk = await reader.read(CHUNK_BYTES)
                delay_ms, jitter_ms = self.delay_for(destination)
                delay_s = max(0.0, delay_ms + self._random.uniform(-jitter_ms, jitter_ms)) / 1000
                due_last = max(due_last, loop.time() + delay_s)
                await queue.put((due_last, chunk))
                if not chunk:
                    return

        async def send() -> None:
            while True:
                due, chunk = await queue.get()
                wait_s = due - loop.time()
                if wait_s > 0:
                    await asyncio.sleep(wait_s)
                if not chunk:  # end of stream: half-close the other side, as the peer did
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(chunk)
                await writer.drain()

        async with asyncio.TaskGroup() as group:
            group.create_task(receive())
            group.create_task(send())


def _reset(sock: socket.socket) -> None:
    """Close with a RST, so the client sees the refusal the relay met."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
