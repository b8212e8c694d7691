"""Wire faults for tests: a Kafka-framing proxy whose faults are armed and cleared at any time.

``WireProxy(upstream)`` listens on a free loopback port and forwards every connection to one
Kafka-compatible broker (oncelog's, Apache Kafka, Tansu, ...); Metadata, FindCoordinator and
DescribeCluster responses are rewritten to name the proxy, so clients stay behind it. It
relies on nothing but the Kafka protocol. Faults, named as Kafka names things:

- ``fail_next(api, error, count, topic, partition)`` answers the next ``count`` requests of
  ``api`` (only those naming ``topic``/``partition`` when given) with ``error`` in every
  error field, *without forwarding them*: the broker never sees them (librdkafka's
  ``rd_kafka_mock_push_request_errors``, Kafka's fault-injection proxy). The response is
  built by oncelog's own handlers' ``error_response`` and encoded at the request's version
  (so only APIs oncelog serves can be failed this way). The topic filter matches requests
  that name topics; a request carrying topic ids only (Fetch v13+) never matches it;
- ``drop_response(api, count)`` forwards the request, swallows its response and closes the
  connection: the broker did the work, the client never heard and retries at once (the
  verifier's ``drop_mode="close"``);
- ``delay(api, ms)`` holds each response of ``api`` for ``ms`` (responses stay in order);
- ``disconnect_on(api)`` closes the connection when a request of ``api`` arrives (not
  forwarded);
- ``blackhole(client_id)`` swallows every request of that client, answering nothing; its
  connections stay open, like a partitioned network.

Each call takes effect before it returns (the rule list is shared under a lock) and returns
its ``WireFault``, whose ``applied`` counts how often it fired; ``count=None`` means until
``clear()``. Responses leave in request order on every connection even when some are made
up here: a made-up response waits for the upstream responses of requests sent before it.
A Produce with ``acks=0`` gets no response, made up or not.

Built on ``oncelog.verify.proxy.FaultProxy`` (listening, stopping, address rewriting); only
the per-connection loop is this module's.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..protocol import messages
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..verify.proxy import FaultProxy, ThreadedProxy, _read_frame

log = logging.getLogger(__name__)

__all__ = ["API_NAMES", "ERROR_NAMES", "UnknownName", "WireFault", "WireFaults", "WireProxy",
           "api_key_of", "error_code_of", "proxy"]


def _kafka_name(enum_name: str) -> str:
    # INIT_PRODUCER_ID -> InitProducerId
    return "".join(part.capitalize() for part in enum_name.split("_"))


API_NAMES: dict[str, ApiKey] = {_kafka_name(key.name): key for key in ApiKey}
ERROR_NAMES: dict[str, ErrorCode] = {code.name: code for code in ErrorCode}


class UnknownName(ValueError):
    """An API or error name the kit does not know; the message lists the valid ones."""


def api_key_of(api: str | ApiKey) -> ApiKey:
    """``"Produce"`` (Kafka's name; case and underscores are forgiven) -> ``ApiKey.PRODUCE``."""
    if isinstance(api, ApiKey):
        return api
    wanted = str(api).replace("_", "").lower()
    for name, key in API_NAMES.items():
        if name.lower() == wanted:
            return key
    raise UnknownName(f"unknown Kafka API {api!r}; valid names: {', '.join(API_NAMES)}")


def error_code_of(error: str | ErrorCode) -> ErrorCode:
    """``"NOT_LEADER_OR_FOLLOWER"`` -> ``ErrorCode.NOT_LEADER_OR_FOLLOWER``."""
    if isinstance(error, ErrorCode):
        return error
    code = ERROR_NAMES.get(str(error).upper())
    if code is None:
        raise UnknownName(f"unknown Kafka error {error!r}; valid names: "
                          f"{', '.join(name for name in ERROR_NAMES if name != 'NONE')}")
    return code


def _error_handlers() -> dict:
    # The broker's handlers know how to answer each request they serve with one error for
    # every entity it names; importing them is the price of building exact responses.
    from ..broker.dispatch import HANDLERS
    return HANDLERS


@dataclass
class WireFault:
    """One armed fault. ``remaining`` counts down as it fires (``None``: until cleared)."""
    kind: str                          # fail, drop_response, delay, disconnect, blackhole
    api_key: ApiKey | None = None
    remaining: int | None = 1
    error_code: ErrorCode | None = None
    topic: str | None = None
    partition: int | None = None
    delay_ms: float = 0.0
    client_id: str | None = None
    applied: int = 0

    @property
    def exhausted(self) -> bool:
        return self.remaining is not None and self.remaining <= 0

    def describe(self) -> str:
        api = _kafka_name(self.api_key.name) if self.api_key is not None else "any API"
        return f"{self.kind} {api}" + (f" {self.error_code.name}" if self.error_code else "")


class WireFaults:
    """The armed faults of one proxy (or a group of proxies), safe to change from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[WireFault] = []

    def _arm(self, fault: WireFault) -> WireFault:
        if fault.remaining is not None and fault.remaining < 1:
            raise ValueError(f"count must be at least 1 (or None: until cleared), "
                             f"not {fault.remaining}")
        with self._lock:
            self._faults.append(fault)
        return fault

    def fail_next(self, api: str = "Produce", error: str = "NOT_LEADER_OR_FOLLOWER",
                  count: int | None = 1, topic: str | None = None,
                  partition: int | None = None) -> WireFault:
        api_key, code = api_key_of(api), error_code_of(error)
        if api_key not in _error_handlers():
            raise UnknownName(f"cannot make up a {_kafka_name(api_key.name)} response; "
                              f"fail_next knows: "
                              f"{', '.join(_kafka_name(k.name) for k in _error_handlers())}")
        return self._arm(WireFault("fail", api_key, count, error_code=code, topic=topic,
                                   partition=partition))

    def drop_response(self, api: str = "Produce", count: int | None = 1) -> WireFault:
        return self._arm(WireFault("drop_response", api_key_of(api), count))

    def delay(self, api: str | None = None, ms: float = 100.0,
              count: int | None = None) -> WireFault:
        return self._arm(WireFault("delay", api_key_of(api) if api else None, count,
                                   delay_ms=ms))

    def disconnect_on(self, api: str, count: int | None = 1) -> WireFault:
        return self._arm(WireFault("disconnect", api_key_of(api), count))

    def blackhole(self, client_id: str) -> WireFault:
        return self._arm(WireFault("blackhole", None, None, client_id=client_id))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    @property
    def armed(self) -> list[WireFault]:
        with self._lock:
            return [fault for fault in self._faults if not fault.exhausted]

    def take(self, kind: str, api_key: int, request_names=None, client_id=None
             ) -> WireFault | None:
        """The first armed fault of ``kind`` matching this request, counted as fired."""
        with self._lock:
            for fault in self._faults:
                if fault.kind != kind or fault.exhausted:
                    continue
                if fault.api_key is not None and fault.api_key != api_key:
                    continue
                if kind == "blackhole" and fault.client_id != client_id:
                    continue
                if (fault.topic is not None or fault.partition is not None) and \
                        not _names_match(fault, request_names()):
                    continue
                if fault.remaining is not None:
                    fault.remaining -= 1
                fault.applied += 1
                return fault
        return None


def _names_match(fault: WireFault, names: list[tuple[str, int | None]]) -> bool:
    return any((fault.topic is None or topic == fault.topic) and
               (fault.partition is None or partition is None or partition == fault.partition)
               for topic, partition in names)


def _names_once(header: messages.RequestHeader, body: memoryview
                ) -> Callable[[], list[tuple[str, int | None]]]:
    """The request's (topic, partition) names, decoded on the first call only: most requests
    never meet a fault that asks."""
    decoded: list[list[tuple[str, int | None]]] = []

    def names() -> list[tuple[str, int | None]]:
        if not decoded:
            try:
                decoded.append(request_topic_partitions(messages.decode_request(header, body)))
            except Exception:  # a version our codecs do not know: names nothing
                decoded.append([])
        return decoded[0]
    return names


def request_topic_partitions(request: object) -> list[tuple[str, int | None]]:
    """(topic, partition) pairs a decoded request names, for the common request shapes
    (Produce's topic_data/partition_data, Fetch's and ListOffsets' topics/partitions, ...)."""
    pairs: list[tuple[Any, int | None]] = []  # read by shape, not by the request's class
    for topics_field in ("topic_data", "topics"):
        for topic in getattr(request, topics_field, None) or []:
            if isinstance(topic, str):
                pairs.append((topic, None))
                continue
            name = getattr(topic, "name", None) or getattr(topic, "topic", None)
            partitions = (getattr(topic, "partition_data", None)
                          or getattr(topic, "partitions", None) or [])
            indexes = [p if isinstance(p, int) else
                       next((getattr(p, a) for a in ("index", "partition_index", "partition")
                             if isinstance(getattr(p, a, None), int)), None)
                       for p in partitions]
            pairs.extend((name, index) for index in indexes or [None])
    return pairs


_SHORT = struct.Struct(">h")


def _produce_acks(frame: memoryview, header: messages.RequestHeader) -> int:
    """A Produce request's ``acks`` without decoding the records (v3+: after the
    transactional id, a compact string from v9)."""
    position = header.body_offset
    if header.api_version >= 9:
        length, position = messages._read_uvarint(frame, position)
        position += max(length - 1, 0)
    elif header.api_version >= 3:
        (length,) = _SHORT.unpack_from(frame, position)
        position += 2 + max(length, 0)
    (acks,) = _SHORT.unpack_from(frame, position)
    return acks


def error_response_frame(header: messages.RequestHeader, body: memoryview,
                         code: ErrorCode) -> bytes | None:
    """The whole response frame answering this request with ``code``; None for acks=0."""
    request = messages.decode_request(header, body)
    if isinstance(request, messages.ProduceRequest) and request.acks == 0:
        return None
    response = _error_handlers()[header.api_key].error_response(request, code, None)
    return b"".join(bytes(part) if isinstance(part, (bytes, bytearray, memoryview))
                    else part.read() for part in messages.encode_response(
                        header.api_key, header.api_version, header.correlation_id, response))


class WireFaultProxy(FaultProxy):
    """``FaultProxy`` with ``WireFaults`` instead of random rules (see the module doc)."""

    def __init__(self, upstream: str, faults: WireFaults, listen: str = "127.0.0.1:0",
                 addresses: dict | None = None) -> None:
        super().__init__(upstream, listen=listen, addresses=addresses)
        self.faults = faults

    def _directions(self, client_reader, client_writer, upstream_reader, upstream_writer,
                    cut: asyncio.Event) -> list[asyncio.Task]:
        connection = _Connection(client_writer, upstream_writer)
        return [
            asyncio.create_task(self._guard(self._requests_of(client_reader, connection), cut)),
            asyncio.create_task(self._guard(self._responses_of(upstream_reader, connection),
                                            cut))]

    @staticmethod
    async def _guard(coroutine, cut: asyncio.Event) -> None:
        try:
            await coroutine
        except (OSError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("wire proxy: unexpected error; closing the connection")
        finally:
            cut.set()

    async def _requests_of(self, reader, connection: _Connection) -> None:
        faults = self.faults
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                return
            body = memoryview(frame)[4:]
            try:
                header = messages.decode_request_header(body)
            except Exception:
                connection.upstream_writer.write(frame)  # not ours to judge: the broker will
                await connection.upstream_writer.drain()
                continue
            api_key = header.api_key
            self.stats.requests += 1
            self.stats.versions_by_api.setdefault(api_key, set()).add(header.api_version)
            names = _names_once(header, body)
            if faults.take("blackhole", api_key, client_id=header.client_id):
                continue
            if faults.take("disconnect", api_key):
                return
            fault = faults.take("fail", api_key, names)
            if fault is not None:
                code = fault.error_code
                assert code is not None  # a "fail" fault names its error
                try:
                    response = error_response_frame(header, body, code)
                except Exception as error:
                    log.warning("wire proxy: cannot answer %s v%d with %s (%s); closing the "
                                "connection instead", ApiKey(api_key).name, header.api_version,
                                code.name, error)
                    return
                if response is not None:
                    connection.answer_in_order(response)
                    await connection.client_writer.drain()
                continue
            expects_response = not (api_key == ApiKey.PRODUCE and
                                    _produce_acks(body, header) == 0)
            if expects_response:
                drop = faults.take("drop_response", api_key) is not None
                delay = faults.take("delay", api_key)
                connection.sent(header.correlation_id, api_key, header.api_version, drop,
                                delay.delay_ms if delay else 0.0)
            connection.upstream_writer.write(frame)
            await connection.upstream_writer.drain()

    async def _responses_of(self, upstream_reader, connection: _Connection) -> None:
        while True:
            frame = await _read_frame(upstream_reader)
            if frame is None:
                return
            (correlation_id,) = struct.unpack_from(">i", frame, 4)
            api_key, version, drop, delay_ms = connection.received(correlation_id)
            if drop and api_key is not None:  # a dropped response was one we saw asked for
                self.stats.dropped_responses += 1
                self.stats.dropped_by_api[api_key] = self.stats.dropped_by_api.get(api_key, 0) + 1
                return  # and close: the client notices at once and retries
            if delay_ms:
                await asyncio.sleep(delay_ms / 1000)
            if api_key is not None and self._names_brokers(frame, api_key, version):
                frame = self._rewrite_addresses(frame, api_key, version)
            connection.client_writer.write(frame)
            for waiting in connection.answered(correlation_id):
                connection.client_writer.write(waiting)
            await connection.client_writer.drain()


class _Connection:
    """One client connection's requests in flight upstream, and the made-up responses
    waiting for them so that responses leave in request order."""

    def __init__(self, client_writer, upstream_writer) -> None:
        self.client_writer = client_writer
        self.upstream_writer = upstream_writer
        self.in_flight: deque[int] = deque()
        self.details: dict[int, tuple[int, int, bool, float]] = {}
        self.after: dict[int, list[bytes]] = {}

    def sent(self, correlation_id: int, api_key: int, version: int, drop: bool,
             delay_ms: float) -> None:
        self.in_flight.append(correlation_id)
        self.details[correlation_id] = (api_key, version, drop, delay_ms)

    def received(self, correlation_id: int) -> tuple[int | None, int, bool, float]:
        if correlation_id in self.details:
            self.in_flight.remove(correlation_id)
        return self.details.pop(correlation_id, (None, 0, False, 0.0))

    def answer_in_order(self, frame: bytes) -> None:
        if self.in_flight:
            self.after.setdefault(self.in_flight[-1], []).append(frame)
        else:
            self.client_writer.write(frame)

    def answered(self, correlation_id: int) -> list[bytes]:
        return self.after.pop(correlation_id, [])


class WireProxy(ThreadedProxy):
    """A ``WireFaultProxy`` on its own event loop in a daemon thread, for synchronous code;
    a context manager. Fault methods are ``WireFaults``'; ``faults`` is shared with the
    caller (a broker fixture clears it after each test)."""

    def __init__(self, upstream: str, *, faults: WireFaults | None = None,
                 listen: str = "127.0.0.1:0", addresses: dict | None = None) -> None:
        self.faults = faults or WireFaults()
        super().__init__(WireFaultProxy(upstream, self.faults, listen, addresses),
                         f"oncelog-wire-proxy-{upstream}")

    def fail_next(self, *args, **kwargs) -> WireFault:
        return self.faults.fail_next(*args, **kwargs)

    def drop_response(self, *args, **kwargs) -> WireFault:
        return self.faults.drop_response(*args, **kwargs)

    def delay(self, *args, **kwargs) -> WireFault:
        return self.faults.delay(*args, **kwargs)

    def disconnect_on(self, *args, **kwargs) -> WireFault:
        return self.faults.disconnect_on(*args, **kwargs)

    def blackhole(self, *args, **kwargs) -> WireFault:
        return self.faults.blackhole(*args, **kwargs)

    def clear(self) -> None:
        self.faults.clear()


@contextlib.contextmanager
def proxy(bootstrap: str, *, listen: str = "127.0.0.1:0"):
    """A ``WireProxy`` in front of any Kafka-compatible broker at ``bootstrap`` (one
    HOST:PORT) for the ``with`` block: point clients at its ``bootstrap``."""
    started = WireProxy(bootstrap.split(",")[0].strip(), listen=listen).start()
    try:
        yield started
    finally:
        started.stop()
