"""``oncelog groups`` and ``oncelog consume --group``, run as a user would, against a real
broker process."""

from __future__ import annotations

import time
from datetime import datetime

from confluent_kafka import Consumer

from .test_cli import oncelog
from .test_groups import SETTINGS, create, produce, wait_until


def lines(*args: str) -> list[str]:
    return oncelog(*args).stdout.splitlines()


def values(out: list[str]) -> list[str]:
    return sorted(line.split("\t")[-1] for line in out)  # the value is the last field


def test_consume_in_a_group_then_list_describe_reset_and_delete(broker_factory):
    broker = broker_factory(settings=SETTINGS)
    b = ["--bootstrap", broker.bootstrap]
    create(broker.bootstrap, "clicks", 2)
    produce(broker.bootstrap, "clicks", [f"c{i}" for i in range(10)], partitions=2)

    first = lines("consume", "clicks", "--group", "app", "-c", "4", *b)
    rest = lines("consume", "clicks", "--group", "app", *b)
    assert len(first) == 4 and len(rest) == 6
    assert values(first + rest) == sorted(f"c{i}" for i in range(10))  # resumed, no repeats
    assert lines("consume", "clicks", "--group", "app", *b) == []

    assert "app\tEmpty" in lines("groups", "list", *b)
    described = lines("groups", "describe", "app", *b)
    assert described[0].startswith("group app: Empty") and "0 members" in described[0]
    assert "clicks\t0\t5\t5\t0\t-\t" in described and "clicks\t1\t5\t5\t0\t-\t" in described

    moment = datetime.now().isoformat(timespec="milliseconds")
    time.sleep(0.05)
    produce(broker.bootstrap, "clicks", ["late0", "late1"], partitions=2)
    described = lines("groups", "describe", "app", *b)
    assert "clicks\t0\t5\t6\t1\t-\t" in described  # lag: one new record per partition

    assert lines("groups", "reset-offsets", "app", "--topic", "clicks", "--to-datetime",
                 moment, *b)[1:] == ["clicks\t0\t5", "clicks\t1\t5"]
    assert values(lines("consume", "clicks", "--group", "app", *b)) == ["late0", "late1"]
    lines("groups", "reset-offsets", "app", "--topic", "clicks", "--to-offset", "4", *b)
    assert len(lines("consume", "clicks", "--group", "app", *b)) == 4
    dry = lines("groups", "reset-offsets", "app", "-t", "clicks", "--to-earliest",
                "--dry-run", *b)
    assert dry[1:] == ["clicks\t0\t0", "clicks\t1\t0"]
    assert lines("consume", "clicks", "--group", "app", *b) == []  # nothing was committed
    lines("groups", "reset-offsets", "app", "-t", "clicks", "--to-earliest", *b)
    assert len(lines("consume", "clicks", "--group", "app", *b)) == 12
    lines("groups", "reset-offsets", "app", "-t", "clicks", "--to-latest", *b)
    assert lines("consume", "clicks", "--group", "app", *b) == []

    assert lines("groups", "delete", "app", *b) == ["deleted group app"]
    assert "app\tEmpty" not in lines("groups", "list", *b)
    again = oncelog("groups", "delete", "app", *b, check=False)
    assert again.returncode == 1 and again.stderr.count("\n") == 1
    assert "cannot delete group app" in again.stderr and "Traceback" not in again.stderr


def test_describe_shows_live_members_and_reset_refuses_an_active_group(broker_factory):
    broker = broker_factory(settings=SETTINGS)
    b = ["--bootstrap", broker.bootstrap]
    create(broker.bootstrap, "views", 2)
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "live",
                       "client.id": "viewer", "auto.offset.reset": "earliest"})
    member.subscribe(["views"])
    try:
        wait_until(lambda: (member.poll(0.1), len(member.assignment()) == 2)[1], 20,
                   "the member's assignment")
        described = lines("groups", "describe", "live", *b)
        assert described[0] == "group live: Stable, assignor range, 1 members"
        assert described[2].split("\t")[1:] == ["viewer", "/127.0.0.1", "-",
                                                 "views-0, views-1"]
        refused = oncelog("groups", "reset-offsets", "live", "-t", "views", "--to-earliest",
                          *b, check=False)
        assert refused.returncode == 1 and refused.stderr.count("\n") == 1
        assert "stop its consumers first" in refused.stderr
        busy = oncelog("groups", "delete", "live", *b, check=False)
        assert busy.returncode == 1 and "not empty" in busy.stderr.lower()
    finally:
        member.close()


def test_group_command_mistakes_are_one_sentence(broker):
    b = ["--bootstrap", broker.bootstrap]
    for args in (["groups", "describe", "ghost"],
                 ["groups", "reset-offsets", "g", "-t", "nope", "--to-latest"],
                 ["groups", "reset-offsets", "g", "-t", "x"],
                 ["groups", "reset-offsets", "g", "-t", "x", "--to-datetime", "yesterday"],
                 ["consume", "x", "--group", "g", "--from", "5"]):
        result = oncelog(*args, *b, check=False)
        assert result.returncode != 0, args
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, (
            args, result.stderr)
