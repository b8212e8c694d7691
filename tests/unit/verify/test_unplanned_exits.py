"""A delivery process that exits with no fault killing it is a finding of its own (issue 31).

Seen 2026-11-28: ``oncelog verify --semantics at-least-once,exactly-once --brokers 3 --faults
kill-leader,pause-broker --seed 5``: the exactly-once copy job died on its own with
``SourceError: cannot look up offsets of ...``. The verifier restarted it and said so in a
yellow warning among others, so the run read as clean, though a user's streaming query
would simply have stopped. Now the runner records each such exit with the first line of its
error; the result carries them (``unplanned_exits``), the report prints one red line per
process and the JSON document has them apart from the warnings. The run still restarts the
process so it completes, and the verdict still judges the records.
"""

from __future__ import annotations

import json
import sys
import time

from rich.console import Console

from oncelog.verify.checker import UnplannedExit, check
from oncelog.verify.processes import ChildProcess
from oncelog.verify.report import print_report, results_document
from oncelog.verify.runner import _SemanticsRun
from oncelog.verify.workloads.delivery import _Stage, error_line

from .histories import clean_run

# What the copy job's log holds after such a death, shortened: Spark's log lines, the copy
# job's own line with Spark's wrapper, and the Python traceback with the source's error.
COPY_JOB_LOG = """\
[10:41:07] batch 17 written
25/11/28 10:41:09 WARN TaskSetManager: Lost task 0.0 in stage 40.0: executor driver
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
oncelog.spark.errors.SourceError: a task's error that Spark retried, not the one that ended it
copy_job: the query failed: [STREAM_FAILED] Query [id = 5e0c, runId = 91aa] terminated with \
exception: [PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data \
source perform latestOffset: Traceback (most recent call last):
  File "/work/src/oncelog/spark/source.py", line 268, in latestOffset
    latest = self._reported = self._latest()
oncelog.spark.errors.SourceError: cannot look up offsets of verify-exactly-once-s5-1 at \
127.0.0.1:40001: Broker: Leader epoch is older than broker epoch
org.apache.spark.sql.streaming.StreamingQueryException: [STREAM_FAILED] Query terminated
[10:41:10] stopped
"""


def test_the_first_line_of_the_error_is_the_sources_own_not_sparks_wrapper():
    assert error_line(COPY_JOB_LOG) == (
        "SourceError: cannot look up offsets of verify-exactly-once-s5-1 at 127.0.0.1:40001: "
        "Broker: Leader epoch is older than broker epoch")


def test_without_an_exception_the_last_line_stands_for_the_error():
    log = ("[10:00:01] ready [0, 1]\n[10:00:13] stuck: a transaction open for more than 10 s "
           "(librdkafka#5456); exiting to be restarted\n")
    assert error_line(log) == ("stuck: a transaction open for more than 10 s (librdkafka#5456);"
                               " exiting to be restarted")
    assert error_line("") is None
    assert error_line("  \n") is None


def test_only_a_wrapper_is_still_named_and_a_long_line_is_cut():
    assert error_line("org.apache.spark.SparkException: Job aborted\n") == \
        "SparkException: Job aborted"
    assert len(error_line("ValueError: " + "x" * 1000) or "") == 300


def _exits() -> list[UnplannedExit]:
    return [UnplannedExit("Spark copy job", 1, 12.5, "SourceError: cannot look up offsets of "
                          "t-1 at 127.0.0.1:1: Broker: Leader epoch is older than broker epoch",
                          "/out/logs/exactly-once-copy-job.log"),
            UnplannedExit("Spark copy job", 1, 31.0, None, "/out/logs/exactly-once-copy-job.log")]


def test_an_unplanned_exit_is_a_finding_in_the_report_and_the_json_not_a_warning():
    run, _ = clean_run({"p0": 20})
    result = check(run.history, "exactly-once")
    result.unplanned_exits = _exits()
    finding = ("the Spark copy job exited unplanned 2 times: SourceError: cannot look up "
               "offsets of t-1 at 127.0.0.1:1: Broker: Leader epoch is older than broker epoch "
               "(status 1 at 12.5 s, 31 s; restarted each time so the run could finish; see "
               "/out/logs/exactly-once-copy-job.log)")
    assert result.unplanned_exit_findings == [finding]
    assert result.verdict == "kept"             # the records are judged as before

    console = Console(record=True, width=400, color_system=None)
    print_report([result], console=console)
    assert f"! exactly-once: {finding}" in console.export_text()

    document = json.loads(json.dumps(results_document([result], None, None)))
    unplanned = document["results"]["exactly_once"]["unplanned_exits"]
    assert unplanned["count"] == 2 and unplanned["findings"] == [finding]
    assert unplanned["exits"][0] == {"process": "Spark copy job", "status": 1, "at_s": 12.5,
                                     "error": _exits()[0].error,
                                     "log": "/out/logs/exactly-once-copy-job.log"}
    assert not [w for w in document["results"]["exactly_once"]["warnings"] if "exited" in w]


def test_a_clean_run_has_no_unplanned_exit():
    run, _ = clean_run({"p0": 5})
    document = check(run.history, "at-least-once").to_dict()
    assert document["unplanned_exits"] == {"count": 0, "findings": [], "exits": []}


class _DyingStage(_Stage):
    """A stage whose process fails at once with a traceback, as the copy job did."""

    description = "Spark copy job"

    def __init__(self, tmp_path, message: str) -> None:
        super().__init__()
        code = f"raise RuntimeError({message!r})"
        self.child = ChildProcess("dying", [sys.executable, "-c", code],
                                  tmp_path / "dying.log", watch=True)


class _View:
    def __init__(self) -> None:
        self.events: list[str] = []

    def event(self, text: str) -> None:
        self.events.append(text)


def test_the_runner_records_the_exit_with_its_error_and_restarts_the_process(tmp_path):
    """``_watch`` (what the runner calls between faults) on a real process that dies."""
    stage = _DyingStage(tmp_path, "first death")
    stage.start()
    assert stage.child.wait_exit(30)
    watching = _SemanticsRun.__new__(_SemanticsRun)   # only what _watch uses
    watching.stage, watching.name, watching.view = stage, "exactly-once", _View()
    watching.unplanned_exits, watching.notes, watching.noted_producers = [], [], set()
    watching.t0 = time.monotonic()
    stage.child.argv[-1] = "raise RuntimeError('second death')"   # what the restart runs
    try:
        watching._watch([])
        assert stage.child.starts == 2                  # restarted, so the run goes on
        [ended] = watching.unplanned_exits
        assert (ended.process, ended.status, ended.error) == \
            ("Spark copy job", 1, "RuntimeError: first death")
        assert ended.log == str(tmp_path / "dying.log")
        assert "exited unplanned with status 1" in watching.view.events[0]
        assert watching.notes == []                     # a finding, not a warning
        # the second death's error comes from what the log gained since the restart
        assert stage.child.wait_exit(30)
        watching._watch([])
        assert [e.error for e in watching.unplanned_exits] == \
            ["RuntimeError: first death", "RuntimeError: second death"]
    finally:
        stage.child.kill()
