"""The acks table of the seeds, measured on a real cluster (``oncelog cluster acks-table``):
one leader failure per row is enough to show each claim, and each claim is asserted."""

from __future__ import annotations

import pytest

from oncelog.cluster.acks_table import ROWS, AcksTable

pytestmark = pytest.mark.slow

BY_LABEL = {row.label: row for row in ROWS}


def test_each_row_keeps_or_loses_what_the_seeds_say(tmp_path, zookeeper_connect):
    wanted = ("acks=1", "acks=all, min.insync=2", "unclean election on",
              "unclean election off")
    results = {r.row.label: r for r in AcksTable(
        tmp_path, cycles=1, rate=200, rows=tuple(BY_LABEL[label] for label in wanted),
        zookeeper_connect=zookeeper_connect).run()}
    for result in results.values():
        assert result.kills == 1 and result.acknowledged > 500
    # acks=1: the leader acknowledged records alone, then died before its followers fetched
    assert results["acks=1"].lost > 0
    # acks=all: every acknowledged record was on the ISR (retries may duplicate)
    assert results["acks=all, min.insync=2"].lost == 0
    # the ISR shrank to the leader, which then died: unclean election trades loss...
    assert results["unclean election on"].lost > 0
    # ...for the unavailability a clean election accepts instead
    off = results["unclean election off"]
    assert off.lost == 0
    assert off.unavailable_s > results["unclean election on"].unavailable_s
