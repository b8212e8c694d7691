"""``oncelog verify`` proves only what its faults reached, and can be seen failing.

- A run whose faults cannot land is **inconclusive**: drop-acks against the at-most-once
  producer (``acks=0``: the broker sends no response to drop) keeps the contract but proves
  nothing, so no ✔ is printed and the exit status is 3.
- Each **negative control** (``--control``) is a deliberately broken configuration run
  through the real producers, broker, faults and delivery stage; the checker must catch its
  anomaly and the run must exit 1: ``lost`` (the at-least-once contract delivered by the
  commit-then-process consumer, killed between the two), ``reordered`` (exactly-once
  produced without idempotence, 5 requests in flight, one request in several never
  written so its retry lands behind later ones). ``duplicated`` and ``aborted-reads`` are
  in test_verify.py and test_verify_transactions.py.

What each fault did (pid, downtime, dropped responses, the Spark batch window) is asserted
in test_verify.py's runs per semantics.
"""

from __future__ import annotations

import re

import pytest

from .verify_run import run_verify

pytestmark = pytest.mark.slow


def test_faults_that_cannot_land_make_the_run_inconclusive_without_a_check_mark(tmp_path):
    run = run_verify(tmp_path / "out", "--semantics", "at-most-once", "--faults", "drop-acks",
                     "--duration", "10", "--seed", "4")
    assert run.returncode == 3, run.explain()
    result = run.result["results"]["at_most_once"]
    assert result["contract_kept"] and result["violations"] == [], run.explain()
    assert result["verdict"] == "inconclusive" and run.result["verdict"] == "inconclusive"
    assert result["inconclusive_because"].startswith("no fault landed"), run.explain()
    (outcome,) = result["fault_outcomes"]
    assert outcome["name"] == "drop-acks" and outcome["dropped"] == 0, run.explain()
    assert outcome["landed"] is False and outcome["elapsed_s"] is not None, run.explain()
    assert result["counts"]["acknowledged"] > 1000, run.explain()  # the workload did run
    assert "✔" not in run.stdout + run.stderr, run.explain()
    assert "inconclusive" in run.stdout and "none landed" in run.stdout, run.explain()
    assert "inconclusive: the run proved nothing for at-most-once" in run.stderr


def test_the_lost_control_is_caught(tmp_path):
    run = run_verify(tmp_path / "out", "--control", "lost", "--duration", "10", "--seed", "3")
    assert run.returncode == 1, run.explain()
    assert run.result["scenario"]["control"] == "lost"
    assert list(run.result["results"]) == ["at_least_once"], run.explain()
    result = run.result["results"]["at_least_once"]
    assert result["verdict"] == "broken" and result["control"] == "lost", run.explain()
    kills = [o for o in result["fault_outcomes"] if o["name"] == "kill-consumer"]
    assert kills and all(o["landed"] for o in kills), run.explain()
    # the consumer died between committing a batch and processing it: that batch is lost
    batches = [re.fullmatch(r"committed (\d+) records, not processed", o["where"])
               for o in kills]
    assert all(batches), run.explain()
    assert result["counts"]["lost"] >= sum(int(b.group(1)) for b in batches) > 0, run.explain()
    assert result["counts"]["duplicated"] == 0, run.explain()
    assert any("acknowledged record(s) lost" in v for v in result["violations"]), run.explain()
    assert "negative control lost: caught" in run.stdout, run.explain()


def test_the_reordered_control_is_caught(tmp_path):
    run = run_verify(tmp_path / "out", "--control", "reordered", "--duration", "12",
                     "--seed", "3")
    assert run.returncode == 1, run.explain()
    result = run.result["results"]["exactly_once"]
    assert result["verdict"] == "broken" and result["control"] == "reordered", run.explain()
    assert result["counts"]["reordered"] > 0, run.explain()
    assert result["counts"]["lost"] == 0, run.explain()
    assert any("delivered after a later record" in v for v in result["violations"]), \
        run.explain()
    (drop,) = [o for o in result["fault_outcomes"] if o["name"] == "drop-acks"]
    assert drop["landed"] and drop["dropped"] > 0, run.explain()
    assert run.result["runs"]["exactly_once"]["stage"] == "read_committed reader"
    assert "negative control reordered: caught" in run.stdout, run.explain()
