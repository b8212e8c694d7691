"""One ZooKeeper 3.8 ensemble in memory: znodes, sessions, watches, zxids, on an injected clock.

``MemoryZooKeeper(clock)`` is the server side of ZooKeeper as a client sees it, single-threaded
and deterministic: no I/O, no threads, no wall clock (``clock()`` is in seconds; stat times are
its milliseconds). Paths are absolute (a client's chroot is the client's business:
``kazoo_client.MemoryKazooClient``). Operations raise kazoo's own exceptions, built without
arguments as kazoo builds them from a reply's error code. Where each rule comes from, in
ZooKeeper 3.8.0's source (checked against a real 3.8.0 by
``tests/cluster/test_memory_zookeeper_differential.py``):

- **zxids** (``PrepRequestProcessor.pRequestHelper``): every write request takes the next zxid
  before it is checked, so a failed create, set, delete or multi uses one up too (it is logged
  as an error transaction); a multi takes ONE zxid for all its operations; opening and closing a
  session take one each; reads take none.
- **Checks, in ZooKeeper's order** (``pRequest2Txn``): create: no ``/`` or a NUL →
  BadArguments; parent missing → NoNode; parent not writable (``/zookeeper/config``) → NoAuth;
  the sequence suffix (``%010d`` of the parent's count of child creations); an invalid path →
  BadArguments; exists → NodeExists; ephemeral parent → NoChildrenForEphemerals. Delete: no
  ``/``, a NUL or one of ZooKeeper's own paths → BadArguments; parent missing, then node missing
  → NoNode; version → BadVersion; children → NotEmpty. Set: invalid path → BadArguments;
  missing → NoNode; ``/zookeeper/config`` → NoAuth; version → BadVersion. Version -1 is "any".
- **Multi** (``pRequestHelper`` case multi, ``DataTree.processTxn``): the operations are checked
  in order against the changes of the ones before them (``ChangeRecord``s: a create may be
  followed by a create beneath it); if one fails nothing is applied and the results are
  ``RolledBackError`` before it, its own exception, ``RuntimeInconsistency`` after it (kazoo's
  names for error codes 0 and -2). Otherwise the operations are applied in order, each firing
  its watches, a set returning the stat of that moment.
- **Stats** (``DataTree.createNode``/``deleteNode``/``setData``, ``DataNode.copyStat``): a new
  node has czxid = mzxid = pzxid = its zxid. A child's creation sets the parent's pzxid and
  counts in its stored cversion; a deletion sets the pzxid only (when larger). The cversion a
  client sees is ``stored * 2 - numChildren`` (creations plus deletions), so a fresh root shows
  -1. ZooKeeper's own nodes (``/zookeeper``, ``/zookeeper/quota``, ``/zookeeper/config``) are
  there with zeroed stats.
- **Watches** (``DataTree``, ``WatchManager``): one-shot, per session, one per (path, kind)
  whatever the number of reads that set it. ``get``/``exists`` set data watches (``exists``
  also on a missing node), ``get_children`` child watches (not on a missing node). Create fires
  the node's data watches CREATED, then the parent's child watches CHILD; set fires CHANGED;
  delete fires the node's data watches DELETED, its child watches DELETED for sessions not
  already told, then the parent's child watches CHILD. Events go to a per-session outbox, in
  order; ``take_events(session_id)`` hands them over, so the simulation decides when (and in
  which order) a client sees them. A session that ends loses its watches and gets no events.
- **Sessions** (``SessionTrackerImpl``, ``DataTree.killSession``): ids as a standalone server
  makes them (server id 1 in the top byte, the clock's milliseconds below, then +1); any
  request from a session touches it (a heartbeat, like a ping: ``touch``); ``expire_due()``
  ends sessions not heard from for their timeout; ending one (expiry or close) is ONE
  transaction deleting its ephemeral nodes in the order ZooKeeper does, each firing watches.
- **Orders** (``DataNode``'s children and the ephemerals of a session are ``java.util.HashSet``s):
  ``get_children`` lists children in Java's HashSet iteration order (JDK 17), and a session's
  end deletes its ephemerals in the order of ``new ArrayList<>(set.clone())``;
  ``java_hash_set.JavaHashSet`` reproduces both, so clients see what a real server shows.

Known divergences: no ACLs beyond ``/zookeeper/config`` being read-only (``get_acls`` answers
OPEN_ACL_UNSAFE); no quotas, containers, TTL nodes, persistent or recursive watches, reconfig
or auth; session timeouts are granted as asked (ZooKeeper bounds them by 2 and 20 ticks);
expiry is exact rather than by tick buckets; no 1 MB limit on data; see ``JavaHashSet`` for
the one order it does not reproduce.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, TypeAlias

from kazoo.exceptions import (BadArgumentsError, BadVersionError, NoAuthError,
                              NoChildrenForEphemeralsError, NodeExistsError, NoNodeError,
                              NotEmptyError, RolledBackError, RuntimeInconsistency,
                              SessionExpiredError, UnimplementedError, ZookeeperError)
from kazoo.protocol.serialization import (CheckVersion, Create, Create2, Delete, Exists,
                                          GetACL, GetChildren, GetChildren2, GetData, SetData,
                                          Sync, Transaction)
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent, ZnodeStat
from kazoo.security import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from .java_hash_set import JavaHashSet

ROOT = "/"
ZOOKEEPER_PATH = "/zookeeper"
QUOTA_PATH = "/zookeeper/quota"
CONFIG_PATH = "/zookeeper/config"
SPECIAL_PATHS = frozenset((ROOT, ZOOKEEPER_PATH, QUOTA_PATH, CONFIG_PATH))

_EPHEMERAL_FLAG = 1
_SEQUENCE_FLAG = 2

Op: TypeAlias = Create | Delete | SetData | CheckVersion
"""A multi's operation: kazoo's own request tuples, as ``TransactionRequest`` builds them."""


# -- the tree ----------------------------------------------------------------------------------

@dataclass(slots=True)
class _Znode:
    data: bytes | None
    czxid: int
    ctime: int
    ephemeral_owner: int = 0
    mzxid: int = 0
    mtime: int = 0
    pzxid: int = 0
    version: int = 0
    cversion: int = 0  # child creations (DataNode's stored count; clients see more, see stat)
    aversion: int = 0
    read_only: bool = False
    children: JavaHashSet = field(default_factory=lambda: JavaHashSet(8))  # DataNode: (8)

    def stat(self) -> ZnodeStat:
        """``DataNode.copyStat``: cversion reported as creations plus deletions."""
        count = len(self.children)
        return ZnodeStat(self.czxid, self.mzxid, self.ctime, self.mtime, self.version,
                         self.cversion * 2 - count, self.aversion, self.ephemeral_owner,
                         len(self.data) if self.data else 0, count, self.pzxid)


@dataclass(frozen=True, slots=True)
class _Record:
    """What the checks of a write see of a node (ZooKeeper's ``ChangeRecord``)."""
    version: int
    cversion: int
    child_count: int
    ephemeral_owner: int
    read_only: bool = False


class _Txn(NamedTuple):
    """One checked change, applied once every operation of its request passed its checks."""
    kind: str  # "create", "delete", "set", "check"
    path: str
    data: bytes | None = None
    ephemeral_owner: int = 0
    version: int = 0


@dataclass(slots=True)
class _Session:
    session_id: int
    password: bytes
    timeout_s: float
    last_heard: float
    ephemerals: JavaHashSet = field(default_factory=JavaHashSet)  # DataTree: new HashSet<>()


def parent_of(path: str) -> str:
    """ZooKeeper's parent: everything before the last ``/`` (the root for ``/a``)."""
    return path[:path.rfind("/")] or ROOT


def _validate_path(path: str) -> None:
    """``PathUtils.validatePath``, raising BadArgumentsError as the server does."""
    if not path.startswith("/"):
        raise BadArgumentsError()
    if path == ROOT:
        return
    if path.endswith("/"):
        raise BadArgumentsError()
    for component in path[1:].split("/"):
        if component in ("", ".", ".."):
            raise BadArgumentsError()
    for char in path:
        if (char == "\0" or "\u0001" <= char <= "\u001f" or "\u007f" <= char <= "\u009f"
                or "\ud800" <= char <= "\uf8ff" or "\ufff0" <= char <= "\uffff"):
            raise BadArgumentsError()


def _check_version(current: int, expected: int) -> None:
    if expected != -1 and expected != current:
        raise BadVersionError()


class MemoryZooKeeper:
    """One ZooKeeper ensemble's state; see the module docstring."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._zxid = 0
        self._nodes: dict[str, _Znode] = {}
        for path in (ROOT, ZOOKEEPER_PATH, QUOTA_PATH, CONFIG_PATH):
            self._nodes[path] = _Znode(b"", 0, 0, read_only=path == CONFIG_PATH)
            if path != ROOT:
                self._nodes[parent_of(path)].children.add(path.rsplit("/", 1)[1])
        self._sessions: dict[int, _Session] = {}
        self._outboxes: dict[int, deque[WatchedEvent]] = {}
        self._data_watches: dict[str, dict[int, None]] = {}   # path -> sessions, in order
        self._child_watches: dict[str, dict[int, None]] = {}
        # SessionTrackerImpl.initializeNextSessionId for server id 1
        elapsed_ms = int(clock() * 1000)
        self._next_session_id = ((elapsed_ms << 24) & 0xFFFFFFFFFFFFFFFF) >> 8 | (1 << 56)

    # -- time and zxids ----------------------------------------------------------------------

    @property
    def last_zxid(self) -> int:
        """The zxid of the last transaction (0 before any)."""
        return self._zxid

    def _next_zxid(self) -> int:
        self._zxid += 1
        return self._zxid

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # -- sessions ----------------------------------------------------------------------------

    def open_session(self, timeout_s: float) -> int:
        """A new session (a createSession transaction); its id."""
        session_id = self._next_session_id
        self._next_session_id += 1
        self._next_zxid()
        password = hashlib.sha256(session_id.to_bytes(8, "big")).digest()[:16]
        self._sessions[session_id] = _Session(session_id, password, float(timeout_s),
                                              self._clock())
        self._outboxes[session_id] = deque()
        return session_id

    def session_password(self, session_id: int) -> bytes:
        return self._live_session(session_id).password

    def is_alive(self, session_id: int | None) -> bool:
        return session_id in self._sessions

    def session_ids(self) -> list[int]:
        """The live sessions, oldest first."""
        return list(self._sessions)

    def touch(self, session_id: int) -> None:
        """A heartbeat: the session was heard from now. SessionExpiredError if it ended."""
        self._live_session(session_id).last_heard = self._clock()

    def expire_due(self) -> list[int]:
        """End every session not heard from for its timeout, earliest deadline first; their
        ids."""
        now = self._clock()
        due = sorted((session.last_heard + session.timeout_s, session.session_id)
                     for session in self._sessions.values()
                     if now - session.last_heard >= session.timeout_s)
        for _deadline, session_id in due:
            self._end_session(session_id)
        return [session_id for _deadline, session_id in due]

    def expire(self, session_id: int) -> bool:
        """End a session as its expiry would; False if it had already ended."""
        if session_id not in self._sessions:
            return False
        self._end_session(session_id)
        return True

    def close_session(self, session_id: int | None) -> bool:
        """A client's own close: the same transaction as an expiry."""
        return session_id is not None and self.expire(session_id)

    def _end_session(self, session_id: int) -> None:
        """The closeSession transaction (``DataTree.killSession``): one zxid; its watches go
        first (its connection closes), then its ephemerals, in ZooKeeper's order."""
        session = self._sessions.pop(session_id)
        zxid = self._next_zxid()
        for table in (self._data_watches, self._child_watches):
            for path in [path for path, sessions in table.items() if session_id in sessions]:
                del table[path][session_id]
                if not table[path]:
                    del table[path]
        for path in session.ephemerals.clone_order():
            self._apply_delete(path, zxid)

    def _live_session(self, session_id: int) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionExpiredError()
        return session

    def _heard_from(self, session_id: int) -> None:
        self._live_session(session_id).last_heard = self._clock()

    # -- watches -----------------------------------------------------------------------------

    def take_events(self, session_id: int | None) -> list[WatchedEvent]:
        """The watch events fired for a session since the last call, in order (paths are
        absolute). Events fired before a session ended can still be taken once."""
        outbox = self._outboxes.get(session_id) if session_id is not None else None
        if session_id is None or outbox is None:
            return []
        events = list(outbox)
        outbox.clear()
        if session_id not in self._sessions:
            del self._outboxes[session_id]
        return events

    def has_events(self, session_id: int | None) -> bool:
        return bool(self._outboxes.get(session_id)) if session_id is not None else False

    def _watch(self, table: dict[str, dict[int, None]], path: str, session_id: int) -> None:
        table.setdefault(path, {})[session_id] = None

    def _trigger(self, table: dict[str, dict[int, None]], path: str, event_type: str,
                 already_told: set[int] | None = None) -> set[int]:
        """``WatchManager.triggerWatch``: every watch on ``path`` goes; each session not
        already told gets one event."""
        told: set[int] = set()
        for session_id in table.pop(path, {}):
            if already_told is None or session_id not in already_told:
                self._outboxes[session_id].append(
                    WatchedEvent(event_type, KeeperState.CONNECTED, path))
                told.add(session_id)
        return told

    # -- reads -------------------------------------------------------------------------------

    def get(self, session_id: int, path: str, *, watch: bool = False
            ) -> tuple[bytes | None, ZnodeStat]:
        self._heard_from(session_id)
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError()
        if watch:
            self._watch(self._data_watches, path, session_id)
        return node.data, node.stat()

    def exists(self, session_id: int, path: str, *, watch: bool = False) -> ZnodeStat | None:
        """The stat, or None; a watch is set even on a missing node (it fires on creation)."""
        self._heard_from(session_id)
        if watch:
            self._watch(self._data_watches, path, session_id)
        node = self._nodes.get(path)
        return None if node is None else node.stat()

    def get_children(self, session_id: int, path: str, *, watch: bool = False
                     ) -> tuple[list[str], ZnodeStat]:
        """The children in ZooKeeper's (HashSet) order, and the stat."""
        self._heard_from(session_id)
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError()
        if watch:
            self._watch(self._child_watches, path, session_id)
        return list(node.children), node.stat()

    # -- writes ------------------------------------------------------------------------------

    def create(self, session_id: int, path: str, value: bytes | None = b"", *,
               ephemeral: bool = False, sequence: bool = False) -> tuple[str, ZnodeStat]:
        """The created path (with its sequence suffix) and its stat."""
        flags = (_EPHEMERAL_FLAG if ephemeral else 0) | (_SEQUENCE_FLAG if sequence else 0)
        (created_path, stat), = self._write(session_id, [Create2(path, value, None, flags)])
        return created_path, stat

    def set(self, session_id: int, path: str, value: bytes | None, version: int = -1
            ) -> ZnodeStat:
        stat: ZnodeStat
        stat, = self._write(session_id, [SetData(path, value, version)])
        return stat

    def delete(self, session_id: int, path: str, version: int = -1) -> None:
        self._write(session_id, [Delete(path, version)])

    def multi(self, session_id: int, operations: Sequence[Op]) -> list[Any]:
        """One transaction: a path per create, a ZnodeStat per set, True per delete or check;
        or, if one failed, nothing applied and exceptions in place (see the module
        docstring)."""
        return self._write(session_id, list(operations), multi=True)

    def _write(self, session_id: int, operations: list[Any], multi: bool = False) -> list[Any]:
        """Check every operation against the changes before it, then apply them all under one
        zxid (taken first: a failed request uses one too)."""
        self._heard_from(session_id)
        zxid = self._next_zxid()
        now_ms = self._now_ms()
        pending: dict[str, _Record | None] = {}
        txns: list[_Txn] = []
        for index, operation in enumerate(operations):
            try:
                txns.append(self._prepare(operation, pending, session_id))
            except ZookeeperError as error:
                if not multi:
                    raise
                return ([RolledBackError() for _ in range(index)] + [error]
                        + [RuntimeInconsistency() for _ in operations[index + 1:]])
        return [self._apply(txn, operation, zxid, now_ms)
                for txn, operation in zip(txns, operations)]

    def _record(self, pending: dict[str, _Record | None], path: str) -> _Record | None:
        if path in pending:
            return pending[path]
        node = self._nodes.get(path)
        if node is None:
            return None
        return _Record(node.version, node.cversion, len(node.children), node.ephemeral_owner,
                       node.read_only)

    def _prepare(self, operation: Any, pending: dict[str, _Record | None],
                 session_id: int) -> _Txn:
        """``PrepRequestProcessor.pRequest2Txn``: the checks, in ZooKeeper's order."""
        if isinstance(operation, (Create, Create2)):
            return self._prepare_create(operation, pending, session_id)
        if isinstance(operation, Delete):
            path = operation.path
            if path.rfind("/") == -1 or "\0" in path or path in SPECIAL_PATHS:
                raise BadArgumentsError()
            parent = self._record(pending, parent_of(path))
            node = self._record(pending, path) if parent is not None else None
            if parent is None or node is None:
                raise NoNodeError()
            _check_version(node.version, operation.version)
            if node.child_count > 0:
                raise NotEmptyError()
            pending[parent_of(path)] = replace(parent, child_count=parent.child_count - 1)
            pending[path] = None
            return _Txn("delete", path)
        if isinstance(operation, (SetData, CheckVersion)):
            _validate_path(operation.path)
            node = self._record(pending, operation.path)
            if node is None:
                raise NoNodeError()
            if isinstance(operation, CheckVersion):
                _check_version(node.version, operation.version)
                return _Txn("check", operation.path)
            if node.read_only:
                raise NoAuthError()
            _check_version(node.version, operation.version)
            pending[operation.path] = replace(node, version=node.version + 1)
            return _Txn("set", operation.path, operation.data, version=node.version + 1)
        raise UnimplementedError()

    def _prepare_create(self, operation: Create | Create2, pending: dict[str, _Record | None],
                        session_id: int) -> _Txn:
        path = operation.path
        last_slash = path.rfind("/")
        if last_slash == -1 or "\0" in path:
            raise BadArgumentsError()
        parent_path = path[:last_slash] or ROOT
        parent = self._record(pending, parent_path)
        if parent is None:
            raise NoNodeError()
        if parent.read_only:
            raise NoAuthError()
        if operation.flags & _SEQUENCE_FLAG:
            path += f"{parent.cversion:010d}"
        _validate_path(path)
        if self._record(pending, path) is not None:
            raise NodeExistsError()
        if parent.ephemeral_owner != 0:
            raise NoChildrenForEphemeralsError()
        owner = session_id if operation.flags & _EPHEMERAL_FLAG else 0
        pending[parent_path] = replace(parent, cversion=parent.cversion + 1,
                                       child_count=parent.child_count + 1)
        pending[path] = _Record(0, 0, 0, owner)
        return _Txn("create", path, operation.data, ephemeral_owner=owner)

    def _apply(self, txn: _Txn, operation: Any, zxid: int, now_ms: int) -> Any:
        """``DataTree.processTxn`` for one checked change: cannot fail."""
        if txn.kind == "create":
            stat = self._apply_create(txn, zxid, now_ms)
            return (txn.path, stat) if isinstance(operation, Create2) else txn.path
        if txn.kind == "delete":
            self._apply_delete(txn.path, zxid)
            return True
        if txn.kind == "set":
            node = self._nodes[txn.path]
            node.data, node.mtime, node.mzxid, node.version = txn.data, now_ms, zxid, txn.version
            self._trigger(self._data_watches, txn.path, EventType.CHANGED)
            return node.stat()
        return True  # check

    def _apply_create(self, txn: _Txn, zxid: int, now_ms: int) -> ZnodeStat:
        parent_path = parent_of(txn.path)
        parent = self._nodes[parent_path]
        parent.cversion += 1
        parent.pzxid = zxid
        parent.children.add(txn.path.rsplit("/", 1)[1])
        node = _Znode(txn.data, zxid, now_ms, txn.ephemeral_owner, mzxid=zxid, mtime=now_ms,
                      pzxid=zxid)
        self._nodes[txn.path] = node
        if txn.ephemeral_owner:
            self._sessions[txn.ephemeral_owner].ephemerals.add(txn.path)
        self._trigger(self._data_watches, txn.path, EventType.CREATED)
        self._trigger(self._child_watches, parent_path, EventType.CHILD)
        return node.stat()

    def _apply_delete(self, path: str, zxid: int) -> None:
        parent_path = parent_of(path)
        parent = self._nodes[parent_path]
        parent.children.discard(path.rsplit("/", 1)[1])
        parent.pzxid = max(parent.pzxid, zxid)
        node = self._nodes.pop(path)
        owner = self._sessions.get(node.ephemeral_owner)
        if owner is not None:
            owner.ephemerals.discard(path)
        told = self._trigger(self._data_watches, path, EventType.DELETED)
        self._trigger(self._child_watches, path, EventType.DELETED, already_told=told)
        self._trigger(self._child_watches, parent_path, EventType.CHILD)

    # -- the wire ----------------------------------------------------------------------------

    def handle(self, session_id: int, request: Any) -> Any:
        """One request as kazoo sends it (``kazoo.protocol.serialization``: ``GetData``,
        ``Exists``, ``GetChildren``/``GetChildren2``, ``Create``/``Create2``, ``SetData``,
        ``Delete``, ``Transaction``, ``Sync``, ``GetACL``): its result as kazoo reads it from
        the reply, or the exception the reply's error code becomes. A watch is set when the
        request carries a watcher."""
        watch = bool(getattr(request, "watcher", None))
        if isinstance(request, GetData):
            return self.get(session_id, request.path, watch=watch)
        if isinstance(request, Exists):
            return self.exists(session_id, request.path, watch=watch)
        if isinstance(request, (GetChildren, GetChildren2)):
            children, stat = self.get_children(session_id, request.path, watch=watch)
            return (children, stat) if isinstance(request, GetChildren2) else children
        if isinstance(request, (Create, Create2, SetData, Delete)):
            result, = self._write(session_id, [request])
            return result
        if isinstance(request, Transaction):
            return self.multi(session_id, request.operations)
        if isinstance(request, Sync):
            self._heard_from(session_id)
            return request.path
        if isinstance(request, GetACL):
            self._heard_from(session_id)
            node = self._nodes.get(request.path)
            if node is None:
                raise NoNodeError()
            return (list(READ_ACL_UNSAFE if node.read_only else OPEN_ACL_UNSAFE), node.stat())
        raise UnimplementedError()

    # -- looking inside (tests and the simulation's checks) -----------------------------------

    def paths(self) -> Iterable[str]:
        """Every znode's path, ZooKeeper's own included."""
        return iter(self._nodes)

    def stat(self, path: str) -> ZnodeStat | None:
        """A node's stat as a read would answer, without a session, a watch or a heartbeat."""
        node = self._nodes.get(path)
        return None if node is None else node.stat()

    def ephemerals(self, session_id: int) -> list[str]:
        """A live session's ephemeral nodes, in the order its end would delete them."""
        return self._live_session(session_id).ephemerals.clone_order()


__all__ = ["MemoryZooKeeper", "Op", "parent_of"]
