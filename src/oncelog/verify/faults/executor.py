"""``kill-executor``: ``kill -9`` of one executor JVM of the Spark copy job, mid-batch.

Only with ``--spark-master`` (a standalone cluster): in local mode the driver runs every task
itself and there is no executor to kill (``scenario`` refuses it). The copy job is a
client-mode driver on this machine; its executors run on the cluster's workers.

**Inject.** Find the copy job's application (its ``app APP_ID ui URL`` line) and, through
the driver's status REST API (``spark.status``), its live executors. Unless a batch is
being written already, wait (at most ``wait_s``) for the job to print ``batch N writing`` -
the sink has asked for batch N's rows, so its reading tasks are being scheduled - then poll
the API for an executor with tasks running and SIGKILL its JVM (found by its command line in
``/proc``: ``spark.standalone.executor_pid``), so the tasks die with it. If no executor shows
a running task before the batch is written (small batches are quick), a seeded one is killed
anyway and the event says "between tasks". An executor that does not run on this machine (a
user's cluster with remote workers) has no pid here: the fault does not land, and says so.

**Heal.** Nothing to restart: Spark does it. The standalone Master sees the executor exit
and launches a new one for the application; the driver marks the lost executor's running
tasks failed (``ExecutorLostFailure``, which does not count towards
``spark.task.maxFailures``) and runs them again on the others. (Its status API stops
updating a removed executor, so those tasks stay "running" on the dead one: that count is
``lost_tasks``, and the batch it hit being written after the kill shows they ran again.)
Heal *observes* that, for at most ``recover_timeout_s``: a new executor registered and ran
tasks, and the job wrote a batch after the kill. The wait shifts the rest of the schedule by
as long (``shift_s``, see ``faults.nemesis``), so later faults keep their spacing. The heal
event records the replacement executor(s), how long they took, the killed executor's failed
(lost, re-run) tasks and the first batch written after the kill; ``landing`` turns that into
the fault's outcome.

**Ready.** Not before the copy job is steady (it wrote a batch since it last started) and
its application has as many live executors as it has had at most: a second kill waits for
the first one's replacement.
"""

from __future__ import annotations

import os
import random
import re
import signal
import time
from pathlib import Path

from ..schedule import ScheduledFault

__all__ = ["KillExecutor"]

_WRITING = re.compile(r"^batch (\d+) writing$")
_WRITTEN = re.compile(r"^batch (\d+) (written|skipped)$")


def _batch_of(pattern: re.Pattern[str], text: str) -> int:
    """The batch number in a line already seen to match ``pattern``."""
    match = pattern.match(text)
    assert match is not None, text
    return int(match.group(1))


class KillExecutor:
    name = "kill-executor"

    def __init__(self, stage, *, seed: int, wait_s: float = 8.0, busy_wait_s: float = 4.0,
                 recover_timeout_s: float = 45.0) -> None:
        self.stage = stage            # a PipelineStage running on a cluster
        self.seed = seed
        self.wait_s = wait_s
        self.busy_wait_s = busy_wait_s
        self.recover_timeout_s = recover_timeout_s
        self._most_alive: dict[str, int] = {}   # application id -> most live executors seen
        self._killed: dict | None = None

    def _executors(self, app: tuple[str, str] | None):
        from ...spark.status import app_executors
        if app is None:
            return None
        return app_executors(app[1], app[0], timeout_s=5.0)  # a loaded driver answers late

    def ready(self) -> bool:
        if not self.stage.steady:
            return False
        app = self.stage.app()
        executors = self._executors(app)
        if not executors:
            return False
        alive = sum(1 for executor in executors if executor.active)
        most = self._most_alive[app[0]] = max(alive, self._most_alive.get(app[0], 0))
        return alive >= most

    def inject(self, scheduled: ScheduledFault) -> dict:
        from ...spark.standalone import executor_pid
        self._killed = None
        app = self.stage.app() if self.stage.alive else None
        if app is None:
            return {"target": "a Spark executor", "pid": None, "running": False,
                    "landed": "the copy job was not running on the cluster"}
        app_id, _ = app
        child = self.stage.child
        line = self._batch_in_progress() or child.wait_for_line(
            lambda text: bool(_WRITING.match(text)), after=time.monotonic(),
            timeout=self.wait_s)
        batch = _batch_of(_WRITING, line.text) if line is not None else None
        chosen, alive = self._choose(app, scheduled, line)
        if chosen is None:
            return {"target": "a Spark executor", "pid": None, "running": False,
                    "app_id": app_id, "landed": f"application {app_id} had no live executor"}
        detail = {"target": f"executor {chosen.executor_id}", "app_id": app_id,
                  "executor_id": chosen.executor_id, "host": chosen.host, "batch": batch,
                  "running_tasks": chosen.active_tasks, "signal": "SIGKILL"}
        pid = executor_pid(app_id, chosen.executor_id)
        if pid is None:
            return {**detail, "pid": None, "running": False,
                    "landed": f"executor {chosen.executor_id} of {app_id} runs on "
                              f"{chosen.host}, not on this machine: there is no pid here to "
                              "kill (kill-executor needs the cluster's workers on this "
                              "machine)"}
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return {**detail, "pid": pid, "running": False, "landed": "had exited already"}
        killed_at = time.monotonic()
        gone = _wait_gone(pid, 5.0)
        if batch is None:
            where = f"no batch started within {self.wait_s:g} s"
        elif chosen.active_tasks:
            where = f"during batch {batch}, {chosen.active_tasks} task(s) running on it"
        else:
            where = f"during batch {batch}, between tasks"
        self._killed = {"at": killed_at, "app": app, "executor_id": chosen.executor_id,
                        "known": {executor.executor_id for executor in alive}}
        return {**detail, "pid": pid, "running": True, "killed": gone, "landed": where}

    def _batch_in_progress(self):
        """The ``batch N writing`` line of a batch not yet written, if one is running now."""
        for line in reversed(self.stage.child.lines):
            if _WRITTEN.match(line.text) or line.time < self.stage.started_at:
                return None
            if _WRITING.match(line.text):
                return line
        return None

    def _choose(self, app, scheduled: ScheduledFault, writing):
        """An executor with tasks running, polled until the batch is written; else a seeded
        one among the live ones. Returns (chosen or None, the live executors)."""
        deadline = time.monotonic() + (self.busy_wait_s if writing is not None else 0.0)
        answered_by = time.monotonic() + 10.0    # a driver that does not answer: ask again
        alive = []
        while True:
            executors = self._executors(app)
            alive = sorted((executor for executor in executors or () if executor.active),
                           key=lambda executor: executor.executor_id)
            busy = [executor for executor in alive if executor.active_tasks > 0]
            if busy:
                return max(busy, key=lambda executor: executor.active_tasks), alive
            written = writing is not None and self.stage.child.wait_for_line(
                lambda text: bool(_WRITTEN.match(text)), after=writing.time, timeout=0)
            unanswered = executors is None and time.monotonic() < answered_by
            if (written or time.monotonic() >= deadline) and not unanswered:
                break
            time.sleep(0.05)
        if not alive:
            return None, alive
        rng = random.Random(f"{self.seed} {scheduled.name} {scheduled.at_s}")
        return rng.choice(alive), alive

    def heal(self) -> dict:
        """Watch Spark recover (see the module docstring); nothing to restart."""
        killed, self._killed = self._killed, None
        if killed is None:
            return {}
        started = time.monotonic()
        deadline = started + self.recover_timeout_s
        child = self.stage.child
        replaced_by, replaced_s, batch_after, lost_tasks = [], None, None, None
        while True:
            executors = self._executors(killed["app"]) or []
            for executor in executors:
                if executor.executor_id == killed["executor_id"] and not executor.active:
                    # Spark's status store stops updating an executor once it is removed,
                    # so the tasks that died with it stay counted as running on it.
                    lost_tasks = executor.failed_tasks + executor.active_tasks
            new = [executor.executor_id for executor in executors
                   if executor.executor_id not in killed["known"]
                   and executor.executor_id != killed["executor_id"]
                   and executor.active and executor.tasks > 0]
            if new and replaced_s is None:
                replaced_by, replaced_s = new, round(time.monotonic() - killed["at"], 3)
            if batch_after is None:
                line = child.wait_for_line(lambda text: bool(_WRITTEN.match(text)),
                                           after=killed["at"], timeout=0)
                if line is not None:
                    batch_after = _batch_of(_WRITTEN, line.text)
            if (replaced_s is not None and batch_after is not None) or not child.alive \
                    or time.monotonic() >= deadline or self.stage.app() != killed["app"]:
                break
            time.sleep(0.25)
        waited_s = round(time.monotonic() - started, 3)
        return {"target": f"executor {killed['executor_id']}", "app_id": killed["app"][0],
                "replaced_by": replaced_by, "replacement_s": replaced_s,
                "lost_tasks": lost_tasks, "batch_after": batch_after,
                "recover_timeout_s": self.recover_timeout_s, "waited_s": waited_s,
                "shift_s": waited_s}


def _wait_gone(pid: int, timeout_s: float) -> bool:
    """Whether ``pid`` is gone (or a zombie: its Worker, not us, reaps it) within the time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False
