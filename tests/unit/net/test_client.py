"""The replica fetcher's connection reads a large response in few wakeups (SO_RCVLOWAT on a
real loopback socket, under uvloop as the broker runs), and never waits for bytes that will
not come: the tail of a frame, and frames larger than the kernel's cap on the mark."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
import time

import pytest
import uvloop

from oncelog.net.client import _ResponseReader


class CountingReader(_ResponseReader):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def buffer_updated(self, nbytes: int) -> None:
        self.reads += 1
        super().buffer_updated(nbytes)


def send_in_pieces(server: socket.socket, frames: list[bytes], piece: int,
                   pause_s: float) -> threading.Thread:
    def run() -> None:
        connection, _ = server.accept()
        with connection:
            for frame in frames:
                data = struct.pack(">i", len(frame)) + frame
                for start in range(0, len(data), piece):
                    connection.sendall(data[start:start + piece])
                    time.sleep(pause_s)
                connection.recv(1)  # the next frame once the reader asked for it

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def read_frames(frames: list[bytes], piece: int, pause_s: float) -> tuple[list[bytes], int]:
    server = socket.create_server(("127.0.0.1", 0))
    thread = send_in_pieces(server, frames, piece, pause_s)

    async def main() -> tuple[list[bytes], int]:
        loop = asyncio.get_running_loop()
        transport, reader = await loop.create_connection(
            CountingReader, *server.getsockname())
        received = []
        try:
            for _ in frames:
                reader.waiter = loop.create_future()
                received.append(bytes(await asyncio.wait_for(reader.waiter, 20)))
                transport.write(b"n")
        finally:
            transport.close()
        return received, reader.reads

    try:
        return asyncio.Runner(loop_factory=uvloop.new_event_loop).run(main())
    finally:
        thread.join(5)
        server.close()


@pytest.mark.skipif(not hasattr(socket, "SO_RCVLOWAT"), reason="needs SO_RCVLOWAT")
def test_a_large_response_trickling_in_is_read_in_a_few_wakeups_not_one_per_piece():
    frame = os.urandom(2 << 20)
    received, reads = read_frames([frame], piece=64 * 1024, pause_s=0.003)  # 32 pieces
    assert received == [frame]
    assert reads <= 6, f"{reads} reads for 32 pieces"


def test_the_tail_of_a_frame_and_frames_beyond_the_kernels_cap_arrive_without_waiting():
    frames = [os.urandom(8 << 20), os.urandom(100 * 1024), os.urandom(10), os.urandom(300_000)]
    started = time.monotonic()
    received, _ = read_frames(frames, piece=256 * 1024 + 17, pause_s=0.001)
    assert received == frames
    assert time.monotonic() - started < 10
