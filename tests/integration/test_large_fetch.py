"""Large fetch responses leave the broker from the segment file (os.sendfile) between the
encoded parts of the response: every byte must still arrive, in order, framed, even when
the reader is slow (the socket fills and the broker waits for it) and requests pipeline."""

from __future__ import annotations

import os
import socket
import struct
import time

from oncelog.protocol.batches import iter_headers
from oncelog.protocol.fetch_body import SPLICE_MIN_BYTES
from oncelog.protocol.messages import RESPONSES, FetchRequest, FetchResponse, MetadataRequest
from oncelog.protocol.records import decode_records, make_batch

from tests.hostile.attack import memory_kib
from tests.integration.raw import RawConnection
from tests.integration.test_bad_input import produce
from tests.page_residency import MIB, produce_mib

FT = FetchRequest.FetchTopic
FP = FT.FetchPartition
TOPIC = "large-fetch"


def _fetch(topic: str, offset: int, version: int, max_bytes: int = 64 << 20) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
                        isolation_level=0, session_id=0, session_epoch=-1,
                        topics=[FT(topic=topic, partitions=[
                            FP(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes,
                               current_leader_epoch=-1, log_start_offset=-1)])],
                        forgotten_topics_data=[], rack_id="")


def _fill(conn: RawConnection, batches: int, values_per_batch: int) -> list[bytes]:
    conn.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                 allow_auto_topic_creation=True), 9)
    values = []
    for _ in range(batches):
        batch_values = [os.urandom(1000) for _ in range(values_per_batch)]
        assert produce(conn, TOPIC, make_batch(batch_values)).error_code == 0
        values += batch_values
    return values


def _small_window_connection(bootstrap: str, receive_buffer: int):
    """A raw connection whose socket holds only ``receive_buffer`` bytes unread."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    host, port = bootstrap.rsplit(":", 1)
    sock.connect((host, int(port)))
    sock.settimeout(30)
    conn = RawConnection.__new__(RawConnection)
    conn.sock, conn.correlation_id = sock, 0
    return sock, conn


def _values(records: bytes) -> list[bytes]:
    return [record.value for _, header in iter_headers(records)
            for record in decode_records(records[_:_ + header.size], header)]


def test_a_slow_reader_gets_every_byte_of_pipelined_large_fetches(broker):
    with RawConnection(broker.bootstrap) as conn:
        values = _fill(conn, batches=6, values_per_batch=500)  # ~3 MB in 6 batches

    # A small receive buffer and slow reads: the broker's sendfile meets a full socket.
    sock, conn = _small_window_connection(broker.bootstrap, 16 * 1024)
    with conn:
        versions = [4, 11, 12]  # plain and flexible (compact length) records fields
        for version in versions:
            request = _fetch(TOPIC, 0, version)
            conn.send_frame(conn.header(1, version) + bytes(request.encode(version=version)))
        conn.send_frame(conn.header(3, 9) + bytes(MetadataRequest(
            topics=None, allow_auto_topic_creation=False).encode(version=9)))
        time.sleep(0.5)  # let the broker fill the socket and wait on it

        received = b""
        sizes = []
        for expected_correlation_id in range(1, len(versions) + 2):
            (size,) = struct.unpack(">i", _slowly(sock, 4))
            frame = _slowly(sock, size)
            assert struct.unpack_from(">i", frame)[0] == expected_correlation_id
            sizes.append(size)
            received = frame
            if expected_correlation_id <= len(versions):
                version = versions[expected_correlation_id - 1]
                skip = 5 if version >= 12 else 4
                response = FetchResponse.decode(frame[skip:], version=version)
                partition = response.responses[0].partitions[0]
                assert partition.error_code == 0
                assert len(partition.records) >= SPLICE_MIN_BYTES
                assert _values(bytes(partition.records)) == values
        assert len(received) > 4  # the Metadata answer came after them, framed
    with RawConnection(broker.bootstrap) as conn:  # and the broker serves on
        assert produce(conn, TOPIC, make_batch([b"after"])).error_code == 0


def test_small_and_large_responses_pipelined_together_arrive_whole_and_in_order(broker):
    """Requests sent in one go, small answers around large Fetches that leave by sendfile:
    every answer must come back framed, in request order, with what it should hold."""
    from oncelog.protocol.messages import ApiVersionsRequest

    with RawConnection(broker.bootstrap) as conn:
        values = _fill(conn, batches=2, values_per_batch=600)  # ~1.2 MB
        small = ApiVersionsRequest(client_software_name="raw", client_software_version="1")
        metadata = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                   allow_auto_topic_creation=False)
        # Fetches answer with whole batches: from offset 0 both, from the last offset the second
        plan = ([(18, 3, small)] * 5 + [(1, 12, _fetch(TOPIC, 0, 12))] + [(3, 9, metadata)] * 3
                + [(1, 12, _fetch(TOPIC, len(values) - 1, 12))] + [(18, 3, small)] * 20)
        fetched = iter([values, values[600:]])
        first_id = conn.correlation_id + 1
        frames = []
        for api_key, version, request in plan:
            payload = conn.header(api_key, version) + bytes(request.encode(version=version))
            frames.append(struct.pack(">i", len(payload)) + payload)
        conn.send_raw(b"".join(frames))

        for number, (api_key, version, _) in enumerate(plan):
            frame = conn.read_frame()
            assert struct.unpack_from(">i", frame)[0] == first_id + number
            body = frame[4:] if api_key == 18 else frame[5:]  # ApiVersions: header v0
            response = RESPONSES[api_key].decode(body, version=version)
            if api_key == 1:
                records = bytes(response.responses[0].partitions[0].records)
                assert len(records) >= SPLICE_MIN_BYTES  # sent from the file, by sendfile
                assert _values(records) == next(fetched)
            elif api_key == 3:
                assert [t.name for t in response.topics] == [TOPIC]
            else:
                assert response.error_code == 0 and response.api_keys


def _slowly(sock: socket.socket, count: int) -> bytes:
    chunks, remaining = [], count
    while remaining:
        chunk = sock.recv(min(remaining, 64 * 1024))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        remaining -= len(chunk)
        time.sleep(0.001)
    return b"".join(chunks)


def test_a_fetch_within_a_large_batch_set_stops_at_max_bytes_on_whole_batches(broker):
    with RawConnection(broker.bootstrap) as conn:
        values = _fill(conn, batches=4, values_per_batch=200)  # 4 batches of ~200 KB
        response = conn.request(_fetch(TOPIC, 200, 11, max_bytes=450_000), 11)
        records = bytes(response.responses[0].partitions[0].records)
        # from the batch holding offset 200 (the second), two whole batches fit in 450 KB
        assert _values(records) == values[200:600]


def test_a_reader_that_does_not_keep_up_costs_the_broker_no_copy_of_its_response(broker):
    """The socket fills mid-region: the broker waits for it and sends the rest from the file
    too, instead of reading the rest into memory (tens of MB here) and queueing it."""
    produce_mib(broker.bootstrap, TOPIC, 48)
    before_kib = memory_kib(broker.pid)
    sock, conn = _small_window_connection(broker.bootstrap, 64 * 1024)
    with conn:
        conn.send_frame(conn.header(1, 11) + bytes(_fetch(TOPIC, 0, 11).encode(version=11)))
        time.sleep(1.0)  # not reading: the broker meets a full socket and must wait
        waiting_kib = memory_kib(broker.pid)
        (size,) = struct.unpack(">i", _slowly(sock, 4))
        response = FetchResponse.decode(_slowly(sock, size)[4:], version=11)
    records = bytes(response.responses[0].partitions[0].records)
    assert len(records) > 47 * MIB
    assert len(_values(records)) == 96  # every half-MiB value, whole
    assert waiting_kib - before_kib < 8 * 1024, f"{waiting_kib - before_kib} KiB more"
