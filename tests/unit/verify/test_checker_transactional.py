"""The checker's transactional classification on synthetic histories: each record is judged
by its transaction's outcome (committed, aborted, unknown, uncommitted), and each anomaly
planted alone is reported exactly and breaks the transactional contract."""

from __future__ import annotations

from oncelog.verify.checker import CONTRACTS, check
from oncelog.verify.history import History

from .histories import Run


def transactional_run() -> tuple[Run, dict[str, list[str]]]:
    """p0 commits one transaction over three partitions, aborts one, gets no answer to one
    commit, and gives up on one without asking to commit; p1 commits one. Each record of a
    committed transaction is delivered once, nothing else."""
    run = Run()
    txns = {}
    for name, outcomes in (("committed", ("committing", "committed")), ("aborted", ("aborted",)),
                           ("unknown", ("committing",)), ("uncommitted", ())):
        txns[name] = [run.send("p0", partition) for partition in range(3)]
        run.transaction("p0", txns[name], *outcomes)
    txns["p1"] = [run.send("p1", partition) for partition in range(2)]
    run.transaction("p1", txns["p1"], "committing", "committed")
    run.deliver(*txns["committed"], *txns["p1"])
    return run, txns


def test_a_clean_transactional_run_keeps_the_contract_and_counts_transactions():
    run, txns = transactional_run()
    result = check(run.history, "transactional")
    assert result.contract_kept and result.violations == [] and result.warnings == []
    assert result.acknowledged == 5                # committed records, not broker acks
    assert result.produced == 14 and result.delivered == 5
    assert result.transactions == {"committed": 2, "aborted": 1, "unknown": 1}
    assert result.aborted_records == 3
    assert result.aborted_reads == result.uncommitted_reads == result.lost == []
    document = result.to_dict()
    assert document["contract"] == list(CONTRACTS["transactional"])
    assert document["counts"]["aborted_reads"] == document["counts"]["uncommitted_reads"] == 0
    assert document["counts"]["aborted_records"] == 3
    assert document["transactions"] == {"committed": 2, "aborted": 1, "unknown": 1}


def test_a_delivered_record_of_an_aborted_transaction_is_an_aborted_read():
    run, txns = transactional_run()
    run.deliver(txns["aborted"][1])
    result = check(run.history, "transactional")
    assert result.aborted_reads == [txns["aborted"][1]] and result.uncommitted_reads == []
    assert result.broken_by == ["aborted_reads"]
    assert result.violations == ["1 record(s) of aborted transactions delivered"]
    assert result.to_dict()["samples"]["aborted_reads"] == [txns["aborted"][1]]


def test_a_commit_that_failed_and_was_aborted_counts_as_aborted():
    run = Run()
    ids = [run.send("p0", partition) for partition in range(2)]
    run.transaction("p0", ids, "committing", "aborted")
    run.deliver(ids[0])
    result = check(run.history, "transactional")
    assert result.transactions == {"committed": 0, "aborted": 1, "unknown": 0}
    assert result.aborted_reads == [ids[0]] and not result.contract_kept


def test_a_transaction_never_asked_to_commit_read_is_an_uncommitted_read():
    run, txns = transactional_run()
    run.deliver(*txns["uncommitted"])
    result = check(run.history, "transactional")
    assert result.uncommitted_reads == txns["uncommitted"] and result.aborted_reads == []
    assert result.broken_by == ["uncommitted_reads"]
    assert result.violations == ["3 record(s) of transactions never committed delivered"]


def test_an_unknown_outcome_may_be_delivered_once_but_not_twice():
    run, txns = transactional_run()
    run.deliver(*txns["unknown"])
    assert check(run.history, "transactional").contract_kept
    run.deliver(txns["unknown"][0])
    result = check(run.history, "transactional")
    assert result.duplicated == {txns["unknown"][0]: 2}
    assert result.broken_by == ["duplicated"]


def test_lost_means_committed_and_never_delivered():
    """Records of the aborted, unknown and uncommitted transactions are absent and that is
    fine; a committed record absent is lost, even though the broker acknowledged others."""
    run, txns = transactional_run()
    history = History([record for record in run.history
                       if getattr(record, "id", None) != txns["committed"][2]
                       or type(record).__name__ != "Delivered"])
    result = check(history, "transactional")
    assert result.lost == [txns["committed"][2]]
    assert result.broken_by == ["lost"]


def test_a_run_that_aborted_nothing_is_warned_about():
    run = Run()
    ids = [run.send("p0") for _ in range(3)]
    run.transaction("p0", ids, "committing", "committed")
    run.deliver(*ids)
    result = check(run.history, "transactional")
    assert result.contract_kept
    assert result.warnings == ["no transaction was aborted: 'no aborted reads' proves nothing"]


def test_other_semantics_ignore_transactions_and_report_no_transactional_counts():
    run, txns = transactional_run()
    run.deliver(*txns["aborted"])
    result = check(run.history, "exactly-once")
    assert result.aborted_reads == [] and result.transactions == {}
    assert "aborted_reads" not in result.to_dict()["counts"]
    assert result.acknowledged == 14  # every send was acknowledged by the broker
