"""Consumer groups against a real broker, with real clients and real consumer processes.

The consumer processes (``guarantee_consumer.py``) run ``oncelog.client.consumer``'s presets
and record every record id they process in a file; tests kill them with SIGKILL (or they
kill themselves at a chosen point) and compare exact sets of ids.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import (Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

SETTINGS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
SCRIPT = Path(__file__).with_name("guarantee_consumer.py")
FAST = ["--set", "session.timeout.ms=2000", "--set", "heartbeat.interval.ms=200",
        "--set", "reconnect.backoff.max.ms=500"]


# -- helpers -----------------------------------------------------------------------------------

def create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def produce(bootstrap: str, topic: str, ids: list[str], partitions: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i, record_id in enumerate(ids):
        extra = {"partition": i % partitions} if partitions else {}
        producer.produce(topic, value=record_id.encode(), **extra)
    assert producer.flush(20) == 0


def ids_in(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)])[group].result(15)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def describe(bootstrap: str, group: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(15)


def assignment(bootstrap: str, group: str) -> tuple[str, dict[str, set[int]]]:
    """(state, member id -> assigned partitions) as DescribeGroups reports them."""
    description = describe(bootstrap, group)
    return description.state.name, {
        m.member_id: {tp.partition for tp in m.assignment.topic_partitions}
        for m in description.members}


def wait_until(condition, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def consumers(tmp_path):
    """Start consumer processes; every one still running is killed (by pid) afterwards."""
    started: list[subprocess.Popen] = []

    def start(guarantee: str, bootstrap: str, group: str, topic: str, out: Path,
              *args: str) -> subprocess.Popen:
        log = open(tmp_path / f"{out.stem}.log", "ab")
        process = subprocess.Popen([sys.executable, str(SCRIPT), guarantee, bootstrap, group,
                                    topic, str(out), *args], stdout=log, stderr=log,
                                   stdin=subprocess.DEVNULL)
        log.close()
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


# -- the two guarantees under kill -9 -----------------------------------------------------------

IDS = [f"id-{i:03d}" for i in range(100)]


@pytest.mark.slow
def test_at_least_once_consumer_killed_after_processing_processes_them_again(
        broker_factory, consumers, tmp_path):
    """The at-least-once consumer processes a batch, then commits it. Killed (kill -9) after
    processing id-045 but before its batch was committed, the restarted consumer starts from
    the last commit: it processes id-045 and the rest of that batch again (duplicates) and
    loses nothing."""
    broker = broker_factory(settings=SETTINGS)
    create(broker.bootstrap, "orders", 1)
    produce(broker.bootstrap, "orders", IDS)
    first_out, second_out = tmp_path / "first.txt", tmp_path / "second.txt"

    first = consumers("at_least_once", broker.bootstrap, "billing", "orders", first_out,
                      "--crash-at", "id-045", *FAST)
    assert first.wait(60) == -signal.SIGKILL
    assert ids_in(first_out) == IDS[:46]  # processed in order, through the crash
    restart_from = committed(broker.bootstrap, "billing")[("orders", 0)]
    assert 0 < restart_from <= 45  # earlier batches committed; the crash batch not

    second = consumers("at_least_once", broker.bootstrap, "billing", "orders", second_out,
                       "--stop-at", "id-099", *FAST)
    assert second.wait(60) == 0
    assert ids_in(second_out) == IDS[restart_from:]
    processed = set(ids_in(first_out)) | set(ids_in(second_out))
    assert processed == set(IDS)  # nothing lost
    duplicates = set(ids_in(first_out)) & set(ids_in(second_out))
    assert duplicates == set(IDS[restart_from:46]) and "id-045" in duplicates
    assert committed(broker.bootstrap, "billing")[("orders", 0)] == 100


@pytest.mark.slow
def test_at_most_once_consumer_killed_after_committing_loses_them_and_never_repeats(
        broker_factory, consumers, tmp_path):
    """The at-most-once consumer commits a batch, then processes it. Killed (kill -9) after
    committing the batch holding id-045 but before processing id-045, the restarted consumer
    starts after that batch: id-045 and the rest of its batch are lost, and no id is ever
    processed twice."""
    broker = broker_factory(settings=SETTINGS)
    create(broker.bootstrap, "orders", 1)
    produce(broker.bootstrap, "orders", IDS)
    first_out, second_out = tmp_path / "first.txt", tmp_path / "second.txt"

    first = consumers("at_most_once", broker.bootstrap, "billing", "orders", first_out,
                      "--crash-at", "id-045", *FAST)
    assert first.wait(60) == -signal.SIGKILL
    assert ids_in(first_out) == IDS[:45]  # processed in order, up to the crash
    restart_from = committed(broker.bootstrap, "billing")[("orders", 0)]
    assert 45 < restart_from < 100  # the crash batch was committed before processing

    second = consumers("at_most_once", broker.bootstrap, "billing", "orders", second_out,
                       "--stop-at", "id-099", *FAST)
    assert second.wait(60) == 0
    assert ids_in(second_out) == IDS[restart_from:]
    assert set(ids_in(first_out)) & set(ids_in(second_out)) == set()  # never repeats
    lost = set(IDS) - set(ids_in(first_out)) - set(ids_in(second_out))
    assert lost == set(IDS[45:restart_from]) and "id-045" in lost


# -- a group of three --------------------------------------------------------------------------

@pytest.mark.slow
def test_three_member_group_moves_a_killed_members_partitions_and_consumes_everything(
        broker_factory, consumers, tmp_path):
    """Three at-least-once members share six partitions. One is killed with SIGKILL: within
    its session timeout (2 s) the coordinator drops it and the two others take its
    partitions; every record produced before and after is processed."""
    broker = broker_factory(settings=SETTINGS)
    create(broker.bootstrap, "events", 6)
    outs = [tmp_path / f"member-{i}.txt" for i in range(3)]
    members = [consumers("at_least_once", broker.bootstrap, "fleet", "events", out, *FAST)
               for out in outs]

    def spread(count: int):
        def check():
            state, owned = assignment(broker.bootstrap, "fleet")
            parts = [p for ps in owned.values() for p in ps]
            return (state == "STABLE" and len(owned) == count and sorted(parts) == list(range(6))
                    and all(owned.values()))
        return check

    wait_until(spread(3), 30, "three members sharing six partitions")
    before = [f"a-{i:03d}" for i in range(300)]
    produce(broker.bootstrap, "events", before, partitions=6)
    wait_until(lambda: set(before) <= {i for out in outs for i in ids_in(out)}, 30,
               "the first records to be processed")

    os.kill(members[0].pid, signal.SIGKILL)
    killed_at = time.monotonic()
    wait_until(spread(2), 15, "the two survivors to own all six partitions", interval=0.05)
    moved_after = time.monotonic() - killed_at
    # The session timeout (2 s), then the survivors' next heartbeat (200 ms) and a rejoin;
    # the rest is slack for a loaded machine.
    assert moved_after < 2.0 + 3.0, f"partitions moved {moved_after:.1f} s after the kill"

    after = [f"b-{i:03d}" for i in range(300)]
    produce(broker.bootstrap, "events", after, partitions=6)
    wait_until(lambda: set(before + after) <= {i for out in outs for i in ids_in(out)}, 30,
               "every record to be processed")
    assert {i for out in outs for i in ids_in(out)} == set(before + after)


@pytest.mark.slow
def test_broker_restart_mid_group_keeps_committed_offsets(broker_factory, consumers,
                                                          tmp_path):
    """A group of three consumes and commits; the broker is killed (kill -9) and restarted
    under it. The committed offsets are exactly what they were, the members carry on, and no
    record committed before the restart is processed again."""
    broker = broker_factory(settings=SETTINGS)
    create(broker.bootstrap, "ledger", 4)
    outs = [tmp_path / f"member-{i}.txt" for i in range(3)]
    for out in outs:
        consumers("at_least_once", broker.bootstrap, "books", "ledger", out,
                  "--set", "session.timeout.ms=6000", "--set", "heartbeat.interval.ms=200",
                  "--set", "reconnect.backoff.max.ms=300")
    wait_until(lambda: len(assignment(broker.bootstrap, "books")[1]) == 3
               and assignment(broker.bootstrap, "books")[0] == "STABLE", 30, "a stable group")
    before = [f"a-{i:03d}" for i in range(200)]
    produce(broker.bootstrap, "ledger", before, partitions=4)
    ends = {("ledger", p): 50 for p in range(4)}
    wait_until(lambda: committed(broker.bootstrap, "books") == ends, 30,
               "every record to be committed")

    broker.restart(hard=True)

    assert committed(broker.bootstrap, "books") == ends
    after = [f"b-{i:03d}" for i in range(200)]
    produce(broker.bootstrap, "ledger", after, partitions=4)
    wait_until(lambda: set(before + after) <= {i for out in outs for i in ids_in(out)}, 40,
               "the records produced after the restart")
    counts = collections.Counter(i for out in outs for i in ids_in(out))
    assert {i for i in before if counts[i] != 1} == set()  # committed: never redelivered
    assert set(counts) == set(before + after)
    wait_until(lambda: committed(broker.bootstrap, "books") == {k: 100 for k in ends}, 30,
               "the new records to be committed")


# -- assignors, static membership, clients -----------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_client_side_assignors_split_the_partitions(broker_factory, strategy):
    broker = broker_factory(settings=SETTINGS)
    create(broker.bootstrap, "work", 4)
    produce(broker.bootstrap, "work", [f"w-{i}" for i in range(40)], partitions=4)
    seen: list[set] = [set(), set()]
    stop = threading.Event()

    def member(index: int) -> None:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "split",
                             "partition.assignment.strategy": strategy,
                             "auto.offset.reset": "earliest", "heartbeat.interval.ms": 100,
                             "session.timeout.ms": 3000})
        consumer.subscribe(["work"])
        try:
            while not stop.is_set():
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    seen[index].add(message.value().decode())
                try:  # what was consumed; a commit racing a rebalance fails, and is redone
                    consumer.commit(asynchronous=False)
                except KafkaException:
                    pass
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: (lambda s, o: s == "STABLE" and len(o) == 2 and all(
            len(p) == 2 for p in o.values()))(*assignment(broker.bootstrap, "split")), 30,
            f"two members with two partitions each ({strategy})")
        wait_until(lambda: len(seen[0] | seen[1]) == 40, 30, "every record")
        wait_until(lambda: committed(broker.bootstrap, "split") == {
            ("work", p): 10 for p in range(4)}, 30, "every offset committed")
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert seen[0] | seen[1] == {f"w-{i}" for i in range(40)}


@pytest.mark.slow
def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(broker_factory):
    """KIP-345: a member with group.instance.id that restarts within its session timeout
    takes its old place; the other member is not revoked anything."""
    broker = broker_factory(settings=SETTINGS)
    create(broker.bootstrap, "static", 4)
    revoked: list = []

    def member(instance: str, on_revoke=None) -> Consumer:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "statics",
                             "group.instance.id": instance, "session.timeout.ms": 10000,
                             "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest"})
        kwargs = {"on_revoke": on_revoke} if on_revoke else {}
        consumer.subscribe(["static"], **kwargs)
        return consumer

    steady = member("host-a", on_revoke=lambda c, parts: revoked.append(list(parts)))
    restarting = member("host-b")

    def stable_pair():
        # Stable at the broker and applied by both clients: librdkafka's close() deadlocks
        # when the assignment it must revoke is still waiting in its queue to be applied
        # (close serves the queued assign callback, whose assign() waits on a group thread
        # that is terminating: a CI run hung there for 16 minutes).
        for consumer in (steady, restarting):
            consumer.poll(0.05)
        state, owned = assignment(broker.bootstrap, "statics")
        return (state == "STABLE" and len(owned) == 2
                and all(len(p) == 2 for p in owned.values())
                and all(len(c.assignment()) == 2 for c in (steady, restarting)))

    try:
        wait_until(stable_pair, 30, "two static members with two partitions each")
        kept = {tp.partition for tp in restarting.assignment()}
        revoked.clear()
        restarting.close()  # static members do not leave the group on close
        restarting = member("host-b")
        wait_until(lambda: restarting.poll(0.05) is None and len(restarting.assignment()) == 2,
                   20, "the restarted member's assignment")
        for _ in range(20):
            steady.poll(0.05)
        assert {tp.partition for tp in restarting.assignment()} == kept
        assert revoked == []
        _, owned = assignment(broker.bootstrap, "statics")
        assert len(owned) == 2
    finally:
        steady.close()
        restarting.close()


@pytest.mark.slow
def test_kafka_python_and_aiokafka_consumer_groups_commit_and_resume(broker_factory):
    """kafka-python (JoinGroup v7, OffsetCommit v8) and aiokafka (JoinGroup v5, OffsetCommit
    v3) each consume in a group, commit, and a second consumer of the group resumes there."""
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from kafka import KafkaConsumer

    broker = broker_factory(settings=SETTINGS)
    create(broker.bootstrap, "mixed", 2)
    produce(broker.bootstrap, "mixed", [f"m-{i}" for i in range(20)], partitions=2)

    def kafka_python_read(group: str, expected: int) -> list[str]:
        consumer = KafkaConsumer("mixed", bootstrap_servers=broker.bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 consumer_timeout_ms=10000)
        values = []
        for message in consumer:
            values.append(message.value.decode())
            if len(values) == expected:
                break
        consumer.commit()
        consumer.close()
        return values

    async def aiokafka_read(group: str, expected: int) -> list[str]:
        consumer = AIOKafkaConsumer("mixed", bootstrap_servers=broker.bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        values: list[str] = []
        try:
            deadline = time.monotonic() + 10
            while len(values) < expected and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                values += [m.value.decode() for ms in batches.values() for m in ms]
            await consumer.commit()
        finally:
            await consumer.stop()
        return values

    first = sorted(f"m-{i}" for i in range(20))
    assert sorted(kafka_python_read("kp", 20)) == first
    assert sorted(asyncio.run(aiokafka_read("aio", 20))) == first
    produce(broker.bootstrap, "mixed", ["late-0", "late-1"], partitions=2)
    assert sorted(kafka_python_read("kp", 2)) == ["late-0", "late-1"]
    assert sorted(asyncio.run(aiokafka_read("aio", 2))) == ["late-0", "late-1"]
    assert committed(broker.bootstrap, "kp") == committed(broker.bootstrap, "aio") == {
        ("mixed", 0): 11, ("mixed", 1): 11}


@pytest.mark.slow
def test_auto_commit_commits_what_was_consumed(broker_factory):
    """enable.auto.commit: librdkafka commits consumed positions in the background and on
    close; kafka-python likewise. A second member of the group starts where they stopped."""
    from kafka import KafkaConsumer

    broker = broker_factory(settings=SETTINGS)
    create(broker.bootstrap, "auto", 2)
    produce(broker.bootstrap, "auto", [f"a-{i}" for i in range(20)], partitions=2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "auto-rdkafka",
                         "auto.offset.reset": "earliest", "auto.commit.interval.ms": 100})
    consumer.subscribe(["auto"])
    seen = 0
    try:
        deadline = time.monotonic() + 20
        while seen < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            seen += message is not None and message.error() is None
        assert seen == 20
        wait_until(lambda: (consumer.poll(0.05), committed(broker.bootstrap, "auto-rdkafka"))[1]
                   == {("auto", 0): 10, ("auto", 1): 10}, 10, "the background auto-commit")
    finally:
        consumer.close()

    python_consumer = KafkaConsumer("auto", bootstrap_servers=broker.bootstrap,
                                    group_id="auto-python", auto_offset_reset="earliest",
                                    enable_auto_commit=True, auto_commit_interval_ms=100,
                                    consumer_timeout_ms=10000)
    values = []
    for message in python_consumer:
        values.append(message.value)
        if len(values) == 20:
            break
    python_consumer.close()  # commits on close
    assert committed(broker.bootstrap, "auto-python") == {("auto", 0): 10, ("auto", 1): 10}


# -- storms and bad input ----------------------------------------------------------------------

@pytest.mark.slow
def test_a_rebalance_storm_never_wedges_the_coordinator_or_loses_a_commit(broker_factory):
    """Members join, commit and leave in a loop (some vanish without leaving) while a steady
    member stays. Every commit the broker acknowledged is the one OffsetFetch returns at the
    end, and a new member still gets the whole topic promptly."""
    broker = broker_factory(settings=SETTINGS)
    create(broker.bootstrap, "storm", 4)
    lock = threading.Lock()
    counter = iter(range(1, 1 << 30))
    acknowledged: dict[int, int] = {}
    errors: list[str] = []

    def settings(**extra) -> dict:
        return {"bootstrap.servers": broker.bootstrap, "group.id": "storm",
                "session.timeout.ms": 1500, "heartbeat.interval.ms": 100,
                "enable.auto.commit": False, "auto.offset.reset": "earliest", **extra}

    def commit_assigned(consumer: Consumer) -> None:
        parts = consumer.assignment()
        if not parts:
            return
        with lock:
            offsets = [TopicPartition("storm", tp.partition, next(counter)) for tp in parts]
        try:
            results = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException:
            return  # a rebalance got in the way: not acknowledged, so not expected
        with lock:
            for tp in results:
                if tp.error is None:
                    acknowledged[tp.partition] = max(acknowledged.get(tp.partition, 0),
                                                     tp.offset)

    def churn(name: str, cycles: int) -> None:
        try:
            for cycle in range(cycles):
                # Every third member is static: static members send no LeaveGroup on close,
                # so they vanish and their session timeout must clean up after them.
                static = {"group.instance.id": f"{name}-{cycle}"} if cycle % 3 == 2 else {}
                consumer = Consumer(settings(**static))
                consumer.subscribe(["storm"])
                deadline = time.monotonic() + 10
                while not consumer.assignment() and time.monotonic() < deadline:
                    consumer.poll(0.05)
                commit_assigned(consumer)
                consumer.close()
        except Exception as error:  # surfaced below
            errors.append(repr(error))

    steady = Consumer(settings())
    steady.subscribe(["storm"])
    threads = [threading.Thread(target=churn, args=(f"churner-{i}", 8)) for i in range(3)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        steady.poll(0.05)
        commit_assigned(steady)
    for thread in threads:
        thread.join()
    assert errors == []
    wait_until(lambda: (steady.poll(0.05), len(steady.assignment()) == 4)[1], 20,
               "the steady member to own every partition again")
    commit_assigned(steady)
    steady.close()
    final = committed(broker.bootstrap, "storm")
    assert {p: final[("storm", p)] for p in acknowledged} == acknowledged

    newcomer = Consumer(settings())
    newcomer.subscribe(["storm"])
    started = time.monotonic()
    try:
        wait_until(lambda: (newcomer.poll(0.05), len(newcomer.assignment()) == 4)[1], 10,
                   "a new member to get the whole topic")
    finally:
        newcomer.close()
    assert time.monotonic() - started < 10
    assert "unexpected error" not in broker.log_path.read_text()


def test_group_protocol_errors_and_traps_on_the_wire(broker_factory):
    """Exact requests, exact error codes: MEMBER_ID_REQUIRED, stale generations, unknown
    members, oversized metadata, metadata round-trips, OffsetFetch of all partitions (null
    topics), DescribeGroups with live members, and deletion rules."""
    from oncelog.protocol import messages as m
    from oncelog.protocol.errors import ErrorCode as E

    from .raw import RawConnection

    broker = broker_factory(settings=SETTINGS)
    create(broker.bootstrap, "wire", 2)
    J, C, F = m.JoinGroupRequest, m.OffsetCommitRequest, m.OffsetFetchRequest
    protocols = [J.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00")]

    def join(raw, member_id="", session=10000):
        return raw.request(J(group_id="wire-app", session_timeout_ms=session,
                             rebalance_timeout_ms=10000, member_id=member_id,
                             group_instance_id=None, protocol_type="consumer",
                             protocols=protocols), 5)

    def commit(raw, member_id, generation, *offsets):
        T = C.OffsetCommitRequestTopic
        return {(p.partition_index): p.error_code for p in raw.request(C(
            group_id="wire-app", generation_id_or_member_epoch=generation, member_id=member_id,
            group_instance_id=None, topics=[T(name="wire", partitions=[
                T.OffsetCommitRequestPartition(partition_index=i, committed_offset=o,
                                               committed_leader_epoch=-1, committed_metadata=md)
                for i, o, md in offsets])]), 8).topics[0].partitions}

    with RawConnection(broker.bootstrap) as raw:
        found = raw.request(m.FindCoordinatorRequest(key="wire-app"), 0)
        assert (found.error_code, found.node_id, found.port) == (E.NONE, 1, broker.port)
        found = raw.request(m.FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), 4)
        assert [(c.key, c.error_code) for c in found.coordinators] == [("a", 0), ("b", 0)]
        transactional = raw.request(m.FindCoordinatorRequest(key="t", key_type=1), 2)
        assert (transactional.error_code, transactional.node_id) == (E.NONE, 1)
        assert raw.request(m.FindCoordinatorRequest(key="t", key_type=2), 2).error_code == \
            E.INVALID_REQUEST

        assert join(raw, session=500).error_code == E.INVALID_SESSION_TIMEOUT
        first = join(raw)
        assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
        member = first.member_id
        joined = join(raw, member)
        assert (joined.error_code, joined.generation_id, joined.leader) == (E.NONE, 1, member)
        assert [x.member_id for x in joined.members] == [member]
        synced = raw.request(m.SyncGroupRequest(
            group_id="wire-app", generation_id=1, member_id=member, group_instance_id=None,
            assignments=[m.SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=member, assignment=b"\x00\x01")]), 3)
        assert (synced.error_code, bytes(synced.assignment)) == (E.NONE, b"\x00\x01")

        assert commit(raw, member, 1, (0, 7, "x" * 4097), (1, 9, "batch 9 \u00e9")) == {
            0: E.OFFSET_METADATA_TOO_LARGE, 1: E.NONE}
        assert commit(raw, member, 0, (0, 1, None)) == {0: E.ILLEGAL_GENERATION}
        assert commit(raw, "intruder", 1, (0, 1, None)) == {0: E.UNKNOWN_MEMBER_ID}
        assert commit(raw, "", -1, (0, 1, None)) == {0: E.UNKNOWN_MEMBER_ID}  # group active
        heartbeat = raw.request(m.HeartbeatRequest(group_id="wire-app", generation_id=1,
                                                   member_id=member), 3)
        assert heartbeat.error_code == E.NONE

        everything = raw.request(F(group_id="wire-app", topics=None), 7)
        assert everything.error_code == E.NONE
        assert [(t.name, p.partition_index, p.committed_offset, p.metadata)
                for t in everything.topics for p in t.partitions] == [
            ("wire", 1, 9, "batch 9 \u00e9")]
        G = F.OffsetFetchRequestGroup
        grouped = raw.request(F(groups=[G(group_id="wire-app", topics=None),
                                        G(group_id="nobody", topics=None)]), 8)
        assert [(g.group_id, [(t.name, [p.committed_offset for p in t.partitions])
                              for t in g.topics]) for g in grouped.groups] == [
            ("wire-app", [("wire", [9])]), ("nobody", [])]

        described = raw.request(m.DescribeGroupsRequest(groups=["wire-app", "nobody"]), 5)
        app, nobody = described.groups
        assert (app.group_state, app.protocol_data) == ("Stable", "range")
        assert [(x.member_id, bytes(x.member_assignment), x.client_host)
                for x in app.members] == [(member, b"\x00\x01", "/127.0.0.1")]
        assert (nobody.error_code, nobody.group_state) == (E.NONE, "Dead")
        assert raw.request(m.DescribeGroupsRequest(groups=["nobody"]), 6).groups[0] \
            .error_code == E.GROUP_ID_NOT_FOUND

        deleted = raw.request(m.DeleteGroupsRequest(groups_names=["wire-app", "nobody"]), 2)
        assert {r.group_id: r.error_code for r in deleted.results} == {
            "wire-app": E.NON_EMPTY_GROUP, "nobody": E.GROUP_ID_NOT_FOUND}
        left = raw.request(m.LeaveGroupRequest(group_id="wire-app", members=[
            m.LeaveGroupRequest.MemberIdentity(member_id=member)]), 3)
        assert [(x.member_id, x.error_code) for x in left.members] == [(member, E.NONE)]
        listed = raw.request(m.ListGroupsRequest(states_filter=["Empty"]), 4)
        assert [(g.group_id, g.group_state) for g in listed.groups] == [("wire-app", "Empty")]
        deleted = raw.request(m.DeleteGroupsRequest(groups_names=["wire-app"]), 0)
        assert deleted.results[0].error_code == E.NONE
        after = raw.request(F(group_id="wire-app", topics=[F.OffsetFetchRequestTopic(
            name="wire", partition_indexes=[1])]), 1)
        assert after.topics[0].partitions[0].committed_offset == -1


@pytest.mark.slow
def test_consumer_offsets_is_compacted_and_offsets_reload_from_it(broker_factory):
    """Hundreds of commits of the same two partitions fill small __consumer_offsets segments;
    compaction keeps one record per key in the sealed ones (clients read the compacted
    topic, empty batches included), and a restarted broker rebuilds the same offsets."""
    from oncelog.client.reader import read_topic

    broker = broker_factory(settings={
        **SETTINGS, "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "2048",
        "log.retention.check.interval.ms": "100"})
    create(broker.bootstrap, "compacted", 2)
    committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "compactor",
                          "enable.auto.commit": False})
    try:
        for i in range(1, 201):  # no subscription: generation -1 commits to an empty group
            committer.commit(offsets=[TopicPartition("compacted", 0, i),
                                      TopicPartition("compacted", 1, 1000 + i)],
                             asynchronous=False)
    finally:
        committer.close()
    # 200 commit batches of two records each; compaction runs every 100 ms.
    records = wait_until(lambda: (lambda r: r if len(r) < 100 else None)(
        list(read_topic(broker.bootstrap, "__consumer_offsets"))), 20, "compaction")
    assert "oncelog.storage.cleaner" in broker.log_path.read_text()
    assert records[-1].offset >= 399  # offsets unchanged: the log end is where it was
    broker.restart()
    assert committed(broker.bootstrap, "compactor") == {("compacted", 0): 200,
                                                        ("compacted", 1): 1200}


def test_a_preset_consumer_fenced_by_its_own_instance_id_stops_instead_of_polling_on(
        broker_factory):
    """The verifier's at-least-once consumer on a cluster (seed 31, issue 12's CI run) was
    fenced as a static member after a coordinator failover; librdkafka reported it as a
    ``_FATAL`` consumer event, whose ``fatal()`` is false, so the preset logged it and polled
    on for ever with nothing to read - never exiting, so never restarted. A fatal event now
    ends ``run()`` with the error."""
    from oncelog.client.consumer import at_least_once
    broker = broker_factory(settings=SETTINGS)
    create(broker.bootstrap, "fenced", 1)
    produce(broker.bootstrap, "fenced", [f"id-{i}" for i in range(5)])
    config = {"group.instance.id": "worker-1", "session.timeout.ms": 6000}
    first = at_least_once(broker.bootstrap, "static-app", ["fenced"], lambda record: None,
                          config=config)
    outcome: list = []

    def run_first() -> None:
        try:
            outcome.append(first.run(idle_timeout_s=30))
        except KafkaException as error:
            outcome.append(error)
    thread = threading.Thread(target=run_first)
    thread.start()
    time.sleep(3)  # the first member joined and consumed
    second = at_least_once(broker.bootstrap, "static-app", ["fenced"], lambda record: None,
                           config=config)
    second_thread = threading.Thread(target=lambda: second.run(idle_timeout_s=4))
    second_thread.start()
    thread.join(25)
    second_thread.join(25)
    assert not thread.is_alive(), "the fenced consumer is still polling"
    assert isinstance(outcome[0], KafkaException) and "fenced" in str(outcome[0]).lower()
