"""oncelog's packages import downwards only: the layering of STYLE.md §1, held by a test.

Regression (STYLE.md §9, "where today's tree and the models part"): ``broker``,
``controller``, ``coordinator``, ``partition`` and ``replication`` imported each other in one
cycle - ``partition`` and ``replication`` read ``broker.config``, the transaction markers were
handed the whole ``Broker`` and opened sockets through ``replication``'s client, ``spark``
imported ``cli`` for a logger. Nothing failed, so nothing stopped the next one; Tansu gets
this for free from one crate per layer, a cycle does not compile. Here every module under
``src/oncelog`` is parsed with ``ast`` and every import it makes - at the top, inside a
function, under ``TYPE_CHECKING``, relative or absolute - is mapped to the top-level package
it lands in; an import of a package that is not in a lower layer of ``LAYERS`` fails, naming
file:line and the import as written. A new top-level package or module must be given a place
in ``LAYERS`` first.
"""

from __future__ import annotations

import ast
import functools
import graphlib
from dataclasses import dataclass
from pathlib import Path

import oncelog

ROOT = Path(oncelog.__file__).parent

# Lowest first. A package may import its own modules and those of packages in lower layers;
# packages of one layer are peers and import neither each other nor anything above.
# "oncelog" is the root package's own __init__.py (its version), "served_process", "demo" and
# "__main__" are the modules beside the packages.
LAYERS: list[tuple[str, ...]] = [
    # wire codecs; configs under Kafka's names; what the server processes oncelog starts share
    ("oncelog", "protocol", "config", "served_process"),
    # TLS contexts and principals from the ssl.* and sasl.* configs
    ("security",),
    # one partition's log on disk; a Kafka-protocol connection to another broker
    ("storage", "net"),
    # the metadata store (local file | ZooKeeper), its records, elections, producer ids
    ("controller",),
    # one replica's state and the replicas this broker hosts, whose states come from the store
    ("partition",),
    # followers fetching from leaders; the group and transaction coordinators over partitions
    ("replication", "coordinator"),
    # a broker's membership of a cluster: registration, the metadata sync, ISR changes, the
    # lease, the controller role, follower fetchers
    ("membership",),
    # the broker process, which wires all of the above; the librdkafka-side tools, which use
    # none of it (only net and protocol), and which the broker must never use
    ("broker", "client"),
    # N brokers and ZooKeeper on one machine; the PySpark source and sinks (a pipeline may
    # start a broker); oncelog demo
    # the cluster's own code under one seed (it wires brokers' parts as the broker does)
    ("cluster", "spark", "demo", "simulation"),
    # workloads, faults and the checker, over clusters, clients and Spark sinks
    ("verify",),
    # the user-facing ends: the test kit and its pytest plugin; the oncelog command
    ("testing", "cli"),
    ("__main__",),
]

# Imports kept against the layering on purpose, each to be removed, never added to: none
# today. (controller/membership.py reached up into partition, replication and broker until
# ClusterMembership and its metadata sync moved to membership/, above what they drive.) An
# entry that no longer occurs fails test_known_exceptions_still_occur.
KNOWN_EXCEPTIONS: dict[str, set[str]] = {}

RANK = {package: rank for rank, layer in enumerate(LAYERS) for package in layer}


@dataclass(frozen=True)
class Import:
    path: str       # relative to src/oncelog, e.g. "partition/manager.py"
    line: int
    source: str     # the statement as written
    importer: str   # the top-level package of the importing module
    imported: str   # the top-level package it lands in

    def __str__(self) -> str:
        return f"src/oncelog/{self.path}:{self.line}: {self.source}"


def top_level(module_path: Path) -> str:
    """The top-level package (or root module) a file of src/oncelog belongs to."""
    parts = module_path.relative_to(ROOT).with_suffix("").parts
    if parts == ("__init__",):
        return "oncelog"
    return parts[0]


TOP_LEVEL = {top_level(path) for path in ROOT.rglob("*.py")}


def _landing(dotted: str) -> str | None:
    """Where an absolute module name lands: its top-level package, "oncelog" for the root
    package itself (and a name defined in it, "oncelog.__version__"), None outside oncelog."""
    parts = dotted.split(".")
    if parts[0] != "oncelog":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in TOP_LEVEL else "oncelog"


def imports_of(path: Path, source: str | None = None) -> list[Import]:
    """Every import in one module, wherever it stands (ast.walk visits function bodies and
    ``if TYPE_CHECKING:`` blocks alike), each mapped to the top-level package it lands in."""
    source = path.read_text() if source is None else source
    tree = ast.parse(source, filename=str(path))
    relative = path.relative_to(ROOT)
    # the package a relative import counts from: the module's own package
    package = ["oncelog", *relative.parent.parts]
    importer = top_level(path)
    found: list[Import] = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level > len(package):
                    raise AssertionError(f"src/oncelog/{relative}:{node.lineno}: relative import "
                                         "beyond the oncelog package")
                base = package[:len(package) - node.level + 1]
            else:
                base = []
            module = [*base, *(node.module.split(".") if node.module else [])]
            if module == ["oncelog"]:
                # "from oncelog import cli", "from .. import protocol": the names are modules
                targets = [f"oncelog.{alias.name}" for alias in node.names]
            else:
                targets = [".".join(module)]
        for target in targets:
            imported = _landing(target)
            if imported is None:
                continue
            found.append(Import(str(relative), node.lineno,
                                ast.get_source_segment(source, node) or target, importer,
                                imported))
    return sorted(found, key=lambda found: found.line)


@functools.cache
def all_imports() -> tuple[Import, ...]:
    return tuple(found for path in sorted(ROOT.rglob("*.py")) for found in imports_of(path))


def is_known_exception(found: Import) -> bool:
    return found.imported in KNOWN_EXCEPTIONS.get(found.path, set())


def test_every_package_has_a_place_in_the_layers():
    present = TOP_LEVEL
    unplaced = present - set(RANK)
    assert not unplaced, (f"{sorted(unplaced)} have no layer: add each to LAYERS in "
                          f"{Path(__file__).name}, below what imports it")
    gone = set(RANK) - present
    assert not gone, f"LAYERS names {sorted(gone)}, which are not in src/oncelog any more"
    assert len(RANK) == sum(len(layer) for layer in LAYERS), "a package is in two layers"


def test_imports_go_only_to_lower_layers():
    unplaced = len(LAYERS)  # a package without a layer (the test above fails) sits above all
    against = [found for found in all_imports()
               if found.imported != found.importer
               and RANK.get(found.imported, unplaced) >= RANK.get(found.importer, unplaced)
               and not is_known_exception(found)]
    assert not against, "imports against the layering (tests/unit/test_layering.py):\n" + "\n".join(
        f"  {found}  ({found.importer} -> {found.imported}: "
        + ("peers in one layer" if RANK.get(found.imported) == RANK.get(found.importer)
           else f"{found.imported} is a higher layer") + ")"
        for found in against)


def test_known_exceptions_still_occur():
    occurring = {(found.path, found.imported) for found in all_imports()}
    stale = sorted((path, package) for path, packages in KNOWN_EXCEPTIONS.items()
                   for package in packages if (path, package) not in occurring)
    assert not stale, (f"{stale} no longer occur: delete them from KNOWN_EXCEPTIONS, so the "
                       "layering holds there too")


def test_the_package_graph_has_no_cycle():
    """Independent of the table: the packages' imports, without the known exception, form a
    DAG (graphlib names the cycle when they do not)."""
    graph: dict[str, set[str]] = {}
    where: dict[tuple[str, str], Import] = {}  # one import behind each edge, for the message
    for found in all_imports():
        graph.setdefault(found.importer, set())
        if found.imported != found.importer and not is_known_exception(found):
            graph[found.importer].add(found.imported)
            where.setdefault((found.importer, found.imported), found)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        # graphlib lists [a, b, ..., a] with each one imported by the one after it
        cycle = list(reversed(error.args[1]))
        lines = [f"  {where[edge]}" for edge in zip(cycle, cycle[1:]) if edge in where]
        raise AssertionError("the packages import each other in a cycle: "
                             + " -> ".join(cycle) + "\n" + "\n".join(lines)) from None


# -- request handlers reach the broker's state only through their services ----------------

HANDLERS = ROOT / "broker" / "handlers"
BROKER_MODULE = "oncelog.broker.broker"


def _mentions_broker_class(expression: str) -> bool:
    """A string annotation or cast target ("Broker", "Broker | None") that names Broker."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        return False  # prose: a docstring or a message
    return any(isinstance(node, ast.Name) and node.id == "Broker" for node in ast.walk(tree))


def broker_reaches(path: Path, source: str | None = None) -> list[str]:
    """Where a handler module reaches past its ``ctx.services`` to the ``Broker``: an import
    of ``oncelog.broker.broker`` (or of ``Broker`` from it), the name ``Broker``, or an
    attribute named ``broker`` (``ctx.broker``). Each as ``file:line: what``."""
    source = path.read_text() if source is None else source
    tree = ast.parse(source, filename=str(path))
    relative = path.relative_to(ROOT)
    package = ["oncelog", *relative.parent.parts]
    where = f"src/oncelog/{relative}"
    found: list[str] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == BROKER_MODULE or alias.name.startswith(BROKER_MODULE + "."):
                    found.append(f"{where}:{line}: imports {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                target = module if module == BROKER_MODULE else f"{module}.{alias.name}"
                if target == BROKER_MODULE or alias.name == "Broker":
                    found.append(f"{where}:{line}: imports {alias.name} from {module}")
        elif isinstance(node, ast.Name) and node.id == "Broker":
            found.append(f"{where}:{line}: names Broker")
        elif isinstance(node, ast.Attribute) and node.attr == "broker":
            found.append(f"{where}:{line}: reaches {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and _mentions_broker_class(node.value):
            found.append(f"{where}:{line}: names Broker in {node.value!r}")
    return sorted(found, key=lambda text: int(text.split(":")[1]))


def test_handlers_reach_the_broker_only_through_their_services():
    """A handler is given ``ctx.services`` (``broker/services.py``), the state owners it may
    use, and nothing else of the broker: not the ``Broker`` class, not ``ctx.broker``. (They
    reached through ``ctx.broker`` about a hundred times, so the simulation had to fake a
    ``Broker`` to serve a request; STYLE.md §9.)"""
    handlers = sorted(HANDLERS.glob("*.py"))
    assert len(handlers) > 20, f"no handler modules found in {HANDLERS}"
    found = [reach for path in handlers for reach in broker_reaches(path)]
    assert not found, ("handlers reaching the Broker instead of ctx.services "
                       "(tests/unit/test_layering.py):\n" + "\n".join(f"  {f}" for f in found))


def test_the_handler_check_finds_each_way_to_the_broker():
    path = HANDLERS / "produce.py"
    source = '''"""A handler that reaches the Broker (a docstring may say so)."""
from ..broker import Broker
from .. import broker
import oncelog.broker.broker
from oncelog.broker.broker import wall_clock_ms
from ...broker.broker import Broker as B

async def handle(ctx, request) -> "Broker | None":
    config = ctx.broker.config
    return cast("Broker", ctx)
'''
    found = broker_reaches(path, source)
    lines = [int(text.split(":")[1]) for text in found]
    assert lines == [2, 3, 4, 5, 6, 8, 9, 10], found
    assert found[0] == "src/oncelog/broker/handlers/produce.py:2: imports Broker from " \
                       "oncelog.broker.broker"
