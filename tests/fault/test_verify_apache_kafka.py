"""``oncelog verify --bootstrap`` against a real Apache Kafka (issue 32): every semantics,
transactions and the Spark pipeline included, under the faults that apply to a broker the
verifier did not start - kills of its own consumers, transform worker and reader, and
``drop-acks`` through its proxy - asserting the same contract and the same landed faults as
the runs on oncelog's broker (``test_verify.py``, ``test_verify_transactions.py``). The Spark
pipeline runs under ``drop-acks`` only: killing its driver costs a minute of Spark restart
and exercises the checkpoint and the sink, not the broker (``test_verify.py`` does it).

The Kafka is the plugin's session one (``oncelog_apache_kafka``: one node, shared with the
worker's other Apache Kafka tests); the runs go to its broker directly (``direct_bootstrap``),
since the verifier puts its own proxy in front, and must leave it running. Short runs (8-10
s of workload) keep the file small; the Spark JVM's start is most of its time.
``--bootstrap`` with one broker of a cluster (a proxy per broker, the cluster's replication
factor) is ``test_verify.py``'s, against the kit's oncelog cluster, which starts in seconds.
"""

from __future__ import annotations

import re

import pytest

from .test_verify import assert_schedule_played, dropped_acks, landed
from .verify_run import run_verify

pytestmark = pytest.mark.slow


def verify_against(kafka, tmp_path, semantics: list[str], faults: list[str], seed: int,
                   duration_s: int, *args: str, timeout: float = 240):
    """A run against ``kafka`` that kept every contract, played its schedule, started no
    broker and left Kafka running."""
    names = ",".join(name.replace("_", "-") for name in semantics)
    run = run_verify(tmp_path / "out", "--bootstrap", kafka.direct_bootstrap,
                     "--semantics", names, "--duration", str(duration_s), "--seed", str(seed),
                     "--faults", ",".join(faults), *args, timeout=timeout)
    assert run.returncode == 0, run.explain()
    assert run.result["verdict"] == "kept", run.explain()
    assert not (run.out / "broker").exists(), "the run started a broker of its own"
    assert kafka.is_running(), "the run stopped a Kafka it did not start"
    for name in semantics:
        assert_schedule_played(run, name, faults, duration_s,
                               label=None if len(semantics) == 1 else "all")
        assert run.result["results"][name]["contract_kept"], run.explain()
    return run


def test_at_most_once_and_at_least_once_against_apache_kafka(oncelog_apache_kafka, tmp_path):
    """The two consumers killed where their semantics is weakest: at-most-once after
    committing a batch (lost, never duplicated), at-least-once after processing one (seen
    again, nothing lost); drop-acks makes the at-least-once producers retry."""
    run = verify_against(oncelog_apache_kafka, tmp_path, ["at_most_once", "at_least_once"],
                         ["kill-consumer", "drop-acks"], 12, 10)
    at_most_once = run.result["results"]["at_most_once"]["counts"]
    assert at_most_once["duplicated"] == 0 and at_most_once["acknowledged"] > 1000
    batches = [re.match(r"committed (\d+) records, not processed", where)
               for where in landed(run.result, "at_most_once", "kill-consumer")]
    assert batches and all(batches), run.explain()
    assert at_most_once["lost"] >= sum(int(batch.group(1)) for batch in batches) > 0, \
        run.explain()

    at_least_once = run.result["results"]["at_least_once"]["counts"]
    assert at_least_once["lost"] == 0 and at_least_once["acknowledged"] > 1000, run.explain()
    batches = [re.match(r"processed (\d+) records, not committed", where)
               for where in landed(run.result, "at_least_once", "kill-consumer")]
    assert batches and all(batches), run.explain()
    # the batch processed but not committed came again, on top of the producers' retries
    again = at_least_once["duplicated"] - at_least_once["log_duplicates"]
    assert again >= max(int(batch.group(1)) for batch in batches) > 0, run.explain()
    assert dropped_acks(run.result, "at_least_once") > 0, run.explain()


@pytest.mark.timeout(400)  # Spark's JVM: 40-100 s on a busy machine
def test_exactly_once_spark_pipeline_against_apache_kafka(oncelog_apache_kafka, tmp_path):
    """The default exactly-once stage: the Spark copy job reads Kafka with the ``oncelog``
    source into the TransactionalSink while the idempotent producers meet dropped
    acknowledgements, which Kafka must deduplicate. No driver kill here: a Spark restart
    costs a minute, and what it exercises - the checkpoint and the sink's markers - does not
    depend on the broker (``test_verify.py`` kills the driver against oncelog's broker)."""
    run = verify_against(oncelog_apache_kafka, tmp_path, ["exactly_once"], ["drop-acks"], 1,
                         8, "--rate", "200", timeout=360)
    counts = run.result["results"]["exactly_once"]["counts"]
    assert counts["lost"] == counts["duplicated"] == counts["reordered"] == 0, run.explain()
    assert counts["log_duplicates"] == 0, run.explain()  # Kafka deduplicated the retries
    assert counts["acknowledged"] > 1000, run.explain()
    assert counts["delivered"] >= counts["acknowledged"], run.explain()
    details = run.result["runs"]["exactly_once"]
    assert details["stage"] == "Spark copy job" and details["sink_rows"] == counts["delivered"]
    log = (run.out / "logs" / "exactly-once-copy-job.log").read_text()
    assert re.search(r"\] batch \d+ written$", log, re.M), run.explain()
    assert dropped_acks(run.result, "exactly_once") > 0, run.explain()


def test_exactly_once_kafka_transform_against_apache_kafka(oncelog_apache_kafka, tmp_path):
    """``--exactly-once-stage transform``: Kafka's own exactly-once, a consume-transform-
    produce worker (its input offsets sent to the transaction) killed inside a transaction,
    its output read with read_committed."""
    run = verify_against(oncelog_apache_kafka, tmp_path, ["exactly_once"],
                         ["kill-consumer", "drop-acks"], 9, 10, "--rate", "300",
                         "--exactly-once-stage", "transform")
    counts = run.result["results"]["exactly_once"]["counts"]
    assert counts["lost"] == counts["duplicated"] == counts["reordered"] == 0, run.explain()
    assert counts["acknowledged"] > 1000, run.explain()
    assert counts["delivered"] == counts["acknowledged"], run.explain()
    assert run.result["runs"]["exactly_once"]["stage"] == "exactly-once transform"
    kills = landed(run.result, "exactly_once", "kill-consumer")
    assert kills and all(re.fullmatch(r"produced \d+ copies, transaction not committed|"
                                      r"kill -9 \(.*\)", where) for where in kills), run.explain()
    assert any(where.startswith("produced") for where in kills), run.explain()
    assert dropped_acks(run.result, "exactly_once") > 0, run.explain()


def test_transactional_against_apache_kafka(oncelog_apache_kafka, tmp_path):
    """Transactional producers commit and abort at random across partitions; the
    read_committed reader, killed after writing a batch with its positions, reads no
    aborted record and loses no committed one."""
    run = verify_against(oncelog_apache_kafka, tmp_path, ["transactional"],
                         ["kill-consumer", "drop-acks"], 12, 10, "--rate", "300")
    result = run.result["results"]["transactional"]
    counts, transactions = result["counts"], result["transactions"]
    assert counts["aborted_reads"] == counts["uncommitted_reads"] == 0, run.explain()
    assert counts["lost"] == counts["duplicated"] == counts["reordered"] == 0, run.explain()
    assert transactions["aborted"] > 20 and counts["aborted_records"] > 100, run.explain()
    assert transactions["committed"] > 100 and counts["acknowledged"] > 1000, run.explain()
    kills = landed(run.result, "transactional", "kill-consumer")
    assert kills and all(re.fullmatch(r"wrote \d+ records and their positions|kill -9 \(.*\)",
                                      where) for where in kills), run.explain()
    assert dropped_acks(run.result, "transactional") > 0, run.explain()
