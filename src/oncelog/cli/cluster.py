"""``oncelog cluster start|restart-broker|status|stop|acks-table``: a replicated cluster on one
machine (on one ZooKeeper or an ensemble of 3, 5, ...), one of its brokers restarted, its
health, stopping it from another terminal, and the acks table. ``cluster partition
isolate|split|cut|leader-from-zookeeper|slow|list`` and ``cluster heal``: network faults
applied to and healed in a cluster started with ``--isolated`` (each node in a network
namespace of its own, ``oncelog.cluster.isolation``).

``cluster start`` owns the processes it starts: it supervises them until Ctrl-C, records
them in ``<data-dir>/cluster.json``, and is the one that restarts a broker when ``cluster
restart-broker`` (run in another terminal) asks it to (``oncelog.cluster.control``), so the
restarted broker is stopped by Ctrl-C like the others and dies with the command. It owns the
isolated network the same way - the nftables rules and the delay relays live in its process -
so ``cluster partition ...`` and ``cluster heal`` ask it too, and it applies them.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import click

from . import main
from .common import (DEFAULT_BOOTSTRAP, BootstrapServers, Failure, check_bootstrap,
                     user_path)


@main.group()
def cluster() -> None:
    """Run a replicated cluster (ZooKeeper + brokers) and look at its health."""


@cluster.command("start")
@click.option("--brokers", "-n", type=click.IntRange(1, 9), default=3, show_default=True,
              help="How many brokers.")
@click.option("--data-dir", type=user_path(file_okay=False),
              default="oncelog-cluster", show_default=True,
              help="ZooKeeper's and each broker's data (broker-N/ inside).")
@click.option("--port", "first_port", type=int, default=9092, show_default=True,
              help="Broker N listens on PORT+N-1 (0: free ports, the last run's when free).")
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="A broker config for every broker, e.g. --set min.insync.replicas=2.")
@click.option("--zookeepers", type=int, default=1, show_default=True, metavar="N",
              callback=lambda _ctx, _param, value: _odd_count(value),
              help="ZooKeeper nodes: 1 (standalone) or an ensemble of 3, 5, ... (odd).")
@click.option("--isolated", is_flag=True,
              help="Every broker and ZooKeeper node in a network namespace of its own, on a "
                   "bridge this command creates and removes, so that `oncelog cluster "
                   "partition` can cut them apart (root on Linux, ip and nft). Brokers listen "
                   "on PORT of their own address.")
@click.option("--secure", is_flag=True,
              help="Every broker listens on SASL_SSL only, for clients and for each other: a "
                   "certificate authority, certificates and SCRAM-SHA-512 users (admin, "
                   "broker) are made in DATA_DIR/secure, with client properties files to "
                   "connect with.")
def cluster_start(brokers, data_dir, first_port, settings, zookeepers, isolated,
                  secure) -> None:
    """Start ZooKeeper and BROKERS brokers on loopback (or, --isolated, each in a network
    namespace of its own); stop them all on Ctrl-C."""
    from ..cluster import control
    from ..cluster.isolation import IsolationError, IsolationUnavailable, missing_prerequisites
    from ..cluster.local import ISOLATED_BROKER_PORT, LocalCluster
    from ..cluster.zookeeper_process import ZooKeeperNotInstalled, ZooKeeperStartError
    from .common import parse_pair
    if secure and isolated:
        raise Failure("--secure and --isolated cannot be combined yet: the brokers' "
                      "certificates name 127.0.0.1 and localhost, not the isolated addresses")
    missing = missing_prerequisites() if isolated else []
    if missing:  # checked before anything is made: no folder, no process, no namespace
        raise Failure(str(IsolationUnavailable(missing)))
    owner = control.running_owner(data_dir)
    if owner is not None:
        raise Failure(f"a cluster already runs in {data_dir} (oncelog cluster start, pid "
                      f"{owner}); stop it first, or give another --data-dir")
    subnet = (control.network(data_dir) or {}).get("subnet")  # the last run's, when free
    _remove_stale_network(data_dir)
    if isolated:  # each broker has an address of its own, so every port is free there
        ports: list[int | None] = [first_port or ISOLATED_BROKER_PORT] * brokers
    else:
        ports = ([first_port + i for i in range(brokers)] if first_port else
                 [port if port and _free(port) else None
                  for port in control.previous_ports(data_dir, brokers)])
    security: dict = {}
    files = None
    if secure:
        from ..cluster.secure import PROTOCOL, prepare
        files = prepare(data_dir / "secure")
        security = {"security_protocol": PROTOCOL, "config_file": files.broker_properties,
                    "client_config": files.client_config(), "before_brokers": files.add_users}
    local = LocalCluster(data_dir, brokers, settings=dict(parse_pair(s) for s in settings),
                         ports=ports, zookeepers=zookeepers, isolated=isolated,
                         subnet=subnet, **security)
    what = "ZooKeeper" if zookeepers == 1 else f"a {zookeepers}-node ZooKeeper ensemble"
    where = " each in a network namespace of its own" if isolated else ""
    click.echo(f"starting {what} and {brokers} brokers{where} in {data_dir} ...")
    try:
        local.start()
    except (ZooKeeperNotInstalled, ZooKeeperStartError) as error:
        raise Failure(str(error)) from None
    except IsolationUnavailable as error:
        raise Failure(str(error)) from None
    except IsolationError as error:
        raise Failure(f"the isolated network could not be made: {error}") from None
    except (RuntimeError, TimeoutError) as error:
        raise Failure(f"the cluster did not start: {str(error).splitlines()[0]}") from None
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    try:
        control.write_state(data_dir, local)
        ensemble = local.ensemble
        assert ensemble is not None  # started by local.start()
        if zookeepers == 1:
            zookeeper = ensemble.node(1)
            click.echo(f"zookeeper.connect={local.zookeeper_connect} (pid {zookeeper.pid}, "
                       f"log {zookeeper.log_path})")
        else:
            click.echo(f"zookeeper.connect={local.zookeeper_connect}")
            for server_id, mode in ensemble.modes().items():
                node = ensemble.node(server_id)
                click.echo(f"zookeeper {server_id}: {node.connect_string} {mode} (pid "
                           f"{node.pid}, log {node.log_path})")
        for node_id, process in local.brokers.items():
            click.echo(f"broker {node_id}: {process.bootstrap} (pid {process.pid}, log "
                       f"{process.log_path})")
        click.echo(f"bootstrap servers: {local.bootstrap}")
        if files is not None:
            _echo_security(files)
        if local.network is not None:
            _echo_network(local.network, data_dir)
        click.echo(f"restart broker N: oncelog cluster restart-broker N --data-dir {data_dir}")
        click.echo("Ctrl-C stops the cluster.")
        _supervise(local, data_dir, stop)
    finally:
        click.echo("stopping the cluster ...")
        local.stop()
        click.echo("stopped")


def _echo_security(files) -> None:
    from ..cluster.secure import BROKER_USER, MECHANISM
    directory = files.directory
    click.echo(f"security: every listener is SASL_SSL ({MECHANISM}); brokers log in to each "
               f"other as user {BROKER_USER}; ZooKeeper stays on loopback")
    click.echo(f"certificate authority: {files.ca_file}")
    click.echo(f"admin user: admin, its password in {directory / 'passwords.json'} "
               "(readable by you only)")
    click.echo(f"client properties (librdkafka: kcat -F, confluent-kafka): "
               f"{files.client_properties}")
    click.echo(f"client properties (Kafka's tools, --command-config): {files.java_properties}")


def _remove_stale_network(data_dir) -> None:
    """The namespaces, bridge and rules an isolated ``cluster start`` in ``data_dir`` left
    when it was killed (``kill -9`` takes its processes along, not its network), by the
    prefix its ``cluster.json`` recorded; its owner is known dead here."""
    from ..cluster import control
    from ..cluster.isolation import (IsolationError, missing_prerequisites,
                                     remove_isolated_networks)
    prefix = (control.network(data_dir) or {}).get("prefix")
    if not prefix or missing_prerequisites():
        return
    try:
        removed = remove_isolated_networks(str(prefix))
    except (IsolationError, ValueError) as error:
        click.echo(f"oncelog: the network a previous cluster start left could not be "
                   f"removed: {error}", err=True)
        return
    if removed:
        click.echo(f"removed the network a killed cluster start left in {data_dir}: "
                   f"{len(removed)} namespaces, interfaces and tables named {prefix}*")


def _echo_network(network, data_dir) -> None:
    click.echo(f"network {network.prefix}: bridge {network.bridge} ({network.bridge_address}) "
               f"on {network.subnet}, a namespace {network.prefix}-NODE per node")
    click.echo("nodes: " + ", ".join(f"{node} {network.address(node)}"
                                     for node in network.nodes))
    click.echo(f"partition: oncelog cluster partition isolate broker-1 --data-dir {data_dir} "
               f"(or split, cut, leader-from-zookeeper, slow, list); heal: oncelog cluster "
               f"heal --data-dir {data_dir}")


def _odd_count(value: int) -> int:
    if value < 1 or value % 2 == 0:
        raise click.BadParameter(f"{value} is not an odd number of 1 or more: a ZooKeeper "
                                 f"ensemble needs a majority, so 1, 3, 5, ... nodes")
    return value


def _free(port: int) -> bool:
    import socket
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _supervise(local, data_dir, stop: list) -> None:
    """Until Ctrl-C: report a broker that exited (once), and restart the brokers that
    ``cluster restart-broker`` asks for - here, so that they stay this command's children."""
    from ..cluster import control
    reported: set[int] = set()
    zookeepers_reported: set[int] = set()
    while not stop:
        for request in control.pending_requests(data_dir):
            _restart(local, data_dir, request)
        for network_request in control.pending_network_requests(data_dir):
            _apply_network_request(local, data_dir, network_request)
        for server_id in local.ensemble.nodes if local.ensemble is not None else ():
            if local.ensemble.is_running(server_id):
                zookeepers_reported.discard(server_id)
            elif server_id not in zookeepers_reported:
                click.echo(f"oncelog: ZooKeeper node {server_id} exited; see "
                           f"{local.ensemble.node(server_id).log_path}", err=True)
                zookeepers_reported.add(server_id)
        for node_id in local.brokers:
            running = local.is_running(node_id)
            if not running and node_id not in reported:
                click.echo(f"oncelog: broker {node_id} exited; see "
                           f"{local.broker(node_id).log_path}; restart it with: oncelog "
                           f"cluster restart-broker {node_id} --data-dir {data_dir}", err=True)
                reported.add(node_id)
            elif running:
                reported.discard(node_id)
        time.sleep(0.5)


def _restart(local, data_dir, request) -> None:
    from ..broker.process import BrokerExited
    from ..cluster import control
    node_id = request.node_id
    if node_id not in local.brokers:
        request.answer({"error": f"the cluster in {data_dir} has brokers 1-"
                                 f"{len(local.brokers)}, no broker {node_id}"})
        return
    click.echo(f"restarting broker {node_id} (asked by oncelog cluster restart-broker) ...")
    process = local.broker(node_id)
    try:
        local.restart(node_id, timeout_s=RESTART_TIMEOUT_S)
    except BrokerExited as error:
        message = f"broker {node_id} {error.summary}"
        click.echo(f"oncelog: {message}", err=True)
        request.answer({"error": message})
        return
    except RuntimeError as error:  # it never listened
        request.answer({"error": f"{error}; see {process.log_path}"})
        return
    control.write_state(data_dir, local)
    click.echo(f"broker {node_id}: {process.bootstrap} (pid {process.pid}, log "
               f"{process.log_path})")
    request.answer({"pid": process.pid, "bootstrap": process.bootstrap})


def _apply_network_request(local, data_dir, request) -> None:
    """Apply one ``cluster partition ...``/``cluster heal`` request to the network this
    process owns, say so in its terminal and answer; an unexpected error is answered too,
    never left to end the supervision (and with it the cluster)."""
    from ..cluster import control
    try:
        result = control.answer_network_request(local, request.action)
    except Exception as error:  # the cluster keeps running whatever happens
        result = {"error": f"{type(error).__name__}: {str(error).splitlines()[0]}"}
    if "caption" in result:
        click.echo(f"network fault: {result['caption']} (asked by oncelog cluster partition)")
    elif result.get("healed"):
        click.echo(f"healed: {'; '.join(result['healed'])} (asked by oncelog cluster heal)")
    if "error" not in result and local.network is not None:
        control.write_state(data_dir, local)  # the faults now, for whoever reads cluster.json
    request.answer(result)


# A broker back after kill -9 first waits for its previous ZooKeeper session to expire
# (zookeeper.session.timeout.ms, 18 s by default), then registers and listens.
RESTART_TIMEOUT_S = 90.0


@cluster.command("restart-broker")
@click.argument("node_id", metavar="N", type=click.IntRange(1, 9))
@click.option("--data-dir", type=user_path(file_okay=False),
              default="oncelog-cluster", show_default=True,
              help="The --data-dir of the running oncelog cluster start.")
def cluster_restart_broker(node_id, data_dir) -> None:
    """Restart broker N of the cluster that `oncelog cluster start` runs in --data-dir
    (stopped first if it runs; on its address, with its data and settings)."""
    from ..cluster import control
    if control.read_state(data_dir) is None:
        raise Failure(f"no cluster was started in {data_dir} (no {control.STATE_FILE}); "
                      f"start one with: oncelog cluster start --data-dir {data_dir}")
    owner = control.running_owner(data_dir)
    if owner is None:
        raise Failure(f"the cluster in {data_dir} is not running (its oncelog cluster start "
                      f"has exited); start it again with: oncelog cluster start --data-dir "
                      f"{data_dir}")
    request = control.ask_restart(data_dir, node_id)
    result = control.wait_for_answer(request, owner, RESTART_TIMEOUT_S + 30)
    if "error" in result:
        raise Failure(f"cannot restart broker {node_id}: {result['error']}")
    click.echo(f"broker {node_id} restarted: {result['bootstrap']} (pid {result['pid']})")


@cluster.command("status")
@click.option("--bootstrap", "-b", type=BootstrapServers(), default=None, metavar="HOST:PORT",
              help=f"A broker to bootstrap from [default: {DEFAULT_BOOTSTRAP}, or the brokers "
                   "of a cluster started with --secure in --data-dir].")
@click.option("--data-dir", type=user_path(file_okay=False),
              default="oncelog-cluster", show_default=True,
              help="The --data-dir of a running oncelog cluster start, whose ZooKeeper nodes "
                   "are listed with their mode (and, started with --secure, whose admin user "
                   "asks).")
def cluster_status(bootstrap, data_dir) -> None:
    """Brokers, the controller, and partitions that are under-replicated or offline; the
    ZooKeeper nodes of the cluster that `oncelog cluster start` runs in --data-dir, with
    their mode (leader, follower, standalone)."""
    from ..client.metadata import fetch_metadata
    bootstrap, connector = _status_target(bootstrap, data_dir)
    try:
        metadata = fetch_metadata(bootstrap, connector=connector)
    except ConnectionError as error:
        raise Failure(f"cannot reach a broker at {bootstrap}: {error}") from None
    click.echo(f"cluster {metadata.cluster_id}, controller {metadata.controller_id}")
    for broker in sorted(metadata.brokers, key=lambda b: b.node_id):
        click.echo(f"broker {broker.node_id}\t{broker.host}:{broker.port}")
    _zookeeper_status(data_dir)
    under, offline, total = [], [], 0
    for topic in sorted(metadata.topics, key=lambda t: t.name):
        for partition in sorted(topic.partitions, key=lambda p: p.partition_index):
            total += 1
            name = f"{topic.name}-{partition.partition_index}"
            if partition.leader_id < 0:
                offline.append((name, partition))
            elif len(partition.isr_nodes) < len(partition.replica_nodes):
                under.append((name, partition))
    click.echo(f"{total} partitions, {len(under)} under-replicated, {len(offline)} offline")
    for label, entries in (("under-replicated", under), ("offline", offline)):
        for name, partition in entries:
            click.echo(f"  {label}: {name} leader {partition.leader_id} epoch "
                       f"{partition.leader_epoch} replicas {list(partition.replica_nodes)} "
                       f"isr {list(partition.isr_nodes)}")
    if offline:
        sys.exit(2)


def _status_target(bootstrap, data_dir):
    """Where ``cluster status`` asks, and how: a running cluster started with --secure in
    ``data_dir`` is asked over SASL_SSL as its admin (at its brokers unless --bootstrap says
    otherwise); anything else over PLAINTEXT, once the address answers."""
    from ..cluster import control
    from ..cluster import secure
    state = control.read_state(data_dir) or {}
    files = secure.load(data_dir / "secure")
    if (state.get("security_protocol") == secure.PROTOCOL and files is not None
            and control.running_owner(data_dir) is not None):
        brokers = ",".join(b["bootstrap"] for b in (state.get("brokers") or {}).values())
        return bootstrap or brokers, files.connector()
    bootstrap = bootstrap or DEFAULT_BOOTSTRAP
    check_bootstrap(bootstrap)
    return bootstrap, None


def _zookeeper_status(data_dir) -> None:
    """One line per ZooKeeper node of the cluster running in ``data_dir`` (none when none
    runs there): its address and what its ``srvr`` says."""
    from ..cluster import control
    from ..cluster.zookeeper_process import MODE, four_letter_word
    if control.running_owner(data_dir) is None:
        return
    for server_id, node in sorted(control.zookeeper_nodes(data_dir).items()):
        address = str(node.get("address", ""))
        host, _, port = address.rpartition(":")
        try:
            found = MODE.search(four_letter_word(host, int(port), "srvr", timeout_s=2.0))
            mode = found[1] if found else "not serving"
        except (OSError, ValueError):
            mode = "unreachable"
        click.echo(f"zookeeper {server_id}\t{address}\t{mode}")


@cluster.command("stop")
@click.option("--data-dir", type=user_path(file_okay=False),
              default="oncelog-cluster", show_default=True,
              help="The --data-dir of the running oncelog cluster start.")
def cluster_stop(data_dir) -> None:
    """Stop the cluster that `oncelog cluster start` runs in --data-dir, as Ctrl-C in its
    terminal would: brokers first (controlled shutdown), then ZooKeeper."""
    from ..cluster import control
    state = control.read_state(data_dir)
    if state is None:
        raise Failure(f"no cluster was started in {data_dir} (no {control.STATE_FILE}); "
                      f"nothing to stop")
    owner = control.running_owner(data_dir)
    if owner is None:
        raise Failure(f"the cluster in {data_dir} is not running (its oncelog cluster start "
                      f"has exited)")
    started = (state.get("owner") or {}).get("started")
    try:
        os.kill(owner, signal.SIGTERM)
    except ProcessLookupError:
        pass
    if not control.wait_for_exit(owner, started, STOP_TIMEOUT_S):
        raise Failure(f"the oncelog cluster start running the cluster in {data_dir} (pid "
                      f"{owner}) did not stop within {STOP_TIMEOUT_S:g} s; its terminal may "
                      f"say why")
    click.echo(f"stopped the cluster in {data_dir} (oncelog cluster start, pid {owner})")


# Brokers shut down with a controlled shutdown each (leaderships moved), then ZooKeeper.
STOP_TIMEOUT_S = 120.0


@cluster.command("acks-table")
@click.option("--cycles", type=click.IntRange(1, 20), default=3, show_default=True,
              help="Leader failures per row.")
@click.option("--rate", type=click.IntRange(10, 5000), default=200, show_default=True,
              help="Records per second the producer of each row sends.")
@click.option("--data-dir", type=user_path(file_okay=False),
              default="acks-table-out", show_default=True,
              help="The cluster's data and logs, and results.json.")
def cluster_acks_table(cycles, rate, data_dir) -> None:
    """Measure acks=0/1/all, min.insync.replicas and unclean election side by side on a
    3-broker cluster whose leaders keep dying (docs/cluster.md explains each row)."""
    from rich.console import Console
    from rich.table import Table

    from ..cluster.acks_table import AcksTable, write_results
    from ..cluster.zookeeper_process import ZooKeeperNotInstalled, ZooKeeperStartError

    console = Console() if Console().is_terminal else Console(width=120)
    data_dir.mkdir(parents=True, exist_ok=True)
    table_run = AcksTable(data_dir / "cluster", cycles=cycles, rate=rate,
                          progress=lambda line: console.print(f"  {line}", highlight=False))
    try:
        results = table_run.run()
    except (ZooKeeperNotInstalled, ZooKeeperStartError) as error:
        raise Failure(str(error)) from None
    except (RuntimeError, TimeoutError) as error:
        raise Failure(f"the acks table could not run: {str(error).splitlines()[0]}") from None
    write_results(results, data_dir / "results.json")
    table = Table(title=f"{cycles} leader failures per row, RF 3, {rate} records/s")
    for column in ("setting", "leader failure", "acknowledged", "lost", "duplicated",
                   "unavailable s"):
        table.add_column(column, justify="left" if column in ("setting", "leader failure")
                         else "right")
    for result in results:
        table.add_row(result.row.label, result.row.cycle, str(result.acknowledged),
                      str(result.lost), str(result.duplicated), f"{result.unavailable_s:g}")
    console.print(table)
    console.print(f"results in {data_dir / 'results.json'}; broker logs in "
                  f"{data_dir / 'cluster'}", highlight=False)


# -- network partitions (a cluster started with --isolated) ---------------------------------

def _running_cluster_option(function):
    return click.option("--data-dir", type=user_path(file_okay=False),
                        default="oncelog-cluster", show_default=True,
                        help="The --data-dir of the running oncelog cluster start "
                             "--isolated.")(function)


def _running_owner(data_dir) -> int:
    """The pid of the ``cluster start`` running the cluster in ``data_dir``, or a Failure
    saying there is none (as ``restart-broker`` says it)."""
    from ..cluster import control
    if control.read_state(data_dir) is None:
        raise Failure(f"no cluster was started in {data_dir} (no {control.STATE_FILE}); "
                      f"start one with: oncelog cluster start --isolated --data-dir {data_dir}")
    owner = control.running_owner(data_dir)
    if owner is None:
        raise Failure(f"the cluster in {data_dir} is not running (its oncelog cluster start "
                      f"has exited)")
    return owner


def _ask_network(data_dir, action: dict) -> dict:
    """The running ``cluster start``'s answer to ``action``; its error as a Failure."""
    from ..cluster import control
    owner = _running_owner(data_dir)
    request = control.ask_network(data_dir, action)
    result = control.wait_for_answer(request, owner, NETWORK_ANSWER_TIMEOUT_S)
    if "error" in result:
        raise Failure(result["error"])
    return result


# Applying a fault takes milliseconds, but the owner answers between restarts it may be doing.
NETWORK_ANSWER_TIMEOUT_S = RESTART_TIMEOUT_S + 30


def _nodes(value: str) -> list[str]:
    nodes = [node.strip() for node in value.split(",") if node.strip()]
    if not nodes:
        raise click.BadParameter(f"{value!r}: name one node or more, comma-separated")
    return nodes


@cluster.group("partition")
def cluster_partition() -> None:
    """Network faults in a running cluster started with --isolated, each applied until
    `oncelog cluster heal`. NODE is a broker id (2), broker-N or zookeeper-N."""


@cluster_partition.command("isolate")
@click.argument("node", metavar="NODE")
@_running_cluster_option
def partition_isolate(node, data_dir) -> None:
    """Cut NODE (a broker or a ZooKeeper node) off from everything, clients included."""
    click.echo(_ask_network(data_dir, {"action": "isolate", "node": node})["caption"])


@cluster_partition.command("split")
@click.argument("side_a", metavar="NODES")
@click.argument("side_b", metavar="NODES")
@_running_cluster_option
def partition_split(side_a, side_b, data_dir) -> None:
    """Two halves that cannot reach each other (clients reach both): comma-separated nodes
    per side, e.g. `1,2 3` or `broker-1,zookeeper-1 broker-2,broker-3`."""
    sides = [_nodes(side_a), _nodes(side_b)]
    click.echo(_ask_network(data_dir, {"action": "split", "sides": sides})["caption"])


@cluster_partition.command("cut")
@click.argument("source", metavar="A")
@click.argument("target", metavar="B")
@_running_cluster_option
def partition_cut(source, target, data_dir) -> None:
    """One directed link: A's packets to B dropped, B's to A delivered."""
    action = {"action": "cut", "from": source, "to": target}
    click.echo(_ask_network(data_dir, action)["caption"])


@cluster_partition.command("leader-from-zookeeper")
@click.argument("topic")
@click.argument("partition", type=click.IntRange(0), default=0, required=False)
@_running_cluster_option
def partition_leader_from_zookeeper(topic, partition, data_dir) -> None:
    """Cut the current leader of TOPIC's PARTITION (default 0) from every ZooKeeper node
    only: clients and the other brokers still reach it."""
    from ..cluster import control
    _running_owner(data_dir)
    if control.network(data_dir) is None:
        raise Failure(control.NOT_ISOLATED)
    leader = _current_leader(data_dir, topic, partition)
    result = _ask_network(data_dir, {"action": "cut_from_zookeeper", "broker": leader})
    click.echo(f"{topic}-{partition} is led by broker {leader}: {result['caption']}")


def _current_leader(data_dir, topic: str, partition: int) -> int:
    """The leader of ``topic``-``partition`` as the brokers that answer say, the one with the
    highest leader epoch winning: a broker cut off already may still believe it leads."""
    from ..client.metadata import fetch_metadata
    from ..cluster import control
    from ..protocol.errors import ErrorCode
    brokers = (control.read_state(data_dir) or {}).get("brokers") or {}
    best: tuple[int, int] | None = None  # (leader_epoch, leader_id)
    unknown = False
    for broker in brokers.values():
        try:
            metadata = fetch_metadata(broker["bootstrap"], [topic], timeout_s=3.0)
        except (ConnectionError, OSError, TimeoutError, ValueError):
            continue
        for described in metadata.topics:
            if described.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                unknown = True
            for entry in described.partitions if described.error_code == 0 else ():
                if entry.partition_index == partition and entry.leader_id >= 0:
                    found = (entry.leader_epoch, entry.leader_id)
                    best = found if best is None or found > best else best
    if best is None:
        if unknown:
            raise Failure(f"no topic {topic} in the cluster in {data_dir}")
        raise Failure(f"no broker of the cluster in {data_dir} names a leader of "
                      f"{topic}-{partition} (no such partition, an election in progress, or "
                      f"no broker reachable)")
    return best[1]


@cluster_partition.command("slow")
@click.argument("node", metavar="A")
@click.argument("other", metavar="[B]", required=False)
@click.option("--delay-ms", type=click.FloatRange(0), default=0.0, show_default=True,
              help="Added to each chunk of a TCP connection opened from now on, each way.")
@click.option("--jitter-ms", type=click.FloatRange(0), default=0.0, show_default=True,
              help="The delay varies by up to this much (at most --delay-ms).")
@click.option("--loss-percent", type=click.FloatRange(0, 100), default=0.0,
              show_default=True, help="Each packet dropped with this chance.")
@_running_cluster_option
def partition_slow(node, other, delay_ms, jitter_ms, loss_percent, data_dir) -> None:
    """Delay, jitter and loss between A and B (both ways), or for all of A's traffic."""
    if not delay_ms and not loss_percent:
        raise click.UsageError("give --delay-ms or --loss-percent (or both)")
    if jitter_ms > delay_ms:
        raise click.UsageError(f"--jitter-ms {jitter_ms:g} is more than --delay-ms "
                               f"{delay_ms:g}")
    action = {"action": "slow", "node": node, "to": other, "delay_ms": delay_ms,
              "jitter_ms": jitter_ms, "loss_percent": loss_percent}
    click.echo(_ask_network(data_dir, action)["caption"])


@cluster_partition.command("list")
@_running_cluster_option
def partition_list(data_dir) -> None:
    """The faults applied now, oldest first, one per line."""
    faults = _ask_network(data_dir, {"action": "list"})["faults"]
    for caption in faults:
        click.echo(caption)
    if not faults:
        click.echo("no faults: every node reaches every other")


@cluster.command("heal")
@_running_cluster_option
def cluster_heal(data_dir) -> None:
    """Remove every network fault of the running cluster started with --isolated."""
    healed = _ask_network(data_dir, {"action": "heal"})["healed"]
    for caption in healed:
        click.echo(f"healed: {caption}")
    if not healed:
        click.echo("no faults to heal")
