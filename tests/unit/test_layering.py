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
