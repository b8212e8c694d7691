"""``cluster.control``'s network requests: the files ``cluster partition ...`` writes, and the
owner's answer to each, applied to a stand-in for the ``LocalCluster`` (its own tests run the
real network: tests/cluster/test_cluster_cli_partitions.py)."""

from __future__ import annotations

import os

from oncelog.cluster import control
from oncelog.cluster.isolation import Fault

NODES = ["zookeeper-1", "broker-1", "broker-2", "broker-3"]


class FakeNetwork:
    nodes = NODES


class FakeCluster:
    """Records what it was asked; captions as the real network words them."""

    def __init__(self, isolated: bool = True) -> None:
        self.network = FakeNetwork() if isolated else None
        self.applied: list[Fault] = []

    def _add(self, kind: str, caption: str) -> Fault:
        fault = Fault(kind, caption)
        self.applied.append(fault)
        return fault

    def isolate(self, node):
        return self._add("isolate", f"isolate {node}")

    def split(self, side_a, side_b):
        return self._add("split", f"split {{{', '.join(side_a)}}} | {{{', '.join(side_b)}}}")

    def cut(self, a, b):
        if a == b:
            raise ValueError(f"{a} to itself: name two different nodes")
        return self._add("cut", f"cut {a} -> {b}")

    def cut_from_zookeeper(self, broker):
        return self._add("cut_from", f"cut {broker} from {{zookeeper-1}}")

    def slow(self, a, b=None, delay_ms=0, jitter_ms=0, loss_percent=0):
        return self._add("slow", f"slow {a} <-> {b}: {delay_ms:g}±{jitter_ms:g} ms")

    def heal(self, fault=None):
        self.applied.clear()

    def faults(self):
        return list(self.applied)


def test_a_cluster_without_a_network_answers_that_it_was_not_isolated():
    answer = control.answer_network_request(FakeCluster(isolated=False),
                                            {"action": "isolate", "node": "1"})
    assert answer == {"error": "this cluster was not started with --isolated"}


def test_a_broker_id_names_the_broker_and_list_and_heal_report_the_faults():
    cluster = FakeCluster()
    assert control.answer_network_request(cluster, {"action": "isolate", "node": "2"}) == {
        "caption": "isolate broker-2", "faults": ["isolate broker-2"]}
    answer = control.answer_network_request(
        cluster, {"action": "slow", "node": "1", "to": "zookeeper-1", "delay_ms": 50,
                  "jitter_ms": 10, "loss_percent": 0})
    assert answer["caption"] == "slow broker-1 <-> zookeeper-1: 50±10 ms"
    assert control.answer_network_request(cluster, {"action": "list"}) == {
        "faults": ["isolate broker-2", "slow broker-1 <-> zookeeper-1: 50±10 ms"]}
    assert control.answer_network_request(cluster, {"action": "heal"}) == {
        "healed": ["isolate broker-2", "slow broker-1 <-> zookeeper-1: 50±10 ms"],
        "faults": []}


def test_bad_requests_are_one_sentence_and_apply_nothing():
    cluster = FakeCluster()

    def error(action: dict) -> str:
        answer = control.answer_network_request(cluster, action)
        assert list(answer) == ["error"] and "\n" not in answer["error"]
        return answer["error"]

    assert error({"action": "isolate", "node": "7"}) == (
        "this cluster has no node 7 (its nodes: zookeeper-1, broker-1, broker-2, broker-3; "
        "a number is a broker id)")
    assert error({"action": "split", "sides": [["1", "2"], ["broker-1", "3"]]}) == (
        "broker-1 on both sides of the split: name each node on one side only")
    assert error({"action": "cut_from_zookeeper", "broker": "zookeeper-1"}) == (
        "zookeeper-1 is not a broker: only a broker is cut from ZooKeeper")
    assert error({"action": "cut", "from": "2", "to": "broker-2"}) == (
        "broker-2 to itself: name two different nodes")
    assert error({"action": "isolate"}) == "the isolate request lacks 'node'"
    assert error({"action": "reboot"}).startswith("unknown network request 'reboot'")
    assert cluster.applied == []


def test_a_request_file_is_read_whole_and_answered_beside_it(tmp_path):
    request = control.ask_network(tmp_path, {"action": "isolate", "node": "broker-2"})
    assert [p.name for p in tmp_path.iterdir()] == [request.path.name]
    [pending] = control.pending_network_requests(tmp_path)
    assert pending.action == {"action": "isolate", "node": "broker-2"}
    assert control.pending_requests(tmp_path) == []  # not a restart request
    pending.answer({"caption": "isolate broker-2"})
    assert control.wait_for_answer(request, os.getpid(), 5) == {"caption": "isolate broker-2"}
    assert list(tmp_path.iterdir()) == []
