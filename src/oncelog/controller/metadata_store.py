"""The local-file metadata store: ``<data-dir>/metadata.json`` plus ``meta.properties``.

The single-broker implementation of ``MetadataStore`` (``store.py``): no extra process, one
broker, which is every partition's only replica, leader and ISR, and always the controller.
Partition states are kept anyway, so a leader epoch survives restarts and the
compare-and-set contract is the same one the ZooKeeper store keeps.

Invariant: the file on disk is always a complete document. Writes go to a temporary file that
is fsynced and renamed over the old one, so a crash leaves either the old or the new state.
Document versions: 1 (topics only) is read and upgraded; 2 adds each topic's assignment and
the partition states, and ``last_version``: the store's version counter, bumped by every
change (the topics' ``created_version`` and the listing's version come from it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from ..security.acl import (AclBinding, AclEntry, PatternType, ResourcePattern, type_from_name,
                            type_name)
from ..storage import files
from .store import (BrokerRegistration, MetadataEvent, MetadataStore, NodeIdInUse,
                    PartitionState, TopicExists, TopicGrew, TopicListing, TopicRecord,
                    new_cluster_id, new_topic_id)

__all__ = ["LocalMetadataStore", "TopicRecord", "new_topic_id"]

PRODUCER_IDS_DOCUMENT = "producer-ids.json"
# SCRAM credentials (salted, never passwords), readable by the broker's user only
USERS_DOCUMENT = "scram-credentials.json"
# ACLs: {"version":1,"resources":[{"resourceType":"Topic","patternType":"LITERAL","name":...,
# "acls":[entries as Kafka writes them in ZooKeeper]}]}
ACLS_DOCUMENT = "acls.json"


class LocalMetadataStore(MetadataStore):
    def __init__(self, data_dir: Path, node_id: int = 1) -> None:
        self.data_dir = data_dir
        self.node_id = node_id
        self.path = data_dir / "metadata.json"
        data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._broker: BrokerRegistration | None = None
        self._version = 0
        self._topics, self._states = self._read()

    # -- identity and brokers ------------------------------------------------------------

    def cluster_id(self, configured: str = "") -> str:
        """Read or create ``meta.properties`` (Kafka keeps the cluster id there too)."""
        meta = self.data_dir / "meta.properties"
        if meta.exists():
            for line in meta.read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.split("=", 1)[1].strip()
        cluster_id = configured or new_cluster_id()
        self._write_atomically(meta, f"version=1\ncluster.id={cluster_id}\n")
        return cluster_id

    def register_broker(self, registration: BrokerRegistration) -> BrokerRegistration:
        with self._lock:
            if self._broker is not None and self._broker.node_id == registration.node_id:
                raise NodeIdInUse(f"node.id {registration.node_id} is already registered")
            self._broker = replace(registration, broker_epoch=0)
            return self._broker

    def live_brokers(self) -> dict[int, BrokerRegistration]:
        return {self._broker.node_id: self._broker} if self._broker else {}

    def try_become_controller(self, node_id: int) -> bool:
        return node_id == self.node_id

    def controller_id(self) -> int:
        return self.node_id

    def confirm_session(self) -> bool:
        return True  # no session to lose: the store is this process's own file

    # -- topics --------------------------------------------------------------------------

    def list_topics(self, watch: bool = False) -> TopicListing:
        with self._lock:
            return TopicListing(frozenset(self._topics), self._version)

    def read_topic(self, name: str, watch: bool = False) -> TopicRecord | None:
        with self._lock:
            record = self._topics.get(name)
            return None if record is None else self._copy(record)

    @staticmethod
    def _copy(record: TopicRecord) -> TopicRecord:
        return replace(record, configs=dict(record.configs),
                       assignment=[list(r) for r in record.assignment])

    def create_topic(self, record: TopicRecord, states: list[PartitionState]
                     ) -> tuple[TopicRecord, list[PartitionState]]:
        with self._lock:
            if record.name in self._topics:
                raise TopicExists(record.name)
            self._version += 1
            record = replace(self._copy(record), created_version=self._version)
            self._topics[record.name] = record
            stored = [replace(s, version=0, created_version=self._version) for s in states]
            self._states[record.name] = stored
            self._save()
            return self._copy(record), list(stored)

    def add_partitions(self, record: TopicRecord, new_states: list[PartitionState]
                       ) -> list[PartitionState]:
        with self._lock:
            current = self._topics.get(record.name)
            if current is None or current.created_version != record.created_version:
                raise KeyError(f"topic {record.name!r} does not exist")
            if current.partitions + len(new_states) != len(record.assignment):
                raise TopicGrew(record.name, current.partitions)  # by a concurrent request
            self._version += 1
            self._topics[record.name] = self._copy(record)
            stored = [replace(s, version=0, created_version=self._version) for s in new_states]
            self._states[record.name] = self._states.get(record.name, []) + stored
            self._save()
            return stored

    def delete_topic(self, name: str) -> None:
        with self._lock:
            if self._topics.pop(name, None) is not None:
                self._version += 1
            self._states.pop(name, None)
            self._save()

    # -- partition state -----------------------------------------------------------------

    def partition_state(self, topic: str, index: int, watch: bool = False
                        ) -> PartitionState | None:
        with self._lock:
            states = self._states.get(topic, [])
            return states[index] if index < len(states) else None

    def compare_and_set_partition_state(self, topic: str, index: int,
                                        state: PartitionState) -> PartitionState | None:
        with self._lock:
            states = self._states.get(topic, [])
            current = states[index] if index < len(states) else None
            if current is None or current.version != state.version:
                return None
            stored = replace(state, version=current.version + 1,
                             created_version=current.created_version)
            self._states[topic][index] = stored
            self._save()
            return stored

    # -- producer ids --------------------------------------------------------------------

    def allocate_producer_id_block(self, size: int) -> int:
        with self._lock:
            path = self.data_dir / PRODUCER_IDS_DOCUMENT
            document = json.loads(path.read_text()) if path.exists() else {}
            start = int(document.get("block_end", 0))
            self._write_atomically(path, json.dumps({"version": 1, "block_end": start + size},
                                                    sort_keys=True))
            return start

    # -- watching and closing ------------------------------------------------------------

    def scram_credentials(self) -> dict[str, dict[str, str]]:
        path = self.data_dir / USERS_DOCUMENT
        with self._lock:
            if not path.exists():
                return {}
            users = json.loads(path.read_text()).get("users", {})
            return {user: dict(mechanisms) for user, mechanisms in users.items()}

    def alter_scram_credential(self, user: str, mechanism: str, credential: str | None
                               ) -> None:
        users = self.scram_credentials()
        with self._lock:
            if credential is None:
                users.get(user, {}).pop(mechanism, None)
                if not users.get(user):
                    users.pop(user, None)
            else:
                users.setdefault(user, {})[mechanism] = credential
            path = self.data_dir / USERS_DOCUMENT
            if not path.exists():
                path.touch(mode=0o600)
            self._write_atomically(path, json.dumps({"version": 1, "users": users}, indent=1,
                                                    sort_keys=True))
            path.chmod(0o600)

    def acls(self) -> list[AclBinding]:
        with self._lock:
            return [AclBinding(pattern, entry)
                    for pattern, entries in self._read_acls().items() for entry in entries]

    def update_acls(self, pattern: ResourcePattern,
                    change: Callable[[frozenset[AclEntry]], frozenset[AclEntry]]
                    ) -> frozenset[AclEntry]:
        with self._lock:
            stored = self._read_acls()
            entries = change(stored.get(pattern, frozenset()))
            if entries:
                stored[pattern] = entries
            else:
                stored.pop(pattern, None)
            self._write_atomically(self.data_dir / ACLS_DOCUMENT, json.dumps({
                "version": 1, "resources": [
                    {"resourceType": type_name(p.resource_type),
                     "patternType": p.pattern_type.name, "name": p.name,
                     "acls": [e.to_json() for e in sorted(found)]}
                    for p, found in sorted(stored.items())]}, indent=1))
            return entries

    def _read_acls(self) -> dict[ResourcePattern, frozenset[AclEntry]]:
        path = self.data_dir / ACLS_DOCUMENT
        if not path.exists():
            return {}
        found: dict[ResourcePattern, frozenset[AclEntry]] = {}
        for resource in json.loads(path.read_text()).get("resources", []):
            pattern = ResourcePattern(type_from_name(resource["resourceType"]),
                                      resource["name"], PatternType[resource["patternType"]])
            found[pattern] = frozenset(AclEntry.from_json(e) for e in resource["acls"])
        return found

    def watch(self, listener: Callable[[MetadataEvent], None]) -> None:
        """Nothing changes here but through this broker, which knows what it changed."""

    def close(self) -> None:
        with self._lock:
            self._broker = None

    # -- the file ------------------------------------------------------------------------

    def _read(self) -> tuple[dict[str, TopicRecord], dict[str, list[PartitionState]]]:
        if not self.path.exists():
            return {}, {}
        document = json.loads(self.path.read_text())
        self._version = int(document.get("last_version", 0))
        topics, states = {}, {}
        for entry in document.get("topics", []):
            record = TopicRecord(**entry)
            # A single broker hosts every replica, whatever node id it had before.
            record.assignment = [[self.node_id] for _ in range(record.partitions)]
            record.created_version = max(record.created_version, 0)
            topics[record.name] = record
        for name, entries in document.get("partition_states", {}).items():
            created = topics[name].created_version if name in topics else 0
            states[name] = [PartitionState(leader=self.node_id, leader_epoch=e["leader_epoch"],
                                           isr=(self.node_id,), version=e["version"],
                                           created_version=e.get("created_version", created))
                            for e in entries]
        for name, record in topics.items():  # version 1 documents had no states
            known = states.setdefault(name, [])
            known.extend(PartitionState(self.node_id, 0, (self.node_id,), version=0,
                                        created_version=record.created_version)
                         for _ in range(len(known), record.partitions))
        return topics, states

    def _save(self) -> None:
        document = {
            "version": 2,
            "last_version": self._version,
            "topics": [asdict(t) for t in self._topics.values()],
            "partition_states": {
                name: [{"leader": s.leader, "leader_epoch": s.leader_epoch, "isr": list(s.isr),
                        "version": s.version, "created_version": s.created_version}
                       for s in states]
                for name, states in self._states.items()},
        }
        self._write_atomically(self.path, json.dumps(document, indent=1, sort_keys=True))

    def _write_atomically(self, path: Path, text: str) -> None:
        files.replace(path, text, fsync=True, sync_directory=True)
