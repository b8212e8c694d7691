"""``oncelog verify --semantics transactional``, and exactly-once through Kafka
(``--exactly-once-stage transform``).

Transactional: producers commit or abort transactions at random across the partitions, an
exactly-once ``read_committed`` reader delivers them into the sink, and the checker judges
each record by its transaction.

Under kill-broker, kill-consumer and drop-acks no aborted or uncommitted record is read and
no committed one is lost or duplicated - and the run really aborted transactions, or "no
aborted reads" would prove nothing. The negative control reads the same workload with
``read_uncommitted``: the checker must see the aborted records and call the contract broken,
which is what proves that it can see them at all.

Through Kafka: the records go through a consume-transform-produce worker into an output
topic and are read from there; killing the worker inside its transaction must not lose or
repeat anything.
"""

from __future__ import annotations

import re

import pytest

from .test_verify import assert_schedule_played, faults_of, landed
from .verify_run import run_verify

pytestmark = pytest.mark.slow


def test_transactional_run_under_faults_reads_no_aborted_record(tmp_path):
    faults = ["kill-broker", "kill-consumer", "drop-acks"]
    run = run_verify(tmp_path / "out", "--semantics", "transactional", "--duration", "18",
                     "--seed", "8", "--rate", "300", "--faults", ",".join(faults))
    assert run.returncode == 0, run.explain()
    result = run.result["results"]["transactional"]
    counts, transactions = result["counts"], result["transactions"]
    assert result["contract_kept"] and result["violations"] == [], run.explain()
    assert counts["aborted_reads"] == counts["uncommitted_reads"] == 0, run.explain()
    assert counts["lost"] == counts["duplicated"] == counts["reordered"] == 0, run.explain()
    # aborts were exercised: hundreds of records in aborted transactions, none read
    assert transactions["aborted"] > 20 and counts["aborted_records"] > 100, run.explain()
    assert transactions["committed"] > 100 and counts["acknowledged"] > 1000, run.explain()
    assert counts["delivered"] >= counts["acknowledged"], run.explain()
    assert_schedule_played(run, "transactional", faults, 18)
    # the reader died right after committing a batch with its positions, and resumed there
    for where in landed(run.result, "transactional", "kill-consumer"):
        assert re.fullmatch(r"wrote \d+ records and their positions|kill -9 \(.*\)", where), \
            run.explain()
    dropped = sum(e["detail"]["dropped"] for e in faults_of(run.result, "transactional")
                  if e["name"] == "drop-acks" and e["action"] == "heal")
    assert dropped > 0, run.explain()
    assert "transactions" in run.stdout and "committed" in run.stdout, run.explain()


def test_the_negative_control_read_uncommitted_shows_the_aborted_reads(tmp_path):
    """The same workload read with read_uncommitted: the aborted transactions' records that
    reached the log are delivered, and the verifier must say so and exit 1."""
    run = run_verify(tmp_path / "out", "--semantics", "transactional", "--duration", "10",
                     "--seed", "7", "--rate", "300", "--faults", "kill-consumer",
                     "--isolation", "read_uncommitted")
    assert run.returncode == 1, run.explain()
    result = run.result["results"]["transactional"]
    assert not result["contract_kept"] and not run.result["contracts_kept"], run.explain()
    assert result["counts"]["aborted_reads"] > 0, run.explain()
    assert result["counts"]["aborted_reads"] <= result["counts"]["aborted_records"]
    assert result["counts"]["lost"] == result["counts"]["duplicated"] == 0, run.explain()
    assert "aborted_reads" in result["contract"], run.explain()
    assert any("of aborted transactions delivered" in v for v in result["violations"]), \
        run.explain()
    assert any("negative control" in w for w in result["warnings"]), run.explain()
    assert run.result["scenario"]["isolation"] == "read_uncommitted"
    # --isolation read_uncommitted is an alias of --control aborted-reads
    assert run.result["scenario"]["control"] == "aborted-reads", run.explain()
    assert result["control"] == "aborted_reads" and result["verdict"] == "broken"
    assert "negative control aborted reads: caught" in run.stdout, run.explain()
    assert "✘ transactional" in run.stdout, run.explain()


def test_exactly_once_through_a_kafka_transform_neither_loses_nor_duplicates(tmp_path):
    """``--exactly-once-stage transform``: producer -> topic -> consume-transform-produce
    worker (one Kafka transaction per batch, input offsets included) -> output topic ->
    read_committed reader -> sink. The worker is killed inside a transaction (its copies
    produced, not committed), the broker is killed, acknowledgements are dropped: every
    acknowledged record is in the sink once, in order."""
    faults = ["kill-consumer", "kill-broker", "drop-acks"]
    run = run_verify(tmp_path / "out", "--semantics", "exactly-once", "--exactly-once-stage",
                     "transform", "--duration", "20", "--seed", "9", "--rate", "300",
                     "--faults", ",".join(faults))
    assert run.returncode == 0, run.explain()
    result = run.result["results"]["exactly_once"]
    counts = result["counts"]
    assert result["contract_kept"], run.explain()
    assert counts["lost"] == counts["duplicated"] == counts["reordered"] == 0, run.explain()
    assert counts["acknowledged"] > 1000, run.explain()
    assert counts["delivered"] == counts["acknowledged"], run.explain()
    assert_schedule_played(run, "exactly_once", faults, 20)
    details = run.result["runs"]["exactly_once"]
    assert details["stage"] == "exactly-once transform", run.explain()
    # the sink was filled from the output topic, not from the producers' topic
    history = (run.out / "history" / "exactly-once" / "sink.jsonl").read_text()
    assert f'"topic":"{details["topic"]}-out"' in history, run.explain()
    kills = landed(run.result, "exactly_once", "kill-consumer")
    assert kills and all(re.fullmatch(r"produced \d+ copies, transaction not committed|"
                                      r"kill -9 \(.*\)", where) for where in kills), run.explain()
    assert any(where.startswith("produced") for where in kills), run.explain()
    dropped = sum(e["detail"]["dropped"] for e in faults_of(run.result, "exactly_once")
                  if e["name"] == "drop-acks" and e["action"] == "heal")
    assert dropped > 0, run.explain()
