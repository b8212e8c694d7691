"""The listener: reads frames, runs requests, writes responses in request order.

Each connection is an ``asyncio.BufferedProtocol``. A frame is parsed as soon as it is
complete and its request starts as a task right away, so requests pipeline (several produce
requests from one producer are appended while earlier ones wait for their fsync). Tasks start
in arrival order, and a produce handler makes all its appends before its first ``await``, so
appends keep the order the client sent them in. A writer coroutine awaits the tasks in order
and writes each response, so responses leave in request order (as Kafka guarantees per
connection).

A request whose client went away is abandoned (its task cancelled) only where that stops
nothing but a wait: Fetch, Produce's wait for acknowledgements, JoinGroup and SyncGroup.
Every other request runs to its end and its response is dropped, as in Kafka, whose
handlers never see the connection close: a request cancelled half-way through a change (a
topic written to the store and not yet hosted; a transaction's record written and not yet
applied) left that change half made.

A connection is closed, with one (rate-limited) log line, only when a frame cannot be
answered: a size outside (0, socket.request.max.bytes], a header or body that does not parse,
an unknown API key, or a version our codec cannot even encode. acks=0 produce requests get no
response; if one fails, the connection is closed so the client notices (as Kafka does).

What a client costs is bounded (``limits.py`` holds the broker-wide parts):

- Memory follows the bytes that arrived, never the size a frame announces. The receive
  buffer starts at ``BASE_BUFFER`` and grows (doubling, capped at what the announced frame
  still needs) only when bytes fill it; growth is reserved from the broker's ``MemoryPool``
  first, and a connection whose growth does not fit stops reading until memory frees.
- A decoded request is charged to the pool (its frame size, twice: the decoded objects) from
  its arrival until its response is written; a response is charged from when it is encoded
  (in the request's task) until the transport has sent it. While the pool is full, no
  connection decodes another frame. Fetches on one connection run one after the other (each
  starts once the previous response was handed to the transport), as real consumers and
  followers send them, so a slow reader holds at most two fetch responses.
- ``max.connections`` / ``max.connections.per.ip`` are checked in ``connection_made``;
  ``connections.max.idle.ms`` and ``socket.request.read.timeout.ms`` by a per-connection
  timer that is re-armed lazily (one ``call_later`` per deadline, not per read).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import struct
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from ..protocol import messages
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from ..security.principal import ANONYMOUS, NoMatchingRule, PrincipalMapper, distinguished_name
from ..security.sasl import SaslServer
from ..security.scram import AuthenticationFailed
from ..storage import FileRegion
from .context import RequestContext
from .dispatch import HANDLERS, dispatch
from .handlers import api_versions
from .limits import limits_for

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_IN_FLIGHT = 64  # requests read ahead of their responses before we stop reading
# requests cancelled when their connection closes (see the module docstring)
ABANDONED_WITH_CONNECTION = frozenset({ApiKey.FETCH, ApiKey.PRODUCE, ApiKey.JOIN_GROUP,
                                       ApiKey.SYNC_GROUP})
DECODED_COST_FACTOR = 2  # a decoded request is charged as this many times its frame's size

_IN_FLIGHT, _MEMORY = "requests in flight", "memory"


class _InOrder:
    """A connection's requests in arrival order, taken by its one writer: a deque and at most
    one waiting getter. ``asyncio.Queue`` does the same for any number of getters and
    putters, at a cost paid on every request (loop lookups, a future per wait)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: deque = deque()
        self._waiter: asyncio.Future | None = None

    def put_nowait(self, item) -> None:
        self._items.append(item)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self):
        while not self._items:
            self._waiter = self._loop.create_future()
            await self._waiter
        return self._items.popleft()

    def get_nowait(self):
        return self._items.popleft()

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)


class Connection(asyncio.BufferedProtocol):
    """One client connection. Bytes arrive straight in ``self.buffer`` (no intermediate
    copies: the event loop reads into it), and frames are decoded from a view of it."""

    BASE_BUFFER = 16 * 1024  # never charged to the pool: bounded by max.connections
    MIN_FREE = 4 * 1024  # room offered to each read
    KEEP_BUFFER = 256 * 1024  # a grown buffer up to this size is kept between frames
    # A larger one is given back once no frame arrived for this long: a producer sending
    # megabyte requests back to back keeps its buffer instead of growing it from BASE_BUFFER
    # again for every request (a copy and a fresh allocation at each doubling).
    SHRINK_AFTER_S = 0.05

    def __init__(self, broker: Broker, listener: str = "PLAINTEXT", tls: bool = False,
                 principals: PrincipalMapper | None = None,
                 sasl: Callable[[], SaslServer] | None = None) -> None:
        self.broker = broker  # its connections, write waiter and limits; never handed on
        self.listener = listener  # the name of the listener it came in on
        # on an SSL or SASL_SSL listener: made once the TLS handshake is done (the event
        # loop runs it), and responses cannot be sent with sendfile
        self.tls = tls
        self.principals = principals  # a client certificate's name -> its principal
        # on a SASL listener: this connection's authentication (nothing but ApiVersions and
        # the SASL exchange is served before it)
        self.sasl = sasl() if sasl is not None else None
        self.sasl_failed = False
        self.principal = ANONYMOUS  # who the client is, once known
        self.services = broker.services  # what the handlers are given
        self.loop = asyncio.get_running_loop()
        self.limits = limits_for(broker, self.loop.call_soon)
        self.pool = self.limits.pool
        self.max_frame = broker.config["socket.request.max.bytes"]
        self.buffer = bytearray(0)
        self.view = memoryview(self.buffer)
        self.filled = 0
        self.buffer_charge = 0  # bytes of self.buffer beyond BASE_BUFFER, charged to the pool
        self.transport: asyncio.Transport  # set by connection_made, before anything runs
        self.peer = "?"
        self.ip = "?"
        self.client_id: str | None = None  # as its last request named it
        self.admitted = False
        self.pending = _InOrder(self.loop)
        self.writer: asyncio.Task | None = None
        self.paused_for: set[str] = set()
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.closed = False
        self.write_charge = 0  # bytes the transport still holds, charged to the pool
        self.held_charges = 0  # charged for requests not yet answered (their own share)
        self.fetch_written: asyncio.Future | None = None
        now = self.loop.time()
        self.last_activity = now
        self.frame_started: float | None = None  # when the incomplete frame's first byte came
        self.waiting_to_grow = False
        self.unsent_at_last_check = 0
        self.timer: asyncio.TimerHandle | None = None
        self.shrink: asyncio.TimerHandle | None = None

    # -- asyncio.BufferedProtocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = self.transport = cast(asyncio.Transport, transport)  # a stream's
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.ip = peer[0] if peer else "?"
        refused = self.limits.quotas.admit(self.ip)
        if refused is not None:
            self.closed = True
            self.limits.rejections.warning("refused connection", self.ip,
                                           "refusing connection from %s: %s", self.peer, refused)
            transport.abort()
            return
        self.admitted = True
        self._resize(self.BASE_BUFFER)
        self.broker.connections.add(self)
        self.writer = self.loop.create_task(self._write_responses())
        self._arm_timer()
        if self.tls:
            self._take_principal()

    def _take_principal(self) -> None:
        """The client certificate's name as its principal (``ssl.principal.mapping.rules``);
        a name no rule maps closes the connection, as Kafka fails its authentication."""
        certificate = self.transport.get_extra_info("peercert")
        if not certificate or self.principals is None:
            return
        try:
            name = self.principals.name(distinguished_name(certificate.get("subject", ())))
        except NoMatchingRule as error:
            self.close("TLS principal", f"authentication failed: {error}")
            return
        self.principal = f"User:{name}"

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.admitted:
            return
        self.admitted = False
        self.closed = True
        self.limits.quotas.release(self.ip)
        self.pool.forget(self)
        self.broker.connections.discard(self)
        if self.timer is not None:
            self.timer.cancel()
        if self.shrink is not None:
            self.shrink.cancel()
        if self.writer is not None:
            self.writer.cancel()
        finishing = self.broker.finishing_requests
        while not self.pending.empty():
            task, _, _, _, _ = self.pending.get_nowait()
            if isinstance(task, asyncio.Task) and task not in finishing:
                task.cancel()
        self._release_all()

    def _release_all(self) -> None:
        """Give back everything this connection holds: called once, when it is gone."""
        self.pool.release(self.buffer_charge, partial_frame=True)
        self.pool.release(self.held_charges + self.write_charge)
        self.buffer_charge = self.held_charges = self.write_charge = 0
        self.buffer, self.view, self.filled = bytearray(0), memoryview(b""), 0

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()
        self._recharge_writes()

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self.buffer) - self.filled <= 0:
            # Not expected (reading pauses before the buffer is full); keep the loop going.
            self._grow(force=True)
        return self.view[self.filled:]

    def buffer_updated(self, nbytes: int) -> None:
        now = self.last_activity = self.loop.time()
        if self.filled == 0:
            self._frame_begins(now)
        self.filled += nbytes
        self._process()

    # -- frames ----------------------------------------------------------------------------

    def _process(self) -> None:
        """Handle every complete frame in the buffer, unless told to stop reading."""
        start = 0
        exhausted = False
        while self.filled - start >= 4 and not self.closed:
            if self.pool.exhausted:
                exhausted = True
                break
            if self.pending.qsize() >= MAX_IN_FLIGHT:
                self._pause(_IN_FLIGHT)  # the writer resumes us as responses leave
                break
            (size,) = _SIZE.unpack_from(self.buffer, start)
            if size <= 0 or size > self.max_frame:
                self.close("frame size", f"frame of {size} bytes is outside "
                           f"(0, socket.request.max.bytes={self.max_frame}]")
                return
            end = start + 4 + size
            if end > self.filled:
                break
            # Decoding copies every field out of the view, so the buffer may be reused.
            self._handle_frame(self.view[start + 4:end])
            start = end
        if self.closed:
            return
        if start:
            self.frame_started = None if start == self.filled else self.loop.time()
        self._keep_from(start)
        self.waiting_to_grow = False
        if exhausted:  # decode nothing more until responses give memory back
            self._pause(_MEMORY)
            self.pool.wait(self)
        elif len(self.buffer) - self.filled < self.MIN_FREE and not self._grow():
            self.waiting_to_grow = True
            self._pause(_MEMORY)
            self.pool.wait(self)

    def _keep_from(self, start: int) -> None:
        """Move the unparsed tail to the front; give back a large buffer once it is empty."""
        remaining = self.filled - start
        if start:
            self.view[:remaining] = self.view[start:self.filled]
            self.filled = remaining
        if len(self.buffer) > self.KEEP_BUFFER and self.shrink is None:
            self.shrink = self.loop.call_later(self.SHRINK_AFTER_S, self._shrink_if_quiet,
                                               self.last_activity)

    def _shrink_if_quiet(self, activity_then: float) -> None:
        """Give back a large buffer if nothing arrived since it emptied (else look again)."""
        self.shrink = None
        if self.closed or len(self.buffer) <= self.KEEP_BUFFER:
            return
        if self.last_activity != activity_then or self.filled > self.BASE_BUFFER - self.MIN_FREE:
            self.shrink = self.loop.call_later(self.SHRINK_AFTER_S, self._shrink_if_quiet,
                                               self.last_activity)
            return
        self._resize(self.BASE_BUFFER)
        self.pool.release(self.buffer_charge, partial_frame=True)
        self.buffer_charge = 0

    def _growth(self) -> int:
        """Make room for more bytes, in proportion to the bytes that already arrived.

        Doubles the buffer, but never beyond what the frame being received still needs
        (plus ``MIN_FREE``): a frame that announces 100 MB and sends 10 bytes costs nothing
        more. The growth is reserved from the pool first; returns False if it does not fit.
        """
        target = max(2 * len(self.buffer), self.filled + self.MIN_FREE)
        if self.filled >= 4:
            frame_end = 4 + _SIZE.unpack_from(self.buffer, 0)[0]
            target = min(target, max(frame_end, self.filled) + self.MIN_FREE)
        return max(target, self.filled + self.MIN_FREE) - len(self.buffer)

    def _grow(self, force: bool = False) -> bool:
        """Grow the buffer by ``_growth()`` if the pool has room (or ``force``)."""
        growth = self._growth()
        if force:
            self.pool.charge(growth, partial_frame=True)
        elif not self.pool.try_reserve(growth, partial_frame=True, held=self.buffer_charge):
            return False
        self.buffer_charge += growth
        self._resize(len(self.buffer) + growth)
        return True

    def _resize(self, size: int) -> None:
        buffer = bytearray(size)
        buffer[:self.filled] = self.view[:self.filled]
        self.buffer, self.view = buffer, memoryview(buffer)

    def memory_needed(self) -> tuple[int, bool, int]:
        if self.waiting_to_grow:
            return self._growth(), True, self.buffer_charge
        return 0, False, 0

    def memory_available(self) -> None:
        """The pool has room again (``MemoryPool.wait``): decode what is waiting, read on."""
        if self.closed:
            return
        self._resume(_MEMORY)
        self._process()

    def _pause(self, reason: str) -> None:
        if not self.paused_for and not self.closed:
            self.transport.pause_reading()
        self.paused_for.add(reason)

    def _resume(self, reason: str) -> None:
        if reason in self.paused_for:
            self.paused_for.discard(reason)
            if not self.paused_for and not self.closed:
                if self.frame_started is not None:
                    self._frame_begins(self.loop.time())  # the wait was ours, not the client's
                self.transport.resume_reading()

    # -- time ------------------------------------------------------------------------------

    def _frame_begins(self, now: float) -> None:
        """Start the clock of socket.request.read.timeout.ms; fire no later than it says."""
        self.frame_started = now
        deadline = now + self.limits.read_timeout_ms / 1000
        if self.timer is not None and self.timer.when() > deadline:
            self.timer.cancel()
            self.timer = self.loop.call_at(deadline, self._on_timer)

    def _arm_timer(self) -> None:
        deadline = self.last_activity + self.limits.idle_ms / 1000
        if self.frame_started is not None:
            deadline = min(deadline, self.frame_started + self.limits.read_timeout_ms / 1000)
        self.timer = self.loop.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        """Close a connection that is idle or trickling a frame; otherwise re-arm."""
        self.timer = None
        if self.closed:
            return
        now = self.loop.time()
        if (self.frame_started is not None and not self.paused_for
                and now - self.frame_started >= self.limits.read_timeout_ms / 1000):
            self.close("slow frame", f"a request frame still incomplete after "
                       f"{self.limits.read_timeout_ms} ms (socket.request.read.timeout.ms); "
                       f"{self.filled} bytes arrived")
            return
        unsent = self.transport.get_write_buffer_size()
        if unsent < self.unsent_at_last_check:
            self.last_activity = now  # the client is reading its responses
        self.unsent_at_last_check = unsent
        working = not self.pending.empty() and self.can_write.is_set()
        if working or self.frame_started is not None:
            self.last_activity = now  # not idle while a request is under way
        elif now - self.last_activity >= self.limits.idle_ms / 1000:
            # Idle, or not reading what we write: either way it costs us and does nothing.
            self.close("idle", f"idle for {self.limits.idle_ms} ms (connections.max.idle.ms)",
                       quiet=True)
            return
        self._arm_timer()

    # -- requests --------------------------------------------------------------------------

    def close(self, kind: str, reason: str, quiet: bool = False) -> None:
        if not self.closed:
            if quiet:
                log.info("closing connection from %s: %s", self.peer, reason)
            else:
                self.limits.rejections.warning(kind, self.ip, "closing connection from %s: %s",
                                               self.peer, reason)
            self.closed = True
            self.transport.close()

    def _handle_frame(self, frame: memoryview) -> None:
        if self.sasl is not None and self.sasl.raw_tokens:
            # after a SaslHandshake v0: the frame is a bare token of the exchange
            task = self.loop.create_task(self._sasl_raw_token(bytes(frame)))
            self._enqueue(task, ApiKey.SASL_AUTHENTICATE, True, self._charge(len(frame)),
                          None)
            return
        try:
            header = messages.decode_request_header(frame)
        except KafkaError as error:
            self.close("unreadable request", f"unreadable request header: {error.message}")
            return
        if header.api_key not in HANDLERS:
            self.close("unreadable request", f"unknown API key {header.api_key}")
            return
        api_key = ApiKey(header.api_key)
        sasl_exchange = False
        if self.sasl is not None:
            sasl_exchange = self._sasl_route(api_key)
            if self.closed:
                return
        handler = HANDLERS[api_key]
        if header.api_version not in handler.VERSIONS:
            if api_key is ApiKey.API_VERSIONS:
                # KIP-511: answer an unknown ApiVersions version with v0 and our versions.
                parts = messages.encode_response(header.api_key, 0, header.correlation_id,
                                                 api_versions.unsupported_version_response())
                self._charge(_size(parts))
                self._enqueue(parts, ApiKey.API_VERSIONS, True, self._charge(len(frame)), None)
                return
            if not messages.can_encode(api_key, header.api_version):
                self.close("unreadable request",
                           f"{api_key.name} v{header.api_version} is not supported")
                return
        try:
            request = messages.decode_request(header, frame)
        except KafkaError as error:
            self.close("unreadable request",
                       f"{api_key.name} v{header.api_version} request: {error.message}")
            return
        unreadable = getattr(handler, "unreadable", None)  # what Kafka cannot even build
        if unreadable is not None and (reason := unreadable(request)) is not None:
            self.close("unreadable request", f"{api_key.name} v{header.api_version} request: "
                                             f"{reason}")
            return
        charge = self._charge(len(frame) * DECODED_COST_FACTOR)
        self.client_id = header.client_id
        principal = self.sasl.principal if self.sasl is not None else self.principal
        ctx = RequestContext(api_key, header.api_version, header.correlation_id,
                             header.client_id, self.peer, self.services, self.listener,
                             principal or ANONYMOUS, self.ip)
        expects = request.expect_response()
        written = None
        after = None
        if api_key is ApiKey.FETCH:
            after, written = self.fetch_written, self.loop.create_future()
            self.fetch_written = written
        if sasl_exchange:
            task = self.loop.create_task(self._sasl_exchange(header, request))
        else:
            task = self.loop.create_task(self._run(ctx, header, request, expects, after))
        if api_key not in ABANDONED_WITH_CONNECTION:
            self.broker.finishing_requests.add(task)
            task.add_done_callback(functools.partial(_finished, self.broker.finishing_requests))
        self._enqueue(task, api_key, expects, charge, written)

    def _charge(self, nbytes: int) -> int:
        if not self.admitted:
            return 0  # gone: connection_lost already gave everything back
        self.pool.charge(nbytes)
        self.held_charges += nbytes
        return nbytes

    def _uncharge(self, nbytes: int) -> None:
        if nbytes and self.admitted:
            self.held_charges -= nbytes
            self.pool.release(nbytes)

    async def _run(self, ctx: RequestContext, header, request, expects: bool,
                   after: asyncio.Future | None):
        """Run one request; return its encoded response (charged) or, with no response
        expected, the response object itself."""
        if after is not None:
            await after  # the previous fetch on this connection was handed to the transport
        response = await dispatch(ctx, request)
        if not expects:
            return response
        parts = messages.encode_response(header.api_key, header.api_version,
                                         header.correlation_id, response)
        self._charge(_size(parts))
        return parts

    # -- SASL ------------------------------------------------------------------------------

    def _sasl_route(self, api_key: ApiKey) -> bool:
        """Whether this request is the SASL exchange's (answered by ``_sasl_exchange``);
        closes the connection for a request not allowed in its state (ILLEGAL_SASL_STATE,
        as Kafka). Other SASL requests go to their handlers, which answer
        ILLEGAL_SASL_STATE."""
        sasl = self.sasl
        assert sasl is not None
        if api_key is ApiKey.API_VERSIONS:
            return False
        if api_key is ApiKey.SASL_HANDSHAKE:
            return not sasl.authenticated or bool(sasl.reauth_ms)
        if api_key is ApiKey.SASL_AUTHENTICATE and sasl.exchanging:
            return True
        if not sasl.authenticated:
            self.close("SASL state", f"{api_key.name} before SASL authentication "
                       "(ILLEGAL_SASL_STATE)")
        elif sasl.expired():
            self.close("SASL expired", "its SASL session ended (connections.max.reauth.ms) "
                       f"and {api_key.name} came instead of a re-authentication", quiet=True)
        return False

    async def _sasl_exchange(self, header, request) -> tuple:
        """Answer SaslHandshake or SaslAuthenticate with this connection's ``SaslServer``."""
        sasl = self.sasl
        assert sasl is not None
        response: messages.ApiMessage
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            mechanism = str(request.mechanism)
            ok = sasl.handshake(mechanism, raw_tokens=header.api_version == 0)
            response = messages.SaslHandshakeResponse(
                error_code=ErrorCode.NONE if ok else ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                mechanisms=list(sasl.mechanisms))
        else:
            try:
                token, done = await sasl.authenticate(messages.as_bytes(request.auth_bytes))
            except AuthenticationFailed as failure:
                await self._sasl_failed(failure)
                response = messages.SaslAuthenticateResponse(
                    error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(failure),
                    auth_bytes=b"", session_lifetime_ms=0)
            else:
                response = messages.SaslAuthenticateResponse(
                    error_code=ErrorCode.NONE, error_message=None, auth_bytes=token,
                    session_lifetime_ms=sasl.session_lifetime_ms() if done else 0)
        parts = messages.encode_response(header.api_key, header.api_version,
                                         header.correlation_id, response)
        self._charge(_size(parts))
        return parts

    async def _sasl_raw_token(self, token: bytes) -> tuple:
        """One bare token after a SaslHandshake v0, answered bare (Kafka's v0 framing); a
        failure closes the connection without an answer, as Kafka's does."""
        sasl = self.sasl
        assert sasl is not None
        try:
            answer, _done = await sasl.authenticate(token)
        except AuthenticationFailed as failure:
            await self._sasl_failed(failure)
            return ()
        parts = (_SIZE.pack(len(answer)) + answer,)
        self._charge(_size(parts))
        return parts

    async def _sasl_failed(self, failure: AuthenticationFailed) -> None:
        """After ``connection.failed.authentication.delay.ms``, one line (per address and
        interval); the writer closes the connection once the answer, if any, is sent."""
        self.sasl_failed = True
        await asyncio.sleep(self.limits.failed_authentication_delay_ms / 1000)
        assert self.sasl is not None
        self.limits.rejections.warning(
            "SASL authentication", self.ip, "closing connection from %s: SASL %s "
            "authentication failed: %s", self.peer, self.sasl.mechanism, failure)

    def _enqueue(self, item, api_key: ApiKey, expects: bool, charge: int,
                 written: asyncio.Future | None) -> None:
        self.pending.put_nowait((item, api_key, expects, charge, written))

    async def _write_responses(self) -> None:
        try:
            while True:
                item, api_key, expects, charge, written = await self.pending.get()
                if not isinstance(item, asyncio.Task):
                    result = item
                elif item in self.broker.finishing_requests:
                    # shielded: this writer is cancelled with its connection, the request not
                    result = await asyncio.shield(item)
                else:
                    result = await item
                if _IN_FLIGHT in self.paused_for and self.pending.qsize() < MAX_IN_FLIGHT // 2:
                    self._resume(_IN_FLIGHT)
                    self._process()
                if not expects:
                    self._uncharge(charge)
                    if _produce_failed(result):
                        self.close("failed acks=0 produce", "an acks=0 produce request "
                                   "failed; closing so the client notices")
                    continue
                if self.closed:
                    return
                await self.can_write.wait()
                for part in result:  # not writelines: before 3.12 it joins, a copy of it all
                    if isinstance(part, FileRegion):
                        if not await self._send_region(part):
                            return
                    else:
                        self.transport.write(part)
                self.last_activity = self.loop.time()
                if api_key is ApiKey.SASL_AUTHENTICATE and self.sasl_failed:
                    self.closed = True  # logged by _sasl_exchange; the answer goes first
                    self.transport.close()
                    return
                self._uncharge(charge + _size(result))
                self._recharge_writes()
                if written is not None and not written.done():
                    written.set_result(None)
                if (api_key is ApiKey.METADATA and self.services.brokers.cut_off
                        and self.pending.empty()):
                    # its answer named no leaders: the client's next question goes elsewhere
                    # (not while other requests are in flight behind it: closing would fail
                    # them; with no leader here the client soon sends Metadata alone)
                    self.close("cut off", "answered Metadata while cut off from the store",
                               quiet=True)
                    return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("failed to send a response to %s", self.peer)
            self.close("internal error", "internal error while writing a response")

    async def _send_region(self, region: FileRegion) -> bool:
        """Send a segment file's range with ``os.sendfile`` (no copy through this process).
        When the socket fills, wait until the reader drained it (``WriteWaiter``) and go on.
        Only behind bytes the transport still holds (an encoded part it could not send at
        once), or without a way to wait, the rest is read and handed to the transport, which
        sends it as the reader reads: the event loop (uvloop) allows no writer of our own on
        its socket. False if the connection was closed instead."""
        transport = self.transport
        if self.closed or transport.is_closing():
            return False
        socket_fd = transport.get_extra_info("socket").fileno()
        waiter = self.broker.write_waiter
        offset, remaining = region.offset, region.size
        try:
            # under TLS the bytes are encrypted here, not by the kernel: read and hand over
            while not self.tls and remaining and not transport.get_write_buffer_size():
                try:
                    sent = os.sendfile(socket_fd, region.fd, offset, remaining)
                except BlockingIOError:
                    if waiter is None or not waiter.available:
                        break  # the transport sends the rest
                    await waiter.wait(socket_fd)
                    if self.closed or transport.is_closing():
                        return False
                    continue
                if sent == 0:
                    break
                offset += sent
                remaining -= sent
                self.last_activity = self.loop.time()  # the reader is taking what we send
            rest = os.pread(region.fd, remaining, offset) if remaining else b""
        except OSError as error:
            self.close("connection lost", f"sending a response failed: {error}", quiet=True)
            return False
        if len(rest) < remaining:  # the file is shorter than the region: truncated meanwhile
            self.close("internal error", f"{region} ended early: the log was truncated while "
                       "a fetch response was being sent")
            return False
        if rest:
            transport.write(rest)
        return True

    def _recharge_writes(self) -> None:
        """Charge the pool with what the transport still has to send (a slow reader's
        responses), instead of what the writer had charged for them."""
        if not self.admitted:  # admitted in connection_made: self.transport is set
            return
        unsent = self.transport.get_write_buffer_size() if not self.closed else 0
        if unsent > self.write_charge:
            self.pool.charge(unsent - self.write_charge)
        elif unsent < self.write_charge:
            self.pool.release(self.write_charge - unsent)
        self.write_charge = unsent


def _finished(finishing: set[asyncio.Task], task: asyncio.Task) -> None:
    """A request that runs to its end is done: forget it. Its outcome is read here, as its
    connection may have gone and with it the writer that would have read it (``_run``
    answers errors itself; what reaches here is a bug, logged once)."""
    finishing.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("a request failed after its client left", exc_info=task.exception())


def _produce_failed(response) -> bool:
    return any(p.error_code != ErrorCode.NONE
               for t in getattr(response, "responses", [])
               for p in getattr(t, "partition_responses", []))


def _size(parts: tuple) -> int:
    return sum(len(part) for part in parts)
