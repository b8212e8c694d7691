"""Scenario.build: what --brokers, --bootstrap and the cluster faults accept together, each
refusal one sentence, before anything runs."""

from __future__ import annotations

import pytest

from oncelog.verify.scenario import BOOTSTRAP_FAULTS, DEFAULT_FAULTS, BadInput, Scenario


def build(**options):
    defaults = {"semantics": "at-least-once", "faults": "none", "duration_s": 30, "seed": 1}
    return Scenario.build(**{**defaults, **options})


def test_one_broker_is_the_default_and_no_cluster():
    scenario = build()
    assert scenario.brokers == 1 and not scenario.is_cluster
    assert scenario.replication_factor == 1
    assert scenario.to_dict()["brokers"] == 1


@pytest.mark.parametrize("brokers, replication", [(2, 2), (3, 3), (5, 3)])
def test_a_cluster_replicates_up_to_three_times(brokers, replication):
    scenario = build(brokers=brokers, faults="kill-leader,pause-broker,kill-broker")
    assert scenario.is_cluster and scenario.replication_factor == replication
    assert scenario.faults == ("kill-leader", "pause-broker", "kill-broker")


@pytest.mark.parametrize("faults, message", [
    ("kill-leader", "kill-leader needs a cluster the verifier starts itself; add --brokers 3"),
    ("pause-broker,kill-consumer", "pause-broker needs a cluster"),
    ("kill-leader,pause-broker", "kill-leader and pause-broker need a cluster"),
])
def test_cluster_faults_need_two_brokers_or_more(faults, message):
    for brokers in (None, 1):
        with pytest.raises(BadInput, match=message) as error:
            build(faults=faults, brokers=brokers)
        assert "\n" not in str(error.value)


def test_brokers_and_bootstrap_exclude_each_other_even_for_one_broker():
    for brokers in (1, 3):
        with pytest.raises(BadInput) as error:
            build(brokers=brokers, bootstrap="127.0.0.1:9092")
        assert str(error.value) == ("--brokers starts brokers of the verifier's own and "
                                    "--bootstrap uses an existing one; drop one of them")
    assert build(bootstrap="127.0.0.1:9092").brokers == 1


@pytest.mark.parametrize("faults", ["kill-leader", "pause-broker,kill-consumer", "split",
                                    "kill-broker"])
def test_a_broker_fault_with_bootstrap_is_refused_naming_the_faults_that_apply(faults):
    """Before: a cluster fault with --bootstrap said "add --brokers 3", which --bootstrap
    refuses in turn. A broker the run did not start takes no broker fault at all."""
    with pytest.raises(BadInput) as error:
        build(faults=faults, bootstrap="127.0.0.1:9092")
    said = str(error.value)
    assert "\n" not in said and "--brokers" not in said, said
    assert f"{faults.split(',')[0]} acts on brokers the verifier started itself, so it cannot " \
           "be used with --bootstrap" in said, said
    assert "the faults that apply there are kill-consumer, kill-driver, drop-acks" in said


def test_with_bootstrap_the_default_faults_are_those_that_apply():
    """``oncelog verify --bootstrap HOST:PORT`` without --faults used to stop at once: the
    default faults include kill-broker, which --bootstrap refuses."""
    scenario = build(faults=None, bootstrap="127.0.0.1:9092", duration_s=45)
    assert scenario.faults == BOOTSTRAP_FAULTS == ("kill-consumer", "kill-driver", "drop-acks")
    assert build(faults=None, duration_s=45).faults == DEFAULT_FAULTS
    control = build(faults=None, semantics=None, control="lost", bootstrap="127.0.0.1:9092")
    assert control.faults == ("kill-consumer",)


def test_brokers_must_be_positive():
    with pytest.raises(BadInput, match="--brokers must be positive, not 0"):
        build(brokers=0)


def test_the_default_faults_run_on_one_broker():
    assert build(faults=",".join(DEFAULT_FAULTS), duration_s=45).brokers == 1
    assert "kill-leader" not in DEFAULT_FAULTS and "pause-broker" not in DEFAULT_FAULTS


def test_all_is_the_three_guarantees_and_transactional_is_asked_for_by_name():
    assert build(semantics="all").semantics == ("at_most_once", "at_least_once", "exactly_once")
    scenario = build(semantics="exactly-once,transactional")
    assert scenario.semantics == ("exactly_once", "transactional")
    assert scenario.to_dict()["semantics"] == ["exactly-once", "transactional"]
    assert (scenario.isolation, scenario.abort_probability) == ("read_committed", 0.2)


def test_the_negative_control_needs_the_transactional_run():
    assert build(semantics="transactional", isolation="read_uncommitted").isolation == \
        "read_uncommitted"
    with pytest.raises(BadInput, match="--isolation only changes how the transactional run"):
        build(semantics="all", isolation="read_uncommitted")
    with pytest.raises(BadInput, match="unknown isolation level 'dirty'"):
        build(semantics="transactional", isolation="dirty")


@pytest.mark.parametrize("probability", [-0.1, 1.0, 1.5])
def test_the_abort_probability_is_a_probability_below_one(probability):
    with pytest.raises(BadInput, match="--abort-probability must be at least 0 and below 1"):
        build(semantics="transactional", abort_probability=probability)


# -- negative controls (--control) ---------------------------------------------------------

@pytest.mark.parametrize("control, semantics, faults", [
    ("lost", ("at_least_once",), ("kill-consumer",)),
    ("duplicated", ("exactly_once",), ("kill-consumer",)),
    ("reordered", ("exactly_once",), ("drop-acks",)),
    ("aborted-reads", ("transactional",), ("kill-consumer",)),
])
def test_a_control_brings_its_semantics_and_faults_unless_told_otherwise(control, semantics,
                                                                           faults):
    scenario = Scenario.build(semantics=None, faults=None, duration_s=30, seed=1,
                              control=control)
    assert (scenario.control, scenario.semantics, scenario.faults) == (control, semantics, faults)
    assert scenario.control_of(semantics[0]).semantics == semantics[0]
    assert not scenario.uses_pipeline


def test_the_old_flags_are_aliases_of_their_controls():
    stage = build(semantics="exactly-once", exactly_once_stage="at-least-once-consumer")
    assert stage.control == "duplicated"
    isolation = build(semantics="transactional", isolation="read_uncommitted")
    assert isolation.control == "aborted-reads"
    assert Scenario.build(semantics=None, faults=None, duration_s=30, seed=1,
                          control="duplicated").exactly_once_stage == "at-least-once-consumer"


def test_a_control_breaks_only_its_own_semantics_run():
    scenario = build(semantics="all", control="reordered")
    assert scenario.control_of("exactly_once") is not None
    assert scenario.control_of("at_least_once") is None
    assert scenario.producer_preset("exactly_once") == "at_least_once"
    assert scenario.producer_preset("at_least_once") == "at_least_once"
    assert scenario.producer_socket_timeout_ms("exactly_once") == 2000
    assert scenario.producer_socket_timeout_ms("at_most_once") is None


@pytest.mark.parametrize("options, message", [
    ({"control": "lost", "semantics": "exactly-once"},
     "--control lost is a broken at-least-once run"),
    ({"control": "lost", "semantics": "transactional", "isolation": "read_uncommitted"},
     "two negative controls"),
    ({"control": "reordered", "semantics": "exactly-once", "exactly_once_stage": "transform"},
     "drop --exactly-once-stage"),
    ({"control": "everything"}, "unknown control 'everything'"),
])
def test_a_control_that_cannot_run_is_one_sentence(options, message):
    with pytest.raises(BadInput, match=message):
        build(**options)
