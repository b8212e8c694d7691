"""A bare Kafka-protocol socket for tests that must send exact (or broken) bytes."""

from __future__ import annotations

import socket
import struct

from oncelog.protocol import messages


class RawConnection:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def header(self, api_key: int, version: int, correlation_id: int | None = None) -> bytes:
        self.correlation_id += 1
        cid = self.correlation_id if correlation_id is None else correlation_id
        client_id = b"raw-test"
        head = struct.pack(">hhih", api_key, version, cid, len(client_id)) + client_id
        if messages.is_flexible(api_key, version):
            head += b"\x00"
        return head

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, request, version: int):
        """Send a kafka-python request object and decode the matching response."""
        api_key = request.API_KEY
        self.send_frame(self.header(api_key, version) + bytes(request.encode(version=version)))
        return self.read_response(api_key, version)

    def read_response(self, api_key: int, version: int):
        frame = self.read_frame()
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        assert correlation_id == self.correlation_id
        flexible = messages.is_flexible(api_key, version) and api_key != 18
        body = frame[5:] if flexible else frame[4:]
        return messages.RESPONSES[api_key].decode(body, version=version)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read_exactly(4))
        return self._read_exactly(size)

    def _read_exactly(self, count: int) -> bytes:
        chunks, remaining = [], count
        while remaining:
            chunk = self.sock.recv(remaining)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
