"""History persistence: JSON Lines written by one writer per process, merged on load, and
robust to the way processes die in a fault test (kill -9 in the middle of a line)."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import count

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from oncelog.verify.history import (Acknowledged, Delivered, Failed, FaultEvent, History,
                                    HistoryError, HistoryWriter, Produced, decode_value,
                                    encode_value, make_id, record_from_dict, record_to_dict)


def ticking(start: float = 0.0, step: float = 1.0):
    clock = count()
    return lambda: start + step * next(clock)


def every_kind() -> list:
    return [Produced("p0-000000", "p0", 0, None, 1.0),
            Produced("p0-000001", "p0", 1, 2, 1.5),
            Acknowledged("p0-000000", "verify", 0, 41, 2.0),
            Acknowledged("p0-000001", "verify", 2, None, 2.5),     # acks=0: no offset
            Failed("p0-000002", "MSG_TIMED_OUT", 3.0),
            Delivered("p0-000000", "verify", 0, 41, 0, 4.0),
            FaultEvent("drop-acks", "inject", 5.0, {"rate": 0.5, "seed": 7}),
            FaultEvent("kill-broker", "execute", 6.0)]


def test_record_ids_and_values():
    assert make_id("p0", 123) == "p0-000123"
    assert make_id("p12", 1234567) == "p12-1234567"
    value = encode_value("p0-000123", 200)
    assert len(value) == 200 and decode_value(value) == "p0-000123"
    assert decode_value(value.decode()) == "p0-000123"
    assert decode_value(encode_value("p0-000001")) == "p0-000001"   # no padding asked
    assert json.loads(encode_value("p0-000001", 5)) == {"id": "p0-000001", "pad": ""}


@pytest.mark.parametrize("value", [b"", b"hello", b"\xff\xfe", b"[1, 2]", b'{"id": 7}',
                                   b'{"other": "p0-000001"}', None])
def test_decode_value_rejects_what_no_workload_wrote(value):
    with pytest.raises(ValueError, match="not a verifier record value"):
        decode_value(value)


def test_every_record_kind_round_trips_through_a_file(tmp_path):
    with HistoryWriter(tmp_path / "run.jsonl") as writer:
        for record in every_kind():
            writer.append(record)
    loaded = History.load(tmp_path / "run.jsonl")
    assert loaded.records == every_kind() and loaded.torn_lines == 0
    assert [type(r) for r in loaded.produced] == [Produced, Produced]
    assert len(loaded.acknowledged) == 2 and len(loaded.failed) == 1
    assert len(loaded.delivered) == 1 and len(loaded.faults) == 2


def test_save_and_load(tmp_path):
    History(every_kind()).save(tmp_path / "saved.jsonl")
    assert History.load(tmp_path / "saved.jsonl") == History(every_kind())


def test_writer_convenience_methods_stamp_the_injected_clock(tmp_path):
    with HistoryWriter(tmp_path / "p0.jsonl", clock=ticking(100.0)) as writer:
        writer.produced("p0-000000", "p0", 0)
        writer.acknowledged("p0-000000", "verify", 1, 5)
        writer.failed("p0-000001", "NOT_LEADER_OR_FOLLOWER")
        writer.delivered("p0-000000", "verify", 1, 5, position=0)
        writer.fault("kill-consumer", "inject", pid=99)
    assert History.load(tmp_path / "p0.jsonl").records == [
        Produced("p0-000000", "p0", 0, None, 100.0),
        Acknowledged("p0-000000", "verify", 1, 5, 101.0),
        Failed("p0-000001", "NOT_LEADER_OR_FOLLOWER", 102.0),
        Delivered("p0-000000", "verify", 1, 5, 0, 103.0),
        FaultEvent("kill-consumer", "inject", 104.0, {"pid": 99})]


def test_files_from_several_writers_merge_in_time_order(tmp_path):
    producer = HistoryWriter(tmp_path / "producer.jsonl", clock=ticking(0.0, 2.0))
    consumer = HistoryWriter(tmp_path / "consumer.jsonl", clock=ticking(1.0, 2.0))
    nemesis = HistoryWriter(tmp_path / "nemesis.jsonl", clock=ticking(2.5, 100.0))
    for seq in range(3):
        producer.produced(make_id("p0", seq), "p0", seq)
        consumer.delivered(make_id("p0", seq), "verify", 0, seq, seq)
    nemesis.fault("kill-broker", "execute")
    for writer in (producer, consumer, nemesis):
        writer.close()
    merged = History.load(tmp_path / "producer.jsonl", tmp_path / "consumer.jsonl",
                          tmp_path / "nemesis.jsonl")
    assert [record.time for record in merged] == [0.0, 1.0, 2.0, 2.5, 3.0, 4.0, 5.0]
    assert [type(record).__name__ for record in merged] == [
        "Produced", "Delivered", "Produced", "FaultEvent", "Delivered", "Produced", "Delivered"]
    assert History.load(tmp_path) == merged          # a directory means its *.jsonl files


def test_writers_in_separate_processes(tmp_path):
    """Two real processes append to their own files at the same time; the merge holds all."""
    script = ("import sys\nfrom oncelog.verify.history import HistoryWriter, make_id\n"
              "name = sys.argv[1]\n"
              "with HistoryWriter(sys.argv[2]) as w:\n"
              "    for seq in range(200):\n"
              "        w.produced(make_id(name, seq), name, seq)\n")
    processes = [subprocess.Popen([sys.executable, "-c", script, name, tmp_path / f"{name}.jsonl"])
                 for name in ("p0", "p1")]
    for process in processes:
        assert process.wait(timeout=30) == 0
    history = History.load(tmp_path)
    assert sorted(r.id for r in history.produced) == sorted(
        make_id(name, seq) for name in ("p0", "p1") for seq in range(200))


def test_a_torn_last_line_is_skipped_and_counted(tmp_path):
    path = tmp_path / "killed.jsonl"
    with HistoryWriter(path) as writer:
        for record in every_kind()[:3]:
            writer.append(record)
    whole = path.read_bytes()
    line = json.dumps(record_to_dict(every_kind()[3])).encode()
    path.write_bytes(whole + line[:17])            # killed 17 bytes into the next line
    history = History.load(path)
    assert history.records == every_kind()[:3] and history.torn_lines == 1


def test_a_last_line_missing_only_its_newline_is_whole(tmp_path):
    path = tmp_path / "killed.jsonl"
    History(every_kind()[:2]).save(path)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    history = History.load(path)
    assert history.records == every_kind()[:2] and history.torn_lines == 0


def test_a_bad_line_before_the_end_is_corruption(tmp_path):
    path = tmp_path / "bad.jsonl"
    History(every_kind()[:1]).save(path)
    with open(path, "ab") as file:
        file.write(b'{"type": "produced", "id": \n')
        file.write(json.dumps(record_to_dict(every_kind()[1])).encode() + b"\n")
    with pytest.raises(HistoryError, match=r"bad\.jsonl:2: unreadable history line"):
        History.load(path)


@pytest.mark.parametrize("line", [b'{"type": "teleported", "id": "p0-000000"}',
                                  b'{"type": "produced", "id": "p0-000000"}', b"[1, 2]"])
def test_well_formed_json_that_is_no_record_is_corruption(tmp_path, line):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(line + b"\n")
    with pytest.raises(HistoryError):
        History.load(path)


def test_a_writer_reopening_a_torn_file_cuts_the_torn_line_off(tmp_path):
    """A consumer killed mid-line is restarted and appends to the same file: its first new
    record must not be glued to the torn one (which would be corruption mid-file)."""
    path = tmp_path / "consumer.jsonl"
    History(every_kind()[:2]).save(path)
    with open(path, "ab") as file:
        file.write(b'{"type":"delivered","id":"p0-0')
    with HistoryWriter(path) as writer:
        writer.append(every_kind()[5])
    history = History.load(path)
    assert history.records == every_kind()[:2] + [every_kind()[5]]
    assert history.torn_lines == 0


def test_a_writer_reopening_a_file_missing_its_last_newline_keeps_that_record(tmp_path):
    path = tmp_path / "consumer.jsonl"
    History(every_kind()[:2]).save(path)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    with HistoryWriter(path) as writer:
        writer.append(every_kind()[5])
    assert History.load(path).records == every_kind()[:2] + [every_kind()[5]]


def test_unknown_record_type_is_refused():
    with pytest.raises(HistoryError, match="unknown history record type 'teleported'"):
        record_from_dict({"type": "teleported"})


ids = st.from_regex(r"[a-z][0-9]{1,2}-[0-9]{6}", fullmatch=True)
times = st.floats(min_value=0, max_value=2e9, allow_nan=False)
small = st.integers(0, 2**31 - 1)
records = st.one_of(
    st.builds(Produced, ids, st.sampled_from(["p0", "p1"]), small, st.none() | small, times),
    st.builds(Acknowledged, ids, st.text(max_size=8), small, st.none() | small, times),
    st.builds(Failed, ids, st.text(max_size=20), times),
    st.builds(Delivered, ids, st.text(max_size=8), small, st.none() | small, small, times),
    st.builds(FaultEvent, st.sampled_from(["kill-broker", "drop-acks"]),
              st.sampled_from(["inject", "heal", "execute"]), times,
              st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5),
                              max_size=3)))


@settings(max_examples=50, deadline=None)
@given(st.lists(records, max_size=20))
def test_any_records_round_trip(tmp_path_factory, drawn):
    path = tmp_path_factory.mktemp("history") / "run.jsonl"
    with HistoryWriter(path) as writer:
        for record in drawn:
            writer.append(record)
    assert History.load(path).records == sorted(drawn, key=lambda record: record.time)
