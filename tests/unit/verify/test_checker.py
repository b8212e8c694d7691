"""The checker on synthetic histories: each anomaly planted alone must be reported exactly
(the same ids, the same counts) and judged against each semantics' contract."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from oncelog.verify.checker import CONTRACTS, SEMANTICS, Reorder, check, normalize_semantics
from oncelog.verify.history import Delivered, History, Produced, make_id

from .histories import TOPIC, Run, clean_run


def verdicts(history: History) -> dict[str, bool]:
    return {semantics: check(history, semantics).contract_kept for semantics in SEMANTICS}


def test_a_clean_run_has_no_anomalies_and_keeps_every_contract():
    run, ids = clean_run({"p0": 5, "p1": 4}, partitions=2)
    result = check(run.history, "exactly-once")
    assert (result.produced, result.acknowledged, result.failed, result.delivered) == (9, 9, 0, 9)
    assert result.lost == [] and result.duplicated == {} and result.reordered == []
    assert result.unexpected == {} and result.unacknowledged_delivered == []
    assert result.warnings == [] and result.violations == []
    assert verdicts(run.history) == dict.fromkeys(SEMANTICS, True)


def test_lost_records_are_the_acknowledged_ids_never_delivered():
    run = Run()
    ids = [run.send("p0") for _ in range(6)]
    run.deliver(ids[0], ids[2], ids[3], ids[5])
    result = check(run.history, "at_least_once")
    assert result.lost == ["p0-000001", "p0-000004"]
    assert result.delivered == 4 and result.acknowledged == 6
    assert result.violations == ["2 acknowledged record(s) lost"]
    assert result.broken_by == ["lost"]
    assert verdicts(run.history) == {"at_most_once": True, "at_least_once": False,
                                     "exactly_once": False}


def test_records_acknowledged_then_lost_in_a_broker_restart_are_lost():
    """The broker acknowledged p0-000004..6 (acks=1, not yet flushed), was killed and came
    back without them; records sent after the restart arrive."""
    run = Run()
    before = [run.send("p0") for _ in range(7)]
    run.fault("kill-broker", "inject", pid=4242)
    run.fault("kill-broker", "heal")
    after = [run.send("p0") for _ in range(3)]
    run.deliver(*before[:4], *after)
    result = check(run.history, "at-least-once")
    assert result.lost == ["p0-000004", "p0-000005", "p0-000006"]
    assert result.reordered == [] and result.duplicated == {}
    assert [(event.name, event.action) for event in result.faults] == [
        ("kill-broker", "inject"), ("kill-broker", "heal")]
    assert result.faults[0].detail == {"pid": 4242}
    assert not result.contract_kept


def test_duplicates_count_ids_and_extra_copies():
    run = Run()
    a, b, c, d = (run.send("p0") for _ in range(4))
    run.deliver(a, b, c, d)
    run.deliver(b, b)                          # consumer replays: same offset, two more copies
    run.deliver(d, offset=17)                  # producer retry: written again at offset 17
    result = check(run.history, "at_most_once")
    assert result.duplicated == {b: 3, d: 2}
    assert result.duplicate_copies == 3
    assert result.log_duplicates == 1          # only d is held twice by the log
    assert result.delivered == 4 and result.lost == [] and result.reordered == []
    assert result.violations == ["2 record(s) delivered more than once (3 extra copies)"]
    assert verdicts(run.history) == {"at_most_once": False, "at_least_once": True,
                                     "exactly_once": False}


def test_a_record_delivered_after_a_later_one_is_reordered_with_its_witness():
    run = Run()
    ids = [run.send("p0") for _ in range(6)]
    run.deliver(ids[0], ids[1], ids[4], ids[2], ids[3], ids[5])
    result = check(run.history, "exactly_once")
    assert result.reordered == [Reorder(ids[2], ids[4], TOPIC, 0),
                                Reorder(ids[3], ids[4], TOPIC, 0)]
    assert result.lost == [] and result.duplicated == {}
    assert result.violations == ["2 record(s) delivered after a later record"]
    assert verdicts(run.history) == {"at_most_once": True, "at_least_once": True,
                                     "exactly_once": False}


def test_one_record_jumping_ahead_marks_every_record_it_overtook():
    run = Run()
    ids = [run.send("p0") for _ in range(5)]
    run.deliver(ids[4], *ids[:4])
    assert check(run.history, "exactly_once").reordered == [
        Reorder(id, ids[4], TOPIC, 0) for id in ids[:4]]


def test_a_replay_of_delivered_records_is_duplication_not_reordering():
    run, ids = clean_run({"p0": 6})
    run.deliver(*ids[3:])                      # a consumer restarted from an old offset
    result = check(run.history, "at_least_once")
    assert result.reordered == []
    assert result.duplicated == dict.fromkeys(ids[3:], 2)
    assert result.contract_kept


def test_order_is_only_compared_within_one_producer_and_one_partition():
    run = Run()
    p0 = [run.send("p0", partition=seq % 2) for seq in range(4)]   # partitions 0, 1, 0, 1
    p1 = [run.send("p1", partition=0) for _ in range(2)]
    # partition 0: p1's records before p0's; partition 1 delivered before partition 0
    run.deliver(p0[1], p0[3], p1[0], p1[1], p0[0], p0[2])
    assert check(run.history, "exactly_once").reordered == []


def test_delivery_order_comes_from_position_not_from_history_order():
    run = Run()
    ids = [run.send("p0") for _ in range(3)]
    # copies recorded out of order (say, by two sink readers) but positioned in order
    for position, id in reversed(list(enumerate(ids))):
        run.history.append(Delivered(id, TOPIC, 0, position, position, run.now()))
    assert check(run.history, "exactly_once").reordered == []


def test_unexpected_ids_are_reported_apart_and_break_every_contract():
    run, ids = clean_run({"p0": 3})
    run.deliver("ghost-000001", "ghost-000001", "p9-000000", partition=0, offset=99)
    result = check(run.history, "at_most_once")
    assert result.unexpected == {"ghost-000001": 2, "p9-000000": 1}
    assert result.delivered == 3 and result.duplicated == {} and result.reordered == []
    assert result.violations == ["2 delivered record(s) never produced"]
    assert verdicts(run.history) == dict.fromkeys(SEMANTICS, False)


def test_a_delivered_record_whose_acknowledgement_was_lost_is_neither_lost_nor_a_violation():
    run = Run()
    acked = run.send("p0")
    ack_dropped = run.send("p0", ack=False)        # written, the response never arrived
    never_written = run.send("p0", ack=False, written=False)
    timed_out = run.send("p0", ack=False)
    run.fail(timed_out)
    run.deliver(acked, ack_dropped, timed_out)
    result = check(run.history, "exactly_once")
    assert result.lost == []
    assert result.unacknowledged_delivered == [ack_dropped, timed_out]
    assert result.failed_delivered == [timed_out]
    assert (result.produced, result.acknowledged, result.failed, result.delivered) == (4, 1, 1, 3)
    assert never_written not in result.lost
    assert verdicts(run.history) == dict.fromkeys(SEMANTICS, True)


def test_contracts_are_data():
    assert CONTRACTS == {"at_most_once": ("duplicated", "unexpected"),
                         "at_least_once": ("lost", "unexpected"),
                         "exactly_once": ("lost", "duplicated", "reordered", "unexpected"),
                         "transactional": ("aborted_reads", "uncommitted_reads", "lost",
                                           "duplicated", "reordered", "unexpected")}


def test_every_anomaly_at_once_is_each_reported():
    run = Run()
    ids = [run.send("p0") for _ in range(6)]
    run.deliver(ids[0], ids[2], ids[1], ids[3], ids[3], "x-000000")   # ids[4], ids[5] lost
    result = check(run.history, "exactly_once")
    assert result.broken_by == ["lost", "duplicated", "reordered", "unexpected"]
    assert result.lost == ids[4:] and result.duplicated == {ids[3]: 2}
    assert result.reordered == [Reorder(ids[1], ids[2], TOPIC, 0)]
    assert result.unexpected == {"x-000000": 1}


def test_warnings_for_runs_that_prove_nothing():
    assert check(History(), "at_least_once").warnings == [
        "no record was produced: the run checked nothing"]
    run = Run()
    run.send("p0", ack=False)
    assert check(run.history, "at_least_once").warnings == [
        "no record was acknowledged: 'nothing lost' proves nothing"]
    torn = History(run.history.records, torn_lines=2)
    assert "2 torn history line(s) skipped" in check(torn, "at_least_once").warnings[-1]


def test_semantics_names():
    assert normalize_semantics("at-most-once") == "at_most_once"
    assert normalize_semantics("Exactly_Once") == "exactly_once"
    assert normalize_semantics("transactional") == "transactional"
    with pytest.raises(ValueError, match="choose at-most-once, at-least-once, exactly-once or "
                                         "transactional"):
        check(History(), "maybe-once")


def test_result_summary_caps_samples_but_not_counts():
    run = Run()
    ids = [run.send("p0") for _ in range(30)]
    summary = check(run.history, "at_least_once").to_dict(sample_size=5)
    assert summary["counts"]["lost"] == 30
    assert summary["samples"]["lost"] == ids[:5]
    assert summary["contract_kept"] is False


# -- properties ----------------------------------------------------------------------------

@st.composite
def clean_histories(draw) -> tuple[History, list[str]]:
    """Any number of producers and partitions; each partition delivers a random interleaving
    of its producers' records that keeps each producer's send order."""
    sends = draw(st.lists(st.tuples(st.sampled_from(["p0", "p1", "p2"]), st.integers(0, 2)),
                          min_size=1, max_size=40))
    run = Run()
    queues: dict[int, dict[str, list[str]]] = {}
    for producer, partition in sends:
        queue = queues.setdefault(partition, {}).setdefault(producer, [])
        queue.append(run.send(producer, partition))
    for _partition, by_producer in sorted(queues.items()):
        while any(by_producer.values()):
            producer = draw(st.sampled_from(sorted(p for p, q in by_producer.items() if q)))
            run.deliver(by_producer[producer].pop(0))
    return run.history, [record.id for record in run.history.produced]


@settings(max_examples=60, deadline=None)
@given(clean_histories(), st.sampled_from(SEMANTICS))
def test_a_random_clean_history_has_no_anomalies(drawn, semantics):
    history, ids = drawn
    result = check(history, semantics)
    assert (result.lost, result.duplicated, result.reordered, result.unexpected) == ([], {}, [], {})
    assert result.produced == result.acknowledged == result.delivered == len(ids)
    assert result.contract_kept


@settings(max_examples=60, deadline=None)
@given(clean_histories(), st.data())
def test_planting_k_duplicates_and_j_losses_reports_exactly_those(drawn, data):
    history, ids = drawn
    duplicated = data.draw(st.lists(st.sampled_from(ids), unique=True), label="duplicated")
    rest = [id for id in ids if id not in duplicated]
    lost = data.draw(st.lists(st.sampled_from(rest), unique=True) if rest else st.just([]),
                     label="lost")
    copies = {id: data.draw(st.integers(2, 4)) for id in duplicated}
    records = [record for record in history.records
               if not (isinstance(record, Delivered) and record.id in lost)]
    # the extra copies arrive last, as a consumer replay would deliver them
    position = max((r.position for r in history.delivered), default=0) + 1
    for id, n in copies.items():
        original = next(r for r in history.delivered if r.id == id)
        for _ in range(n - 1):
            records.append(Delivered(id, TOPIC, original.partition, original.offset, position,
                                     float(position + 10_000)))
            position += 1
    result = check(History(records), "exactly_once")
    assert result.duplicated == {id: copies[id] for id in ids if id in copies}
    assert result.duplicate_copies == sum(copies.values()) - len(copies)
    assert sorted(result.lost) == sorted(lost)
    assert result.reordered == [] and result.unexpected == {}
    assert result.contract_kept == (not duplicated and not lost)


def test_the_checker_needs_nothing_but_the_history():
    """A history with only Produced and Delivered records (no acks, no faults) still works."""
    records = [Produced(make_id("p0", seq), "p0", seq, None, float(seq)) for seq in range(3)]
    records += [Delivered(make_id("p0", seq), TOPIC, 0, seq, position, 10.0 + position)
                for position, seq in enumerate((0, 2, 1))]
    result = check(History(records), "exactly_once")
    assert result.reordered == [Reorder("p0-000001", "p0-000002", TOPIC, 0)]
    assert result.lost == []
