"""Replay a Kafka conversation against a broker and normalise what it answers.

A conversation (``conversations/*.json``) is a list of steps, each one request at one
version, written as the schema's fields (snake_case, as kafka-python's JSON schemas name
them). ``replay(bootstrap, conversation)`` sends them in order over one connection with
oncelog's own codecs (``oncelog.protocol.messages``) and returns each response as plain
data, normalised so that two brokers answering alike give equal data:

- **names**: a string ``$topic``, ``$group``, ``$txn`` ... in a request becomes a name unique
  to the run (the same on both brokers), and back to its token in the responses; entries of
  response arrays naming anything else (other tests' topics and groups, internal topics) are
  dropped.
- **learned ids**: ids a broker chooses (member ids, producer ids, topic ids, node ids) are
  replaced by ``@member#1``, ``@producer#2``, ... in order of first appearance; a request
  may carry such a token (a SyncGroup naming the member id JoinGroup returned) and gets the
  value this broker chose. A Produce batch's producer id is patched the same way (the CRC
  recomputed).
- **masked**: throttle times, cluster ids, hosts and ports, error messages (free text),
  the timestamps of control batches (broker time); arrays whose order the protocol leaves
  free are sorted.
- record sets are decoded into batches (header fields) and records.

- masked, besides: entries of unordered arrays are compared by their name (``configs[...]``,
  ``partitions[0]``), not their place.

A step names its API and ``version``, or ``"versions"``: a list, or ``"served"`` - one step
per version oncelog's handler serves (``%v`` in the step's strings becomes the version);
``"header_version"`` claims another version in the header than the body is written at
(ApiVersions v99, answered at v0).
Transient errors (a coordinator still loading, a leader not yet elected,
CONCURRENT_TRANSACTIONS, NOT_LEADER_OR_FOLLOWER; a Produce only when no partition took its
batch) are retried for up to ``RETRY_S`` seconds, the last answer kept; ``"retry": false``
turns that off, ``"retry_errors"`` adds codes, and ``"retry_until": {"dotted.path": value}``
retries until the response holds that value (``"$present"``: any value). A broker that
closes the connection instead of answering gives ``{"$closed": true}``, one that does not
answer within ``SOCKET_TIMEOUT_S`` ``{"$no_answer_within_s": ...}``; the next step
reconnects.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import socket
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oncelog.broker.dispatch import HANDLERS
from oncelog.protocol import messages
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.batches import CRC_START, HEADER, HEADER_SIZE, crc32c, parse_header
from oncelog.protocol.errors import ErrorCode
from oncelog.protocol.records import decode_records, make_batch

CONVERSATIONS = Path(__file__).parent / "conversations"
RETRY_S = 15.0
RETRIABLE = {ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
             ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.CONCURRENT_TRANSACTIONS,
             ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_LEADER_OR_FOLLOWER}
SOCKET_TIMEOUT_S = 12.0

# Kafka's names for the APIs: "InitProducerId" -> ApiKey.INIT_PRODUCER_ID
API_BY_NAME = {"".join(p.capitalize() for p in key.name.split("_")): key for key in ApiKey}
NAME_BY_API = {key: name for name, key in API_BY_NAME.items()}

# response field -> the namespace of ids a broker chooses
LEARNED = {"member_id": "member", "leader": "member", "producer_id": "producer",
           "topic_id": "topic_id", "node_id": "node", "leader_id": "node",
           "controller_id": "node", "replica_nodes": "node", "isr_nodes": "node",
           "offline_replicas": "node", "broker_id": "node", "coordinator_id": "node",
           "preferred_read_replica": "node"}
# request fields whose values may be tokens of learned ids
REQUEST_LEARNED = {"member_id": "member", "producer_id": "producer", "topic_id": "topic_id",
                   "leader": "member", "v3_and_below_producer_id": "producer"}
NOT_IDS = (None, -1, "", "00000000-0000-0000-0000-000000000000", "AAAAAAAAAAAAAAAAAAAAAA")
MASKED = {"throttle_time_ms", "cluster_id", "host", "port", "error_message",
          "leader_epoch_timestamp", "transaction_start_time_ms", "last_timestamp",
          "log_append_time_ms"}
# arrays whose order the protocol leaves free (sorted before comparing)
UNORDERED = {"brokers", "groups", "configs", "synonyms", "api_keys", "members",
             "transaction_states", "supported_features", "finalized_features",
             "coordinators", "partitions", "partition_responses", "responses", "topics",
             "results", "resources", "acls", "matching_acls"}
# arrays of entities: an entry whose name is not the conversation's is another test's
ENTITY_NAMES = ("name", "topic", "group_id", "transactional_id", "key")
ENTITY_ARRAYS = {"topics", "groups", "transaction_states", "coordinators", "responses"}

# the field naming an entry of an unordered array: such an array is compared as a map
KEYS = ("name", "topic", "resource_name", "partition_index", "partition", "index", "api_key",
        "node_id", "broker_id", "key", "group_id", "member_id", "transactional_id")
KEYED = "="  # prefix of a map entry made of an unordered array's entry

_NAME_TOKEN = re.compile(r"\$([a-z_]+[0-9]*)")
_LEARNED_TOKEN = re.compile(r"^@([a-z_]+)#([0-9]+)$")


class Closed(Exception):
    """The broker closed the connection."""


@dataclass
class Step:
    api: ApiKey
    version: int
    request: dict
    client_id: str | None = "differential"
    retry: bool = True
    retry_errors: tuple[int, ...] = ()
    retry_until: dict[str, Any] = field(default_factory=dict)  # dotted path -> value
    header_version: int | None = None  # the version the header claims, when not ``version``
    note: str = ""

    @property
    def label(self) -> str:
        return f"{NAME_BY_API[self.api]} v{self.version}"


@dataclass
class Conversation:
    name: str
    steps: list[Step]
    description: str = ""
    source: str = "hand"  # "hand" or "recorded"


def load(path: Path) -> Conversation:
    data = json.loads(path.read_text())
    steps: list[Step] = []
    for raw in data["steps"]:
        api = API_BY_NAME[raw["api"]]
        versions = raw.get("versions", raw.get("version"))
        if versions == "served":
            module = HANDLERS[api]
            versions = list(getattr(module, "ADVERTISED_VERSIONS", module.VERSIONS))
        elif isinstance(versions, int):
            versions = [versions]
        for version in versions:
            request = json.loads(json.dumps(raw.get("request", {})).replace("%v", str(version)))
            steps.append(Step(api, version, request,
                              client_id=raw.get("client_id", "differential"),
                              retry=raw.get("retry", True), note=raw.get("note", ""),
                              retry_errors=tuple(raw.get("retry_errors", ())),
                              retry_until=raw.get("retry_until", {}),
                              header_version=raw.get("header_version")))
    return Conversation(path.stem, steps, data.get("description", ""),
                        data.get("source", "hand"))


def all_conversations() -> list[Conversation]:
    return [load(path) for path in sorted(CONVERSATIONS.glob("*.json"))]


def authorizer_conversations() -> list[Conversation]:
    """Those replayed against brokers with ACLs on (``conversations/authorizer``)."""
    return [load(path) for path in sorted((CONVERSATIONS / "authorizer").glob("*.json"))]


# -- building requests ---------------------------------------------------------------------

@dataclass
class Run:
    """One replay's state: the names it made and the ids it learned."""

    names: dict[str, str]
    learned: dict[str, dict[Any, str]] = field(default_factory=dict)  # ns -> value -> token
    values: dict[str, Any] = field(default_factory=dict)  # token -> value

    def learn(self, namespace: str, value: Any) -> str:
        seen = self.learned.setdefault(namespace, {})
        token = seen.get(value)
        if token is None:
            token = seen[value] = f"@{namespace}#{len(seen) + 1}"
            self.values[token] = value
        return token


def _substitute(value: Any, run: Run) -> Any:
    if isinstance(value, str):
        if _LEARNED_TOKEN.match(value):
            if value not in run.values:
                raise KeyError(f"{value} was not learned before it is used")
            return run.values[value]
        return _NAME_TOKEN.sub(lambda m: run.names.setdefault(
            m.group(1), f"d-{m.group(1)}-{uuid.uuid4().hex[:10]}"), value)
    if isinstance(value, list):
        return [_substitute(item, run) for item in value]
    if isinstance(value, dict):
        if "$batch" in value:
            return _batch(value["$batch"], run)
        if "$bytes" in value:
            return _raw_batch(value, run)
        if "$text" in value:
            return value["$text"].encode()
        if "$subscription" in value:  # ConsumerProtocolSubscription v0
            topics = [_substitute(t, run) for t in value["$subscription"]]
            return (struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics)
                    + struct.pack(">i", -1))
        if "$assignment" in value:  # ConsumerProtocolAssignment v0
            owned = {_substitute(t, run): p for t, p in value["$assignment"].items()}
            return (struct.pack(">hi", 0, len(owned))
                    + b"".join(_string(t) + struct.pack(f">i{len(p)}i", len(p), *p)
                               for t, p in owned.items()) + struct.pack(">i", -1))
        return {key: _substitute(item, run) for key, item in value.items()}
    return value


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _batch(spec: dict, run: Run) -> bytes:
    spec = _substitute(spec, run)
    attributes = 0x10 if spec.get("transactional") else 0
    values = [None if v is None else v.encode() for v in spec.get("values", ["v"])]
    keys = spec.get("keys")
    batch = make_batch(values, keys=None if keys is None else
                       [None if k is None else k.encode() for k in keys],
                       timestamp_ms=spec.get("timestamp_ms", 1_700_000_000_000),
                       producer_id=spec.get("producer_id", -1),
                       producer_epoch=spec.get("producer_epoch", -1),
                       base_sequence=spec.get("base_sequence", -1), attributes=attributes,
                       codec=spec.get("codec", 0))
    if spec.get("corrupt_crc"):
        batch = batch[:17] + bytes([batch[17] ^ 0xFF]) + batch[18:]
    return batch


def _raw_batch(spec: dict, run: Run) -> bytes:
    """Recorded bytes; ``producer_id`` (a token) patched into every batch header."""
    data = bytearray(base64.b64decode(spec["$bytes"]))
    producer = spec.get("producer_id")
    if producer is None:
        return bytes(data)
    producer_id = _substitute(producer, run)
    position = 0
    while position + HEADER_SIZE <= len(data):
        header = parse_header(data, position)
        patched = header._replace(producer_id=producer_id)
        HEADER.pack_into(data, position, *patched)
        end = position + header.size
        struct.pack_into(">I", data, position + 17, crc32c(data[position + CRC_START:end]))
        position = end
    return bytes(data)


def _message(cls: Any, fields: dict) -> Any:
    """A codec message (or struct) from plain fields."""
    built = {}
    for name, value in fields.items():
        schema = cls._struct.fields.get(name) if hasattr(cls, "_struct") else None
        if schema is None:
            raise ValueError(f"{cls.__name__} has no field {name!r}")
        built[name] = _value(schema, value)
    return cls(**built)


def _value(schema: Any, value: Any) -> Any:
    if value is None:
        return None
    if schema.is_struct_array():
        return [_message(schema.data_class, item) for item in value]
    if schema.is_struct():
        return _message(schema.data_class, value)
    if schema.type_str == "uuid" and isinstance(value, str):
        return uuid.UUID(value)
    if schema.type_str in ("bytes", "records") and isinstance(value, str):
        return base64.b64decode(value)
    return value


def encode_request(step: Step, run: Run, correlation_id: int) -> bytes:
    request = _substitute(step.request, run)
    cls = messages.REQUESTS[step.api]
    if step.api == ApiKey.FETCH:  # a replay does not wait out a client's long poll
        request["max_wait_ms"] = min(request.get("max_wait_ms", 0), 200)
    body = _message(cls, request).encode(version=step.version)
    client = None if step.client_id is None else step.client_id.encode()
    claimed = step.version if step.header_version is None else step.header_version
    header = struct.pack(">hhi", step.api, claimed, correlation_id)
    header += struct.pack(">h", -1) if client is None else struct.pack(">h", len(client)) + client
    if messages.is_flexible(step.api, step.version):
        header += b"\x00"
    frame = header + bytes(body)
    return struct.pack(">i", len(frame)) + frame


# -- the connection ------------------------------------------------------------------------

class Connection:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.address = (host, int(port))
        self.sock: socket.socket | None = None
        self.correlation = 0

    def exchange(self, frame_without_id: Any, step: Step) -> bytes:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=SOCKET_TIMEOUT_S)
        self.correlation += 1
        self.sock.sendall(frame_without_id(self.correlation))
        if step.api == ApiKey.PRODUCE and step.request.get("acks") == 0:
            return b""
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        (correlation,) = struct.unpack_from(">i", frame)
        if correlation != self.correlation:
            raise AssertionError(f"{step.label}: correlation id {correlation}, expected "
                                 f"{self.correlation}")
        flexible = messages.is_flexible(step.api, step.version) and step.api != ApiKey.API_VERSIONS
        return frame[4 + (1 if flexible else 0):]

    def _read(self, size: int) -> bytes:
        assert self.sock is not None
        chunks, left = [], size
        while left:
            chunk = self.sock.recv(min(left, 1 << 20))
            if not chunk:
                self.close()
                raise Closed()
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


# -- decoding and normalising responses ----------------------------------------------------

def plain(message: Any, fields: Any, version: int,
          records: Callable[[bytes], Any] | None = None) -> dict:
    """A decoded message as plain data; record sets as ``records`` makes them (default:
    ``batches``)."""
    out: dict[str, Any] = {}
    for schema in fields:
        if not schema.for_version_q(version):
            continue
        value = getattr(message, schema.name)
        if value is None:
            out[schema.name] = None
        elif schema.is_struct_array():
            out[schema.name] = [plain(item, schema._fields, version, records)
                                for item in value]
        elif schema.is_struct():
            out[schema.name] = plain(value, schema._fields, version, records)
        elif schema.type_str == "records":
            out[schema.name] = (records or batches)(bytes(value))
        elif schema.type_str == "bytes":
            out[schema.name] = base64.b64encode(bytes(value)).decode()
        elif schema.type_str == "uuid":
            out[schema.name] = str(value)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            out[schema.name] = base64.b64encode(bytes(value)).decode()
        else:
            out[schema.name] = value
    return out


def batches(data: bytes) -> list[dict]:
    out, position = [], 0
    while position + HEADER_SIZE <= len(data):
        header = parse_header(data, position)
        if position + header.size > len(data):
            out.append({"partial_batch": True})  # a fetch may end in part of a batch
            break
        control = header.is_control
        batch: dict[str, Any] = {
            "base_offset": header.base_offset, "attributes": header.attributes,
            "partition_leader_epoch": header.partition_leader_epoch,
            "last_offset_delta": header.last_offset_delta,
            "producer_id": header.producer_id, "producer_epoch": header.producer_epoch,
            "base_sequence": header.base_sequence, "records_count": header.records_count,
            "base_timestamp": "<time>" if control else header.base_timestamp,
            "max_timestamp": "<time>" if control else header.max_timestamp,
        }
        batch["records"] = [
            {"offset": r.offset, "timestamp": "<time>" if control else r.timestamp,
             "key": None if r.key is None else base64.b64encode(r.key).decode(),
             "value": None if r.value is None else base64.b64encode(r.value).decode(),
             "headers": [[n, None if v is None else base64.b64encode(v).decode()]
                         for n, v in r.headers]}
            for r in decode_records(data[position:position + header.size], header)]
        out.append(batch)
        position += header.size
    return out


def decode_response(step: Step, body: bytes) -> dict:
    cls = messages.RESPONSES[step.api]
    version = step.version
    if step.api == ApiKey.API_VERSIONS and (
            step.header_version is not None
            or body[:2] == struct.pack(">h", ErrorCode.UNSUPPORTED_VERSION)):
        version = 0  # KIP-511: an unsupported version is answered at v0
    response = cls.decode(body, version=version)
    return plain(response, cls._struct._fields, version)


def normalise(value: Any, run: Run, key: str | None = None) -> Any:
    if key in MASKED:
        return "<masked>"
    if key in LEARNED:
        known = run.learned.get(LEARNED[key], {})
        if isinstance(value, list):
            return [known.get(v, v) for v in value]
        if not isinstance(value, dict):
            return known.get(value, value)
    if isinstance(value, dict):
        return {k: normalise(v, run, k) for k, v in value.items()}
    if isinstance(value, list):
        items = [normalise(item, run) for item in value]
        if items and all(isinstance(item, dict) for item in items):
            if key in ENTITY_ARRAYS:
                items = [item for item in items if _ours(item, run)]
            if key in UNORDERED:
                items.sort(key=lambda item: json.dumps(item, sort_keys=True, default=str))
                natural = next((k for k in KEYS if all(k in item for item in items)), None)
                if natural and len({str(item[natural]) for item in items}) == len(items):
                    return {f"{KEYED}{item[natural]}": item for item in items}
        return items
    if isinstance(value, str):
        return _names_back(value, run)
    return value


def _names_back(value: str, run: Run) -> str:
    for token, name in run.names.items():
        if name in value:
            value = value.replace(name, f"${token}")
    return value


def _ours(item: dict, run: Run) -> bool:
    """False for an entry naming another test's entity (or an internal topic)."""
    for key in ENTITY_NAMES:
        name = item.get(key)
        if isinstance(name, str) and name and not name.startswith("$") \
                and name not in run.names.values():
            return False
    return True


def _drop_foreign(value: Any, run: Run, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _drop_foreign(v, run, k) for k, v in value.items()}
    if isinstance(value, list):
        if key in ENTITY_ARRAYS:
            value = [item for item in value if not isinstance(item, dict) or _ours(item, run)]
        return [_drop_foreign(item, run) for item in value]
    return value


def _errors(value: Any) -> set[int]:
    found: set[int] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key.endswith("error_code") and isinstance(item, int):
                found.add(item)
            else:
                found |= _errors(item)
    elif isinstance(value, list):
        for item in value:
            found |= _errors(item)
    return found


def _at(value: Any, path: str) -> Any:
    """``topics.0.partitions.0.offset`` in a raw response (None when absent)."""
    for part in path.split("."):
        try:
            value = value[int(part)] if isinstance(value, list) else value[part]
        except (KeyError, IndexError, ValueError, TypeError):
            return None
    return value


def _learn_raw(value: Any, run: Run, key: str | None = None) -> None:
    """Learn the ids of a raw response (before names are turned back into tokens)."""
    if key in LEARNED and not isinstance(value, (dict, list)) and value not in NOT_IDS:
        run.learn(LEARNED[key], value)
    elif isinstance(value, dict):
        failed = value.get("error_code", 0) != 0
        for k, v in value.items():
            if not (failed and k == "producer_id"):  # an error's producer id is no id
                _learn_raw(v, run, k)
    elif isinstance(value, list):
        for item in value:
            _learn_raw(item, run, key if not isinstance(item, dict) else None)


@dataclass
class Exchange:
    step: Step
    response: Any  # normalised
    tries: int


def replay(bootstrap: str, conversation: Conversation, names: dict[str, str]) -> list[Exchange]:
    """Every step of ``conversation`` against ``bootstrap``; ``names`` maps tokens to names
    (shared by the brokers compared; filled as new tokens appear)."""
    run = Run(names)
    connection = Connection(bootstrap)
    out: list[Exchange] = []
    try:
        for step in conversation.steps:
            deadline = time.monotonic() + RETRY_S
            tries = 0
            while True:
                tries += 1
                try:
                    body = connection.exchange(
                        lambda correlation, step=step: encode_request(step, run, correlation),
                        step)
                    raw: Any = {} if not body else decode_response(step, body)
                except Closed:
                    raw = {"$closed": True}
                    break
                except TimeoutError:
                    connection.close()
                    raw = {"$no_answer_within_s": SOCKET_TIMEOUT_S}
                    break
                errors = _errors(raw)
                # a Produce that wrote to some partition is not sent twice
                again = errors & (RETRIABLE | set(step.retry_errors)) and not (
                    step.api == ApiKey.PRODUCE and ErrorCode.NONE in errors) or any(
                    (_at(raw, path) is None) if wanted == "$present" else _at(raw, path) != wanted
                    for path, wanted in step.retry_until.items())
                if not (step.retry and again and time.monotonic() < deadline):
                    break
                time.sleep(0.1)
            raw = _drop_foreign(raw, run)  # before learning: other tests' ids are not ours
            _learn_raw(raw, run)
            out.append(Exchange(step, normalise(raw, run), tries))
    finally:
        connection.close()
    return out


# -- comparing -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Difference:
    conversation: str
    step: int
    api: str
    version: int
    path: str  # indexes written as []
    where: str  # indexes written out
    kafka: Any
    oncelog: Any

    def describe(self) -> str:
        return (f"{self.conversation} step {self.step}: {self.api} v{self.version} "
                f"{self.where}: Apache Kafka {_short(self.kafka)}, oncelog {_short(self.oncelog)}")


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


MISSING = "<absent>"


def compare(conversation: str, kafka: list[Exchange], oncelog: list[Exchange]
            ) -> list[Difference]:
    found: list[Difference] = []
    for index, (k, o) in enumerate(zip(kafka, oncelog)):
        def add(path: str, where: str, a: Any, b: Any, index: int = index,
                step: Step = k.step) -> None:
            found.append(Difference(conversation, index, NAME_BY_API[step.api], step.version,
                                    path, where, a, b))
        _diff(k.response, o.response, "", "", add)
    return found


def _diff(a: Any, b: Any, path: str, where: str, add: Any) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [key for key in b if key not in a]:
            if key.startswith(KEYED):
                sub, subw = f"{path}[{key[1:]}]", f"{where}[{key[1:]}]"
            else:
                sub = f"{path}.{key}" if path else key
                subw = f"{where}.{key}" if where else key
            _diff(a.get(key, MISSING), b.get(key, MISSING), sub, subw, add)
    elif isinstance(a, list) and isinstance(b, list) and (
            any(isinstance(x, (dict, list)) for x in a + b)):
        for i in range(max(len(a), len(b))):
            _diff(a[i] if i < len(a) else MISSING, b[i] if i < len(b) else MISSING,
                  f"{path}[]", f"{where}[{i}]", add)
    elif a != b:
        add(path or "$", where or "$", a, b)


def copy_of(value: Any) -> Any:
    return copy.deepcopy(value)
