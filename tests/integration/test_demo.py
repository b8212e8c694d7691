"""`oncelog demo`, the quick start's main job, run end to end."""

from __future__ import annotations

import sys

from oncelog.broker.process import free_port
from tests.process_tree import run_to_end


def test_demo_produces_crashes_and_finds_everything(tmp_path):
    result = run_to_end(
        [sys.executable, "-m", "oncelog", "demo", "--records", "3000", "--port", str(free_port()),
         "--data-dir", str(tmp_path / "demo")], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3000 acknowledged" in result.stdout
    assert "every acknowledged record is there once, in order" in result.stdout
    rows = [[cell.strip() for cell in line.split("│")[1:-1]]
            for line in result.stdout.splitlines() if "│" in line and "3000" in line]
    # read, acknowledged, delivered, lost, duplicated, out of order: before and after the crash
    assert [row[1:] for row in rows] == [["3000", "3000", "0", "0", "0"]] * 2
