"""``oncelog pipeline run`` with its output in a pipe (a log file, CI): progress shows while
it runs."""

from __future__ import annotations

import re

import pytest

from .pipeline_command import Run


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_progress_shows_in_a_pipe_while_the_run_goes(tmp_path):
    """With its output in a file or a pipe, ``pipeline run`` showed nothing between
    "starting Spark" and the final report (85 s in one run): its live table is only written
    out when it stops. Now such output gets plain progress lines, each flushed as printed: a
    line per committed batch, and one every few seconds at least."""
    run = Run("--work-dir", "out", "--records", "2000", "--rate", "250", cwd=tmp_path)
    try:
        status = run.finish()
    finally:
        run.close()
    assert status == 0, run.output
    ended = run.lines[-1][0]
    progress = [(at, line) for at, line in run.lines if line.startswith("pipeline ")]
    assert len(progress) >= 3, run.output
    assert ended - progress[0][0] > 5, "the progress lines arrived only at the end"
    gaps = [b - a for (a, _), (b, _) in zip(progress, progress[1:])]
    assert max(gaps) < 15, gaps   # every 5 s at least, give or take a loaded machine
    last = progress[-1][1]
    assert re.match(r"pipeline \d+ s: produced 2000/2000, acknowledged 2000, rows in sink "
                    r"\d+, batches committed \d+, lag \d+$", last.strip()), last
