"""``free_port()``: servers' ports come from below the kernel's ephemeral range, where no
listener that binds port 0 (Spark's Python-worker socket, Py4J) can be given a port a stopped
broker's clients still reconnect to."""

import socket
from pathlib import Path

from oncelog.served_process import SERVER_PORTS_FROM, free_port, server_ports


def _ephemeral_range() -> tuple[int, int]:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def test_ports_are_below_the_ephemeral_range_and_not_given_out_again_soon() -> None:
    ephemeral_from, _ = _ephemeral_range()
    ports = [free_port() for _ in range(300)]
    assert all(SERVER_PORTS_FROM <= port < ephemeral_from for port in ports), ports
    assert len(set(ports)) == len(ports)
    assert server_ports() == range(SERVER_PORTS_FROM, ephemeral_from)


def test_a_port_someone_listens_on_is_passed_over() -> None:
    ports = server_ports()
    assert ports is not None
    given = free_port()
    following = ports[(ports.index(given) + 1) % len(ports)]
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", following))
        holder.listen(1)
        assert free_port() not in (given, following)
