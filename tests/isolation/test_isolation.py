"""The network-partition layer on real namespaces (issue 31, part 1): every fault is observed
from real sockets - TCP connections to an echo server started inside a node's namespace with
``exec_prefix``, UDP datagrams between namespaces - applied, then healed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from oncelog.cluster.isolation import (IsolatedNetwork, IsolationError, IsolationUnavailable,
                                       remove_isolated_networks)

from .conftest import (leftovers, open_connection, reaches, round_trip_ms, udp_delivered,
                       unique_names)


def test_create_gives_each_node_a_namespace_that_clients_and_nodes_reach(network, echo_servers):
    assert network.nodes == ["a", "b", "c"]
    base = network.bridge_address.rsplit(".", 1)[0]
    assert network.bridge_address.endswith(".1")
    assert [network.address(node) for node in network.nodes] == [f"{base}.{i}" for i in (2, 3, 4)]
    inside = subprocess.run([*network.exec_prefix("a"), "ip", "-4", "-o", "addr", "show"],
                            capture_output=True, text=True, check=True).stdout
    assert f"{network.address('a')}/24" in inside and network.address("b") not in inside
    routes = subprocess.run([*network.exec_prefix("a"), "ip", "route"], capture_output=True,
                            text=True, check=True).stdout
    assert f"default via {network.bridge_address}" in routes

    echo_servers(network, "a")
    sock, peer = open_connection(network, "a")  # from the root namespace
    with sock:
        assert peer == network.bridge_address
        assert round_trip_ms(sock, b"hello") < 100
    for node in ("b", "c"):
        sock, peer = open_connection(network, "a", from_node=node)
        sock.close()
        assert peer == network.address(node)


def test_isolate_cuts_a_node_from_everything_until_healed(network, echo_servers):
    echo_servers(network, "a")
    echo_servers(network, "b")
    fault = network.isolate("a")
    assert network.faults() == [fault] and str(fault) == "isolate a"
    assert not reaches(network, "a")  # clients
    assert not reaches(network, "a", from_node="b")
    assert not reaches(network, "b", from_node="a")
    assert reaches(network, "b") and reaches(network, "b", from_node="c")

    network.heal()
    assert network.faults() == []
    assert reaches(network, "a") and reaches(network, "a", from_node="b")
    assert reaches(network, "b", from_node="a")


def test_split_separates_two_groups_both_ways_and_clients_reach_all(network, echo_servers):
    for node in network.nodes:
        echo_servers(network, node)
    fault = network.split(["a"], ["b", "c"])
    assert str(fault) == "split {a} | {b, c}"
    for one, other in (("a", "b"), ("b", "a"), ("a", "c"), ("c", "a")):
        assert not reaches(network, other, from_node=one), f"{one} -> {other}"
    assert reaches(network, "c", from_node="b") and reaches(network, "b", from_node="c")
    assert all(reaches(network, node) for node in network.nodes)

    network.heal()
    assert reaches(network, "b", from_node="a") and reaches(network, "a", from_node="c")


def test_cut_is_directed(network, echo_servers):
    """a's packets to b are dropped, b's to a delivered: a cannot connect to b; b's SYN
    reaches a but the SYN-ACK does not come back, so b cannot connect either; a UDP datagram
    from b arrives, one from a does not."""
    echo_servers(network, "a")
    echo_servers(network, "b")
    fault = network.cut("a", "b")
    assert str(fault) == "cut a -> b"
    assert not reaches(network, "b", from_node="a")
    assert not reaches(network, "a", from_node="b")
    assert udp_delivered(network, "b", "a", 20) == 20
    assert udp_delivered(network, "a", "b", 20) == 0
    assert reaches(network, "a") and reaches(network, "b")
    assert reaches(network, "b", from_node="c") and reaches(network, "a", from_node="c")

    network.heal()
    assert reaches(network, "b", from_node="a") and udp_delivered(network, "a", "b", 20) == 20


def test_cut_from_and_healing_one_fault_of_two(network, echo_servers):
    for node in network.nodes:
        echo_servers(network, node)
    leader_cut = network.cut_from("a", ["b"])
    isolated = network.isolate("c")
    assert [str(fault) for fault in network.faults()] == ["cut a from {b}", "isolate c"]
    assert not reaches(network, "b", from_node="a") and not reaches(network, "a", from_node="b")
    assert reaches(network, "a") and reaches(network, "b")
    assert not reaches(network, "c")

    network.heal(isolated)
    assert network.faults() == [leader_cut]
    assert reaches(network, "c", from_node="a") and reaches(network, "a", from_node="c")
    assert not reaches(network, "b", from_node="a")
    network.heal(leader_cut)
    assert reaches(network, "b", from_node="a")


def test_slow_delays_each_chunk_both_ways_keeps_order_and_heals(network, echo_servers):
    echo_servers(network, "b")
    before, _ = open_connection(network, "b", from_node="a")
    baseline_ms = min(round_trip_ms(before) for _ in range(5))
    assert baseline_ms < 80

    fault = network.slow("a", "b", delay_ms=100, jitter_ms=20)
    assert str(fault) == "slow a <-> b: 100±20 ms"
    slowed, peer = open_connection(network, "b", from_node="a", timeout_s=5)
    assert peer == network.address("a")  # the relay connects from a's own address
    trips_ms = [round_trip_ms(slowed) for _ in range(5)]
    print(f"round trips a -> b: before {baseline_ms:.1f} ms, slowed 100±20 ms each way: "
          + ", ".join(f"{trip:.0f}" for trip in trips_ms) + " ms")
    assert min(trips_ms) >= 2 * (100 - 20)  # delayed once each way
    payload = b"".join(b"%06d\n" % number for number in range(20000))  # 140 kB, many chunks
    slowed.settimeout(10)
    assert round_trip_ms(slowed, payload) >= 100  # order checked by the byte comparison
    assert round_trip_ms(before) < 80  # a connection opened before keeps its direct path
    c_to_b, _ = open_connection(network, "b", from_node="c")
    with c_to_b:
        assert round_trip_ms(c_to_b) < 80

    network.heal()
    with slowed, before:
        assert round_trip_ms(slowed) < 80  # relayed, now without delay
    after, _ = open_connection(network, "b", from_node="a")
    with after:
        assert round_trip_ms(after) < 80


def test_slow_node_delays_what_clients_send_it(network, echo_servers):
    echo_servers(network, "b")
    network.slow("b", delay_ms=80)
    sock, peer = open_connection(network, "b", timeout_s=5)
    with sock:
        assert peer == network.address("b")  # captured on arrival: the relay connects locally
        trips_ms = [round_trip_ms(sock) for _ in range(3)]
    print("round trips client -> slowed b (80 ms): " + ", ".join(f"{t:.0f}" for t in trips_ms))
    assert min(trips_ms) >= 2 * 80


def test_slow_loss_drops_packets_both_ways(network):
    network.slow("a", "b", loss_percent=50)
    sent = 400
    a_to_b = udp_delivered(network, "a", "b", sent)
    b_to_a = udp_delivered(network, "b", "a", sent)
    print(f"50% loss: {a_to_b}/{sent} a -> b, {b_to_a}/{sent} b -> a")
    assert 120 <= a_to_b <= 280 and 120 <= b_to_a <= 280  # 200 ± 8 standard deviations
    assert udp_delivered(network, "a", "c", sent) == sent
    network.heal()
    assert udp_delivered(network, "a", "b", sent) == sent


def test_destroy_removes_everything_by_name_and_twice_is_safe(network_factory, echo_servers):
    network = network_factory()
    server = echo_servers(network, "a")
    network.slow("a", "b", delay_ms=10, loss_percent=1)  # a relay and nat tables too
    network.cut("c", "a")
    assert leftovers(network.prefix)
    network.destroy()
    assert leftovers(network.prefix) == []
    assert server.wait(5) == -signal.SIGKILL  # killed by pid with its namespace
    assert not [thread for thread in threading.enumerate() if thread.name == "isolation-relay"]
    network.destroy()
    assert leftovers(network.prefix) == []


def test_a_test_failing_midway_leaves_nothing(require_namespaces):
    prefix, subnet = unique_names()
    with pytest.raises(RuntimeError, match="midway"):
        with IsolatedNetwork(prefix, subnet) as network:
            network.create(["a", "b"])
            network.isolate("a")
            network.slow("b", delay_ms=10)
            raise RuntimeError("the test failed midway")
    assert leftovers(prefix) == []


STALE_CREATOR = """
import subprocess, sys, time
from oncelog.cluster.isolation import IsolatedNetwork
network = IsolatedNetwork(sys.argv[1], sys.argv[2]).create(["a", "b"])
network.slow("a", "b", delay_ms=10)
network.isolate("b")
server = subprocess.Popen([*network.exec_prefix("a"), "sleep", "300"])
print(server.pid, flush=True)
time.sleep(300)
"""


def test_a_stale_set_left_by_a_killed_process_is_removed_at_create(require_namespaces):
    prefix, subnet = unique_names()
    creator = subprocess.Popen([sys.executable, "-c", STALE_CREATOR, prefix, subnet],
                               stdout=subprocess.PIPE, text=True, env=os.environ)
    try:
        assert creator.stdout is not None
        orphan = int(creator.stdout.readline())
        creator.kill()
        creator.wait()
        assert alive(orphan)
        stale = leftovers(prefix)
        assert f"netns {prefix}-a" in stale and f"link {prefix}br" in stale
        with IsolatedNetwork(prefix, subnet) as network:
            network.create(["x"])
            assert sorted(leftovers(prefix)) == sorted([f"netns {prefix}-x", f"link {prefix}br",
                                                        f"link {prefix}v0",
                                                        f"table bridge {prefix}_faults"])
        assert leftovers(prefix) == []
        assert not alive(orphan)  # killed with its stale namespace
    finally:
        creator.kill()
        creator.wait()
        remove_isolated_networks(prefix)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet does not)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_remove_isolated_networks_removes_all_by_prefix(network_factory):
    network = network_factory(("a", "b"))
    network.cut("a", "b")
    removed = remove_isolated_networks(network.prefix)
    assert sorted(removed) == sorted(
        [f"link {network.prefix}br", f"link {network.prefix}v0", f"link {network.prefix}v1",
         f"netns {network.prefix}-a", f"netns {network.prefix}-b",
         f"table bridge {network.prefix}_faults"])
    assert leftovers(network.prefix) == []
    network.destroy()  # what it created is gone already: nothing to do


def test_a_subnet_in_use_is_refused_before_anything_is_created(network_factory):
    first = network_factory(("a",))
    prefix, _ = unique_names()
    second = IsolatedNetwork(prefix, str(first.subnet))
    with pytest.raises(IsolationError, match="overlaps"):
        second.create(["a"])
    assert leftovers(prefix) == []
    first_bridge = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", first.bridge],
                                  capture_output=True, text=True, check=True).stdout
    assert f"{first.bridge_address}/24" in first_bridge  # the network in use is untouched


def test_bad_names_and_faults_are_refused(network):
    for prefix in ("", "Ab", "a-b", "toolongprefix"):
        with pytest.raises(ValueError, match="name prefix"):
            IsolatedNetwork(prefix)
    with pytest.raises(ValueError, match="no node 'z'"):
        network.isolate("z")
    with pytest.raises(ValueError, match="itself"):
        network.cut("a", "a")
    with pytest.raises(ValueError, match="no node in both"):
        network.split(["a", "b"], ["b"])
    with pytest.raises(ValueError, match="jitter_ms"):
        network.slow("a", "b", delay_ms=10, jitter_ms=20)
    with pytest.raises(ValueError, match="give delay_ms or loss_percent"):
        network.slow("a", "b")
    assert network.faults() == []


UNAVAILABLE = """
from oncelog.cluster.isolation import IsolatedNetwork, IsolationUnavailable
try:
    IsolatedNetwork("{prefix}", "{subnet}").create(["a"])
except IsolationUnavailable as error:
    print(error)
"""


@pytest.mark.parametrize("lacking", ["ip", "root"])
def test_without_ip_or_root_one_line_says_what_is_missing(require_namespaces, lacking):
    """Without ip (and nft) on PATH, or as root whose capabilities to administer networks were
    dropped (setpriv, util-linux), create raises before it makes anything."""
    prefix, subnet = unique_names()
    command = [sys.executable, "-c", UNAVAILABLE.format(prefix=prefix, subnet=subnet)]
    if lacking == "ip":
        result = subprocess.run(command, capture_output=True, text=True, timeout=30,
                                env={**os.environ, "PATH": "/nonexistent"})
        expected = "the ip command (iproute2), the nft command (nftables)"
    else:
        result = subprocess.run(["setpriv", "--bounding-set", "-net_admin,-sys_admin", *command],
                                capture_output=True, text=True, timeout=30)
        expected = "root (CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    assert result.stderr == ""
    assert result.stdout == f"network partitions need {expected} (run as root after make setup)\n"
    assert leftovers(prefix) == []


def test_isolation_unavailable_names_each_missing_thing():
    error = IsolationUnavailable(["root", "nft"])
    assert error.missing == ("root", "nft")
    assert str(error) == ("network partitions need root (CAP_NET_ADMIN and CAP_SYS_ADMIN), the "
                          "nft command (nftables) (run as root after make setup)")
