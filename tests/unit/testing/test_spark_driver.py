"""SparkDriver runs one driver process: start() then a with block must not start a second."""

from __future__ import annotations

import sys

import pytest

from oncelog.testing.spark import SparkDriver

_PROGRAM = "import time; print('started', flush=True); time.sleep(60)"


def test_a_with_block_after_start_keeps_the_one_driver_and_kills_it():
    driver = SparkDriver([sys.executable, "-c", _PROGRAM])
    driver.start()
    first = driver.pid
    with driver as running:
        assert running.pid == first
        running.wait_for_line("started", timeout_s=30)
    assert driver.process is None or driver.process.poll() is not None


def test_a_second_start_while_running_is_refused():
    with SparkDriver([sys.executable, "-c", _PROGRAM]) as driver:
        with pytest.raises(RuntimeError, match="already runs"):
            driver.start()
