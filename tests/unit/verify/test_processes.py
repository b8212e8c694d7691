"""``ChildProcess.wait_for_line`` reads what a child wrote before it exited: the verifier's
timed kills learn where a consumer crashed from its last line ("crash: committed N records,
not processed"), printed a moment before it killed itself."""

from __future__ import annotations

import sys
import time

from oncelog.verify.processes import ChildProcess

# The child exits at once; a grandchild it leaves behind writes a line to the same stdout a
# moment later: that line arrives after the child is gone, as a dying child's last line can.
LATE_LINE = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
             "\"import time; time.sleep(0.5); print('crash: late', flush=True)\"])")


def test_a_line_still_in_the_pipe_when_the_child_exited_is_found(tmp_path):
    child = ChildProcess("late", [sys.executable, "-c", LATE_LINE], tmp_path / "late.log",
                         watch=True).start()
    armed_at = time.monotonic()
    assert child.wait_exit(10)
    line = child.wait_for_line(lambda text: text.startswith("crash:"), after=armed_at,
                               timeout=10)
    assert line is not None and line.text == "crash: late"
    child.kill()


def test_a_child_that_exited_without_the_line_is_not_waited_for_until_the_timeout(tmp_path):
    child = ChildProcess("quiet", [sys.executable, "-c", "print('bye')"],
                         tmp_path / "quiet.log", watch=True).start()
    assert child.wait_exit(10)
    started = time.monotonic()
    assert child.wait_for_line(lambda text: text.startswith("crash:"), after=0,
                               timeout=30) is None
    assert time.monotonic() - started < 5
    child.kill()
