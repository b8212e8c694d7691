"""Process faults: ``kill -9`` and restart of the broker or of a delivery stage."""

from __future__ import annotations

import time

from ..scenario import RunFailed
from ..schedule import ScheduledFault

__all__ = ["KillBroker", "KillDelivery"]


class KillBroker:
    """``kill -9`` of the run's own broker; heal restarts it on the same port and data
    directory (so it recovers its log from disk). Only for a broker the run started."""

    name = "kill-broker"

    def __init__(self, broker) -> None:
        self.broker = broker
        self._killed_at = 0.0

    def ready(self) -> bool:
        return True  # it restarts in about a second

    def inject(self, scheduled: ScheduledFault) -> dict:
        pid = self.broker.pid
        process = self.broker.process
        running = process is not None and process.poll() is None
        self.broker.kill()
        self._killed_at = time.monotonic()
        return {"pid": pid, "signal": "SIGKILL", "running": running}

    def heal(self) -> dict:
        try:
            self.broker.start()
        except RuntimeError as error:
            raise RunFailed(f"the broker did not restart after kill -9: {error}") from None
        return {"pid": self.broker.pid, "down_s": round(time.monotonic() - self._killed_at, 3)}


class KillDelivery:
    """``kill -9`` of a delivery stage's process (``timed``: in its weakest window, see
    ``workloads.delivery``); heal starts it again (a consumer rejoins its group, the copy job
    resumes from its checkpoint). Ready once the stage is back in steady state (a consumer
    has its partitions, the copy job has written a batch since it restarted)."""

    def __init__(self, name: str, stage, *, timed: bool, note: str | None = None) -> None:
        self.name = name
        self.stage = stage
        self.timed = timed
        self.note = note
        self._killed_at = 0.0

    def ready(self) -> bool:
        return self.stage.steady

    def inject(self, scheduled: ScheduledFault) -> dict:
        running = self.stage.alive
        detail = {"target": self.stage.description, **self.stage.kill(timed=self.timed),
                  "running": running}
        self._killed_at = time.monotonic()
        if self.note:
            detail["note"] = self.note
        return detail

    def heal(self) -> dict:
        down_s = round(time.monotonic() - self._killed_at, 3)
        return {"target": self.stage.description, **self.stage.restart(), "down_s": down_s}
