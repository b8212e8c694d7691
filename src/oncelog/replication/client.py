"""A minimal Kafka-protocol client for broker-to-broker requests (a follower's Fetch and
OffsetForLeaderEpoch to its leader).

One TCP connection, one request in flight at a time (a fetcher waits for each answer before
sending the next, as Kafka's ``ReplicaFetcherThread`` does), the same codecs the broker
serves with (``protocol.messages``). Every failure — refused, reset, timed out, a response
that does not decode — is a ``ConnectionError``; the caller backs off and reconnects.
"""

from __future__ import annotations

import asyncio
import struct

from ..protocol import messages

_SIZE = struct.Struct(">i")
CLIENT_ID = b"oncelog-replica-fetcher"


class BrokerClient:
    def __init__(self, host: str, port: int, timeout_s: float = 30.0) -> None:
        self.host, self.port = host, port
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0

    def __repr__(self) -> str:
        return f"BrokerClient({self.host}:{self.port})"

    async def request(self, request, version: int):
        """Send ``request`` at ``version``; return the decoded response."""
        try:
            return await asyncio.wait_for(self._round_trip(request, version), self.timeout_s)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError,
                EOFError) as error:
            self.close()
            raise ConnectionError(f"{self.host}:{self.port}: {type(error).__name__}: "
                                  f"{error}") from None

    async def _round_trip(self, request, version: int):
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        api_key = request.API_KEY
        self._correlation_id += 1
        head = struct.pack(">hhih", api_key, version, self._correlation_id,
                           len(CLIENT_ID)) + CLIENT_ID
        if messages.is_flexible(api_key, version):
            head += b"\x00"  # no tagged fields in the request header
        body = head + bytes(request.encode(version=version))
        self._writer.write(_SIZE.pack(len(body)) + body)
        await self._writer.drain()
        (size,) = _SIZE.unpack(await self._reader.readexactly(4))
        frame = await self._reader.readexactly(size)
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        if correlation_id != self._correlation_id:
            raise ValueError(f"correlation id {correlation_id}, expected {self._correlation_id}")
        # response header v1 (flexible) carries tagged fields; ApiVersions never does
        skip = 5 if messages.is_flexible(api_key, version) else 4
        return messages.RESPONSES[api_key].decode(frame[skip:], version=version)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
