"""The listener: reads frames, runs requests, writes responses in request order.

Each connection is an ``asyncio.BufferedProtocol``. A frame is parsed as soon as it is complete and its
request starts as a task right away, so requests pipeline (several produce requests from one
producer are appended while earlier ones wait for their fsync). Tasks start in arrival order,
and a produce handler makes all its appends before its first ``await``, so appends keep the
order the client sent them in. A writer coroutine awaits the tasks in order and writes each
response, so responses leave in request order (as Kafka guarantees per connection).

A connection is closed, with one log line, only when a frame cannot be answered: a size
outside (0, socket.request.max.bytes], a header or body that does not parse, an unknown API
key, or a version our codec cannot even encode. acks=0 produce requests get no response; if
one fails, the connection is closed so the client notices (as Kafka does).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING

from ..protocol import messages
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from .context import RequestContext
from .dispatch import HANDLERS, dispatch
from .handlers import api_versions

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_IN_FLIGHT = 64  # requests read ahead of their responses before we stop reading


class Connection(asyncio.BufferedProtocol):
    """One client connection. Bytes arrive straight in ``self.buffer`` (no intermediate
    copies: the event loop reads into it), and frames are decoded from a view of it."""

    INITIAL_BUFFER = 256 * 1024
    MIN_FREE = 64 * 1024

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.max_frame = broker.config["socket.request.max.bytes"]
        self.buffer = bytearray(self.INITIAL_BUFFER)
        self.view = memoryview(self.buffer)
        self.filled = 0
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.pending: asyncio.Queue = asyncio.Queue()
        self.writer: asyncio.Task | None = None
        self.reading_paused = False
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.closed = False

    # -- asyncio.BufferedProtocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.broker.connections.add(self)
        self.writer = asyncio.get_running_loop().create_task(self._write_responses())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.connections.discard(self)
        if self.writer is not None:
            self.writer.cancel()
        while not self.pending.empty():
            _, task, _ = self.pending.get_nowait()
            if isinstance(task, asyncio.Task):
                task.cancel()

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self.buffer) - self.filled < self.MIN_FREE:
            self._resize(max(len(self.buffer) * 2, self.filled + self.MIN_FREE))
        return self.view[self.filled:]

    def buffer_updated(self, nbytes: int) -> None:
        self.filled += nbytes
        start = 0
        while self.filled - start >= 4 and not self.closed:
            (size,) = _SIZE.unpack_from(self.buffer, start)
            if size <= 0 or size > self.max_frame:
                self.close(f"frame of {size} bytes is outside (0, socket.request.max.bytes="
                           f"{self.max_frame}]")
                return
            end = start + 4 + size
            if end > self.filled:
                break
            # Decoding copies every field out of the view, so the buffer may be reused.
            self._handle_frame(self.view[start + 4:end])
            start = end
        self._keep_from(start)
        if self.pending.qsize() >= MAX_IN_FLIGHT and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()

    def _keep_from(self, start: int) -> None:
        """Move the unparsed tail to the front; make room for a frame that is still arriving."""
        remaining = self.filled - start
        if start:
            self.view[:remaining] = self.view[start:self.filled]
            self.filled = remaining
        if remaining >= 4:
            needed = 4 + _SIZE.unpack_from(self.buffer, 0)[0] + self.MIN_FREE
            if needed > len(self.buffer):
                self._resize(needed)
        elif not remaining and len(self.buffer) > 4 * self.INITIAL_BUFFER:
            self._resize(self.INITIAL_BUFFER)  # give back the room a large frame needed

    def _resize(self, size: int) -> None:
        buffer = bytearray(size)
        buffer[:self.filled] = self.view[:self.filled]
        self.buffer, self.view = buffer, memoryview(buffer)

    # -- requests --------------------------------------------------------------------------

    def close(self, reason: str) -> None:
        if not self.closed:
            log.warning("closing connection from %s: %s", self.peer, reason)
            self.closed = True
            self.transport.close()

    def _handle_frame(self, frame: memoryview) -> None:
        try:
            header = messages.decode_request_header(frame)
        except KafkaError as error:
            self.close(f"unreadable request header: {error.message}")
            return
        if header.api_key not in HANDLERS:
            self.close(f"unknown API key {header.api_key}")
            return
        api_key = ApiKey(header.api_key)
        handler = HANDLERS[api_key]
        if header.api_version not in handler.VERSIONS:
            if api_key is ApiKey.API_VERSIONS:
                # KIP-511: answer an unknown ApiVersions version with v0 and our versions.
                self._enqueue(header, 0, api_versions.unsupported_version_response(), True)
                return
            if not messages.can_encode(api_key, header.api_version):
                self.close(f"{api_key.name} v{header.api_version} is not supported")
                return
        try:
            request = messages.decode_request(header, frame)
        except KafkaError as error:
            self.close(f"{api_key.name} v{header.api_version} request: {error.message}")
            return
        ctx = RequestContext(api_key, header.api_version, header.correlation_id,
                             header.client_id, self.peer, self.broker)
        task = asyncio.get_running_loop().create_task(dispatch(ctx, request))
        self._enqueue(header, header.api_version, task, request.expect_response())

    def _enqueue(self, header, response_version: int, response_or_task, expects: bool) -> None:
        self.pending.put_nowait(((header, response_version), response_or_task, expects))

    async def _write_responses(self) -> None:
        try:
            while True:
                (header, version), item, expects = await self.pending.get()
                response = await item if isinstance(item, asyncio.Task) else item
                if self.reading_paused and self.pending.qsize() < MAX_IN_FLIGHT // 2:
                    self.reading_paused = False
                    self.transport.resume_reading()
                if not expects:
                    if _produce_failed(response):
                        self.close("an acks=0 produce request failed; closing so the "
                                   "client notices")
                    continue
                if self.closed:
                    return
                parts = messages.encode_response(header.api_key, version,
                                                 header.correlation_id, response)
                await self.can_write.wait()
                self.transport.writelines(parts)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("failed to send a response to %s", self.peer)
            self.close("internal error while writing a response")


def _produce_failed(response) -> bool:
    return any(p.error_code != ErrorCode.NONE
               for t in getattr(response, "responses", [])
               for p in getattr(t, "partition_responses", []))
