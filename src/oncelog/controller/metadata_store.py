"""The local-file metadata store: ``<data-dir>/metadata.json`` plus ``meta.properties``.

Invariant: the file on disk is always a complete document. Writes go to a temporary file that
is fsynced and renamed over the old one, so a crash leaves either the old or the new state.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class TopicRecord:
    name: str
    topic_id: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


class LocalMetadataStore:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / "metadata.json"
        data_dir.mkdir(parents=True, exist_ok=True)

    def load_topics(self) -> dict[str, TopicRecord]:
        if not self.path.exists():
            return {}
        document = json.loads(self.path.read_text())
        return {t["name"]: TopicRecord(**t) for t in document.get("topics", [])}

    def save_topics(self, topics: dict[str, TopicRecord]) -> None:
        document = {"version": 1, "topics": [asdict(t) for t in topics.values()]}
        self._write_atomically(self.path, json.dumps(document, indent=1, sort_keys=True))

    def load_document(self, name: str) -> dict | None:
        """A small JSON document kept beside metadata.json (e.g. producer-id blocks)."""
        path = self.data_dir / name
        return json.loads(path.read_text()) if path.exists() else None

    def save_document(self, name: str, document: dict) -> None:
        self._write_atomically(self.data_dir / name, json.dumps(document, sort_keys=True))

    def cluster_id(self, configured: str = "") -> str:
        """Read or create ``meta.properties`` (Kafka keeps the cluster id there too)."""
        meta = self.data_dir / "meta.properties"
        if meta.exists():
            for line in meta.read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.split("=", 1)[1].strip()
        cluster_id = configured or _new_cluster_id()
        self._write_atomically(meta, f"version=1\ncluster.id={cluster_id}\n")
        return cluster_id

    def _write_atomically(self, path: Path, text: str) -> None:
        temporary = path.with_suffix(path.suffix + ".tmp")
        with open(temporary, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        directory = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def _new_cluster_id() -> str:
    # Kafka's cluster ids are a base64url-encoded UUID without padding.
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def new_topic_id() -> str:
    return str(uuid.uuid4())
