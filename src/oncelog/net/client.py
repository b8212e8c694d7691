"""A minimal Kafka-protocol client for broker-to-broker requests (a follower's Fetch and
OffsetForLeaderEpoch to its leader, a transaction coordinator's WriteTxnMarkers) and for the
few requests oncelog's tools send themselves (``client.metadata``, ``client.transactions``).

One TCP connection, one request in flight at a time (a fetcher waits for each answer before
sending the next, as Kafka's ``ReplicaFetcherThread`` does), the same codecs the broker
serves with (``protocol.messages``). Callers that share a client (the transaction
coordinator's marker writers, one task per completing transaction) queue on a lock: the
reader hands each frame to the one waiting request, so two in flight would take each
other's answers. Every failure — refused, reset, timed out, a response
that does not decode — is a ``ConnectionError``; the caller backs off and reconnects.

Responses are read with a ``BufferedProtocol`` straight into one buffer, reused from response
to response: a follower's fetch response is a megabyte of records, which a ``StreamReader``
copied three times (into its buffer, out of it, and the slice past the header) before
decoding, and a fresh megabyte per response costs page faults (``benchmarks/cluster.py``
measured the follower's CPU per byte halved by both). While the rest of a large response is
on its way, ``SO_RCVLOWAT`` asks the kernel to wake us only once it is there (or as much of
it as the kernel allows, a few megabytes): read as it trickled in over loopback, a megabyte
took about nine reads, each a wakeup of this process and a pass of the event loop.

A client made with a ``Connector`` (``net.connector``: a broker's connections to other
brokers) speaks the inter-broker listener's protocol: TLS under the connector's context, and
SASL authentication before the first request of each connection.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from typing import TYPE_CHECKING, Any

from ..protocol import messages
from ..protocol.messages import ApiMessage

from .connector import AuthenticationError

if TYPE_CHECKING:
    from .connector import Connector

_SIZE = struct.Struct(">i")
CLIENT_ID = b"oncelog-replica-fetcher"
# A broker's response is bounded by what we asked (replica.fetch.response.max.bytes, or
# one oversized batch); far beyond that is a broken peer, not a frame to allocate.
MAX_RESPONSE_BYTES = 1 << 30
# Frames with at least this much still to come are read in one go (SO_RCVLOWAT); the kernel
# caps the mark at half its largest receive buffer, and we lower it as the rest shrinks, so
# the last bytes of a frame never wait for bytes that will not come.
WAKE_FOR_AT_LEAST = 64 * 1024


class _ResponseReader(asyncio.BufferedProtocol):
    """Reads size-prefixed frames; hands each whole frame to the waiting request."""

    def __init__(self) -> None:
        self.transport: asyncio.BaseTransport | None = None
        self.waiter: asyncio.Future[memoryview] | None = None
        self.error: Exception | None = None
        self._size = bytearray(4)
        self._frame: memoryview | None = None  # the frame being read, in _buffer
        self._buffer = bytearray(0)  # reused: a fresh megabyte per response costs page faults
        self._filled = 0
        self._socket: socket.socket | None = None  # for SO_RCVLOWAT; None where it cannot be set
        self._low_mark = 1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        if hasattr(socket, "SO_RCVLOWAT"):
            self._socket = transport.get_extra_info("socket")

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is None:
            return memoryview(self._size)[self._filled:]
        return self._frame[self._filled:]

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        if self._frame is None:
            if self._filled < 4:
                return
            (size,) = _SIZE.unpack(self._size)
            if not 0 < size <= MAX_RESPONSE_BYTES:
                self._fail(ValueError(f"response frame of {size} bytes"))
                return
            if size > len(self._buffer):
                self._buffer = bytearray(size)
            self._frame, self._filled = memoryview(self._buffer)[:size], 0
            self._wake_for(size)
        elif self._filled == len(self._frame):
            frame, self._frame, self._filled = self._frame, None, 0
            self._wake_for(1)
            if self.waiter is None or self.waiter.done():
                self._fail(ValueError("a response nobody asked for"))
                return
            self.waiter.set_result(frame)  # used up before the next request reuses it
        else:
            remaining = len(self._frame) - self._filled
            if remaining < self._low_mark:
                self._wake_for(remaining)

    def _wake_for(self, nbytes: int) -> None:
        """Be woken when ``nbytes`` more arrived (when they are many), not at every packet."""
        mark = nbytes if nbytes >= WAKE_FOR_AT_LEAST else 1
        if mark == self._low_mark or self._socket is None:
            return
        try:
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, mark)
        except OSError:
            self._socket = None  # reading as bytes come is correct, only busier
            return
        self._low_mark = mark

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or EOFError("connection closed by the broker"))

    def _fail(self, error: Exception) -> None:
        self.error = self.error or error
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(self.error)
        if self.transport is not None:
            self.transport.close()


class BrokerClient:
    def __init__(self, host: str, port: int, timeout_s: float = 30.0,
                 connector: Connector | None = None) -> None:
        self.host, self.port = host, port
        self.timeout_s = timeout_s
        self.connector = connector  # None: PLAINTEXT
        self._session_ends: float | None = None  # a SASL session's end (monotonic seconds)
        self._transport: asyncio.Transport | None = None
        self._reader: _ResponseReader | None = None
        self._correlation_id = 0
        self._one_at_a_time = asyncio.Lock()

    def __repr__(self) -> str:
        return f"BrokerClient({self.host}:{self.port})"

    async def request(self, request: ApiMessage, version: int) -> Any:
        """Send ``request`` at ``version``; return the decoded response (of the request's
        API: the caller names its class). Concurrent callers take turns; ``timeout_s`` counts
        from a caller's turn."""
        async with self._one_at_a_time:
            try:
                return await asyncio.wait_for(self._round_trip(request, version),
                                              self.timeout_s)
            except AuthenticationError as error:  # said as it is, once per back-off
                self.close()
                raise AuthenticationError(f"{self.host}:{self.port}: {error}") from None
            except ssl.SSLError as error:
                self.close()
                assert self.connector is not None  # TLS only with a connector
                raise ConnectionError(f"{self.host}:{self.port}: "
                                      f"{self.connector.tls_failed(error)}") from None
            except (TimeoutError, OSError, ValueError, EOFError) as error:
                self.close()
                raise ConnectionError(f"{self.host}:{self.port}: {type(error).__name__}: "
                                      f"{error}") from None

    async def _round_trip(self, request: ApiMessage, version: int) -> Any:
        loop = asyncio.get_running_loop()
        if (self._session_ends is not None and self.connector is not None
                and self.connector.monotonic() >= self._session_ends):
            self.close()  # the SASL session ends soon: a new connection, a new login
        if self._transport is None or self._reader is None or self._reader.error is not None:
            self.close()
            await self._connect(loop)
        return await self._exchange(request, version)

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> None:
        connector = self.connector
        if connector is None:
            self._transport, self._reader = await loop.create_connection(
                _ResponseReader, self.host, self.port)
            return
        connector.check_not_refused(self.host, self.port)
        context = connector.ssl_context
        self._transport, self._reader = await loop.create_connection(
            _ResponseReader, self.host, self.port, ssl=context,
            server_hostname=self.host if context is not None else None)
        if connector.login is not None:
            self._session_ends = await connector.authenticate(self.host, self.port,
                                                              self._exchange)

    async def _exchange(self, request: ApiMessage, version: int) -> Any:
        assert self._transport is not None and self._reader is not None
        api_key = request.API_KEY
        self._correlation_id += 1
        head = struct.pack(">hhih", api_key, version, self._correlation_id,
                           len(CLIENT_ID)) + CLIENT_ID
        if messages.is_flexible(api_key, version):
            head += b"\x00"  # no tagged fields in the request header
        body = head + bytes(request.encode(version=version))
        reader = self._reader
        reader.waiter = asyncio.get_running_loop().create_future()
        self._transport.write(_SIZE.pack(len(body)) + body)
        frame = await reader.waiter
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        if correlation_id != self._correlation_id:
            raise ValueError(f"correlation id {correlation_id}, expected {self._correlation_id}")
        # response header v1 (flexible) carries tagged fields; ApiVersions never does
        skip = 5 if messages.is_flexible(api_key, version) else 4
        # Records stay views of the reused buffer: the caller is done with them (a
        # follower's append) before it sends its next request.
        return messages.decode_response_views(api_key, version, frame[skip:])

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._transport = self._reader = None
        self._session_ends = None
