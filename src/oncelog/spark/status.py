"""Where a running application's tasks ran: its executors, from the driver's status REST API.

A Spark driver with its web UI on serves ``GET {ui}/api/v1/applications/{app}/allexecutors``:
every executor the application has had, the ``driver`` included, dead ones too, each with its
``totalTasks``, ``failedTasks``, ``activeTasks``, ``isActive`` and ``hostPort``. It is the
same list on a standalone cluster, YARN or Kubernetes, and it is what tells a run on a
cluster from one in local mode: there, every task runs in the ``driver`` entry.

``app_executors`` reads it (None when the driver does not answer: dead, or its UI off) and
leaves the driver out. Used by ``oncelog.spark.copy_job`` (a ``batch N executors {...}``
line after each batch) and by ``oncelog verify``'s ``kill-executor`` fault, which kills an
executor that has tasks running.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import asdict, dataclass

__all__ = ["ExecutorStatus", "app_executors", "get_json"]


@dataclass(frozen=True)
class ExecutorStatus:
    executor_id: str
    host_port: str
    active: bool            # registered and not removed
    active_tasks: int       # running now
    tasks: int              # ever run (completed + failed)
    failed_tasks: int       # among them, failed: e.g. lost with a killed executor

    @property
    def host(self) -> str:
        return self.host_port.rpartition(":")[0] or self.host_port

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_rest(cls, entry: dict) -> ExecutorStatus:
        return cls(executor_id=str(entry.get("id")), host_port=str(entry.get("hostPort", "")),
                   active=bool(entry.get("isActive")),
                   active_tasks=int(entry.get("activeTasks") or 0),
                   tasks=int(entry.get("totalTasks") or 0),
                   failed_tasks=int(entry.get("failedTasks") or 0))


def app_executors(ui_url: str, app_id: str, *, timeout_s: float = 2.0,
                  ) -> list[ExecutorStatus] | None:
    """The application's executors, dead ones included, without the driver; None when the
    driver's UI does not answer."""
    entries = get_json(f"{ui_url.rstrip('/')}/api/v1/applications/{app_id}/allexecutors",
                       timeout_s)
    if entries is None:
        return None
    return [ExecutorStatus.from_rest(entry) for entry in entries
            if isinstance(entry, dict) and entry.get("id") != "driver"]


def get_json(url: str, timeout_s: float = 2.0):
    """A Spark web page's JSON (the driver's REST API, a Master's or Worker's ``/json/``);
    None when nothing answers or the answer is not JSON."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return json.load(response)
    except (OSError, ValueError):
        return None
