"""The cluster's control plane and replication under thousands of seeds (issue 30).

Each block runs ``python -m oncelog.simulation --seeds FIRST-LAST`` in a process of its own
(under ``PYTHONHASHSEED=0``, as the replay command does): N simulated brokers with one
in-memory ZooKeeper on one virtual clock, a schedule of produce requests, topic creations,
growths and deletions, crashes, restarts, cut links and expired sessions drawn from each
seed, invariants checked after every step (``oncelog.simulation.invariants``). A failing
seed prints what broke and the command that replays it; it then becomes a regression seed
below.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

BLOCKS = 6
# 3,000 seeds: "several thousand in a few minutes" (issue 30), inside the suite's 45-minute
# budget (seeds 0-4999 all passed on 2026-11-29, `--seeds 0-4999`, before the count was cut);
# a block of 500 seeds takes about 85 s on one core alone (2026-11-29: seeds 0-199 in 33 s,
# 47 s before a run ended as soon as the cluster had settled); in `make test` beside Spark
# and cluster tests, up to 294 s on a slow day (clean-clone CI, 2026-11-29, before that
# change): hence 600 s a block, not pytest's 300. 4,000 seeds took 41 min 11 s of suite in a
# clean-clone CI (the eight blocks 110-245 s): cut to 3,000 for the budget's margin
SEEDS_PER_BLOCK = 500
# Seeds that found a bug, each replayed on its own (a seed's schedule depends on the
# generator in oncelog.simulation.cluster: when that changes, these still run, and the
# bug's story stays with the fix and its own test):
REGRESSION_SEEDS = {
    63: "a leader of a deleted topic's old incarnation wrote its ISR into the new topic's "
        "partition state (znode versions start over; the CAS now checks the state's czxid)",
    80: "a broker down while its topic was deleted and created again reopened the old "
        "incarnation's files as the new replica (directories now name their topic id)",
    81: "a follower of the new incarnation fetched, by name, from a leader still holding the "
        "old one, both in epoch 0 (followers now fetch by topic id, Fetch v13)",
    51: "the aborted transactions a read_committed fetch lists were sorted by producer id, "
        "not by first offset: a consumer walking them in order read an aborted record (the "
        "invariants now sort them as Kafka's consumer does; the order itself is pinned by "
        "tests/unit/partition/test_transactions.py)",
    119: "a topic deleted while its follower asked the leader where to truncate: the "
         "fetcher truncated the deleted replica, whose files were gone, and the error "
         "ended the broker's membership (a removed replica is now dropped)",
    2399: "a follower asked its leader where to truncate and got no epoch back (end offset "
          "-1): it truncated its log to -1 (it now truncates to its high watermark, as "
          "Kafka's fetcher does)",
    3377: "a leader cut off past its session rejoined as a follower and took its new "
          "leader's high watermark, lower than the one it had exposed (a follower's high "
          "watermark now only moves forward)",
    221: "a broker whose session expired renewed its leadership lease as it registered "
         "again, before reading the leaders elected meanwhile: two brokers acted as one "
         "partition's leader (the lease now waits for the cluster to be read again)",
    2625: "a transactional batch retried past its transaction's timeout landed in a topic "
          "deleted and created again under the same name, after the coordinator had "
          "aborted the transaction: it opened a transaction nobody would end, and the "
          "partition's last stable offset stopped (leaders now ask the coordinator before "
          "a producer's first transactional batch, KIP-890; "
          "tests/cluster/test_transaction_verification.py)",
    3144: "the same hanging transaction, the late batch sent to a leader that did not "
          "coordinate the transaction (the only kind the broker checked before)",
    4710: "two CreatePartitions for one topic served at once: ZooKeeper's store asserted "
          "(tests/unit/partition/test_metadata_forward.py); and a coordinator that had not "
          "heard of a topic created again took it for deleted and dropped its marker, "
          "leaving the transaction open in it (it now asks the store first; "
          "tests/unit/coordinator/test_transaction_markers.py)",
}


def simulate(seeds: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "oncelog.simulation", "--seeds", seeds],
                          capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "PYTHONHASHSEED": "0"})


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("block", range(BLOCKS))
def test_every_seed_keeps_every_invariant(block):
    first = block * SEEDS_PER_BLOCK
    run = simulate(f"{first}-{first + SEEDS_PER_BLOCK - 1}")
    summary = re.search(r"(\d+) seeds, (\d+) failed \[([\d, ]*)\]", run.stdout)
    assert summary is not None, run.stdout[-6000:] + run.stderr[-3000:]
    failed = {int(seed) for seed in summary.group(3).split(",") if seed.strip()}
    assert int(summary.group(1)) == SEEDS_PER_BLOCK
    assert not failed, run.stdout[-6000:] + run.stderr[-3000:]


@pytest.mark.parametrize("seed", sorted(REGRESSION_SEEDS))
def test_seeds_that_found_bugs_keep_passing(seed):
    run = simulate(f"{seed}-{seed}")
    assert run.returncode == 0, (REGRESSION_SEEDS[seed], run.stdout[-6000:])


def test_a_seed_replays_exactly():
    """The same seed, twice, in two processes: the same event log, line for line."""
    runs = [subprocess.run([sys.executable, "-m", "oncelog.simulation", "--seed", "7", "-v"],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONHASHSEED": "0"}) for _ in range(2)]
    assert runs[0].returncode == 0, runs[0].stdout[-3000:] + runs[0].stderr[-3000:]
    events = [[line for line in run.stdout.splitlines()
               if line[:9].strip()[:1].isdigit() and "seeds per minute" not in line]
              for run in runs]
    assert events[0] == events[1] and len(events[0]) > 10


FORGETFUL = """
import logging
from oncelog.partition.manager import PartitionManager
from oncelog.simulation.cluster import InvariantBroken, Simulation
logging.disable(logging.CRITICAL)

def forgetful(self, listing):  # issue 30's bug: any topic missing from a listing is deleted
    for name, topic in list(self.topics.items()):
        if name not in listing.names:
            self.forget_topic(name, topic.record.created_version)
    return sorted(listing.names - self.topics.keys())

PartitionManager.apply_listing = forgetful
try:
    Simulation(101).run()
except InvariantBroken as error:
    print(error)
"""


def test_the_invariants_catch_the_forgotten_topic_bug():
    """Put issue 30's bug back (a listing read before a topic was created makes the broker
    delete it): the simulation must say so, naming the topic the store still has."""
    run = subprocess.run([sys.executable, "-c", FORGETFUL], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONHASHSEED": "0"})
    assert "broker 2 forgot topic-4" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    assert "which the store still has" in run.stdout


NO_DEDUPLICATION = """
import logging
from oncelog.partition.producer_state import ProducerStateManager
from oncelog.simulation.cluster import InvariantBroken, Simulation
logging.disable(logging.CRITICAL)

# a leader that no longer recognises a retried batch by its producer id and sequence
ProducerStateManager.check = lambda self, header, partition_is_empty=False: None
try:
    Simulation(16).run()
except InvariantBroken as error:
    print(error)
"""


def test_the_invariants_catch_a_retried_batch_written_twice():
    """Switch off the leader's duplicate check for idempotent producers: a batch retried
    after its answer was lost (or its leader paused past the client's timeout) is written
    again, and the simulation must say so."""
    run = subprocess.run([sys.executable, "-c", NO_DEDUPLICATION], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONHASHSEED": "0"})
    assert "an idempotent producer's record is in" in run.stdout, \
        run.stdout[-3000:] + run.stderr[-3000:]
    assert "more than once" in run.stdout and "replay: python -m oncelog.simulation --seed 16" \
        in run.stdout


@pytest.mark.parametrize("seeds, said", [("x-y", "expected FIRST-LAST (whole numbers)"),
                                         ("9-3", "is an empty range")])
def test_a_bad_range_is_one_line_naming_it(seeds, said):
    run = subprocess.run([sys.executable, "-m", "oncelog.simulation", "--seeds", seeds],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert said in run.stderr and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("python -m oncelog.simulation: error:")


IDS = """
import logging
from oncelog.simulation.cluster import Simulation
logging.disable(logging.CRITICAL)
world = Simulation(7).run()
print(sorted({t.record.topic_id for n in world.nodes.values() if n.partitions
              for t in n.partitions.topics.values()}))
"""


def test_a_seed_names_the_same_topic_ids_every_time():
    """Topic ids are drawn from the seed too (they were random UUIDs: a replay could order
    things by a different id)."""
    runs = [subprocess.run([sys.executable, "-c", IDS], capture_output=True, text=True,
                           timeout=120, env={**os.environ, "PYTHONHASHSEED": "0"})
            for _ in range(2)]
    assert runs[0].returncode == 0, runs[0].stderr[-3000:]
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.count("-") >= 4
