"""``oncelog transactions abort``, then ``describe``: with a real transactional producer
(confluent-kafka) whose transaction is left open, against a real broker process."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest
from confluent_kafka import KafkaException

from .test_transactions import create, read, transactional


def cli(*args: str, bootstrap: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oncelog", *args, "-b", bootstrap],
                          capture_output=True, text=True, timeout=90, check=False)


def described_state(bootstrap: str, transactional_id: str) -> dict[str, str]:
    done = cli("transactions", "describe", transactional_id, bootstrap=bootstrap)
    assert done.returncode == 0, done.stderr
    return {name.strip(): value.strip() for name, _, value in
            (line.partition(":") for line in done.stdout.splitlines())}


def test_abort_of_an_ongoing_transaction_ends_it_at_its_coordinator(broker):
    """Regression (issue 29): after `oncelog transactions abort`, `transactions describe`
    still showed the transaction Ongoing. The abort wrote an ABORT marker on the one
    partition named (Kafka's admin abort, meant for a transaction its coordinator lost) and
    the coordinator, which still had the transaction open, was never told: DescribeTransactions
    answered truthfully from its state. Worse, the producer could still commit, so its records
    on the other partition became visible while those on the named one were aborted. Now a
    transaction its coordinator has Ongoing is aborted by the coordinator (InitProducerId as
    a new instance would send it): PrepareAbort on every partition, then CompleteAbort, and the
    producer is fenced."""
    create(broker.bootstrap, "tx-hung", partitions=2)
    producer = transactional(broker.bootstrap, "app-hung")  # kept alive: a hung application
    producer.begin_transaction()
    for partition in (0, 1):
        producer.produce("tx-hung", b"half of a transaction", partition=partition)
    producer.flush(10)
    before = described_state(broker.bootstrap, "app-hung")
    assert before["state"] == "Ongoing" and before["partitions"] == "tx-hung-0, tx-hung-1"

    aborted = cli("transactions", "abort", "--topic", "tx-hung", "--partition", "0",
                  "--start-offset", "0", bootstrap=broker.bootstrap)
    assert aborted.returncode == 0, aborted.stderr
    assert "through its coordinator" in aborted.stdout
    assert "tx-hung-0, tx-hung-1" in aborted.stdout

    after = described_state(broker.bootstrap, "app-hung")
    assert after["state"] == "CompleteAbort" and after["partitions"] == "-"
    assert after["producer"] == before["producer"].replace("epoch 0", "epoch 1")  # fenced
    with pytest.raises(KafkaException) as refused:
        producer.commit_transaction(30)
    assert refused.value.args[0].fatal()  # fenced: nothing of it can be committed any more
    assert read(broker.bootstrap, "tx-hung", "read_committed") == []  # on neither partition
    assert read(broker.bootstrap, "tx-hung", "read_uncommitted") == [b"half of a transaction"] * 2
    listed = cli("transactions", "list", "--state", "Ongoing", bootstrap=broker.bootstrap)
    assert "app-hung" not in listed.stdout


HANGING_PRODUCER = textwrap.dedent("""\
    import sys, time
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "app-lost"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("tx-lost", b"left open", partition=0)
    producer.flush(10)
    print("open", flush=True)
    time.sleep(600)
""")


@pytest.mark.slow
def test_abort_of_a_transaction_its_coordinator_lost_writes_the_marker(broker, tmp_path):
    """A *hanging* transaction: open on a partition while no coordinator knows it (here
    `__transaction_state` was lost with the broker stopped). Only a marker ends it; `abort`
    still writes one there, and read_committed readers move on."""
    create(broker.bootstrap, "tx-lost", partitions=1)
    script = tmp_path / "hanging_producer.py"
    script.write_text(HANGING_PRODUCER)
    hanging = subprocess.Popen([sys.executable, str(script), broker.bootstrap],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert hanging.stdout.readline() == "open\n"
    finally:
        hanging.kill()
        hanging.wait()
    broker.stop()
    for folder in broker.data_dir.glob("__transaction_state-*"):
        shutil.rmtree(folder)
    broker.start()

    lost = cli("transactions", "describe", "app-lost", bootstrap=broker.bootstrap)
    assert lost.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in lost.stderr
    assert read(broker.bootstrap, "tx-lost", "read_committed", 1) == []  # held at the LSO
    aborted = cli("transactions", "abort", "--topic", "tx-lost", "--partition", "0",
                  "--start-offset", "0", bootstrap=broker.bootstrap)
    assert aborted.returncode == 0, aborted.stderr
    assert "hanging transaction on tx-lost-0" in aborted.stdout
    producer = transactional(broker.bootstrap, "app-after")
    producer.begin_transaction()
    producer.produce("tx-lost", b"after", partition=0)
    producer.commit_transaction(30)
    assert read(broker.bootstrap, "tx-lost", "read_committed", 1) == [b"after"]
