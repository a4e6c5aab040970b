"""Coupling-graph analysis: execution order, algebraic loops, tear connections.

Two graphs are built from the connections:

* the **component graph** (a multigraph, one edge per connection) orders the
  components for sequential (Gauss-Seidel) execution. Cycles are broken by
  greedy removal of the edge that lies on most simple cycles (ties prefer an
  edge into an input without direct feedthrough, whose consumer does not need
  the value at once); the remaining DAG gives priority levels.
* the **feedthrough graph** links output ports to the input ports they drive and
  input ports to the outputs that depend on them without a time step. Its
  strongly connected components are the algebraic loops; inside each loop the
  same greedy removal picks the tear connections, whose inputs need initial
  values.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

import networkx as nx

from cosimrun.system.connection import Connection

Feedthrough = Mapping[str, Mapping[str, Iterable[str]]]
"""``{component: {output: {inputs it depends on directly}}}``."""


@dataclass
class AlgebraicLoop:
    """Components coupled through direct feedthrough in a cycle."""

    components: list[str]
    """Loop members in evaluation order (tear connections removed)."""
    connections: list[Connection]
    """Every connection inside the loop."""
    tears: list[Connection]
    """Connections whose destination inputs are iterated on (need initial values)."""

    @property
    def tear_inputs(self) -> list[str]:
        return [c.dst for c in self.tears]


@dataclass
class GraphAnalysis:
    """What the system's structure implies for execution."""

    order: list[str]
    """Components in execution (priority) order."""
    levels: list[list[str]]
    """Priority levels: components in one level do not depend on each other."""
    removed: list[Connection]
    """Connections cut to make the component graph acyclic."""
    loops: list[AlgebraicLoop] = field(default_factory=list)
    resolution: list[str | AlgebraicLoop] = field(default_factory=list)
    """What to re-evaluate at a communication point after outputs are exchanged:
    a component name (evaluate its outputs) or a loop to solve, in dependency order."""

    @property
    def needs_initial_values(self) -> list[Connection]:
        """Tear connections of algebraic loops: their inputs need initial values."""
        return [c for loop in self.loops for c in loop.tears]


def component_graph(components: Iterable[str], connections: Iterable[Connection]) -> nx.MultiDiGraph:
    """Multigraph with one edge per connection, keyed by the connection."""
    graph = nx.MultiDiGraph()
    graph.add_nodes_from(components)
    for conn in connections:
        graph.add_edge(conn.src_component, conn.dst_component, key=conn)
    return graph


def _is_reactive(conn: Connection, feedthrough: Feedthrough) -> bool:
    deps = feedthrough.get(conn.dst_component, {})
    return any(conn.dst_port in ins for ins in deps.values())


def greedy_cycle_removal(
    graph: nx.MultiDiGraph, feedthrough: Feedthrough | None = None
) -> tuple[nx.MultiDiGraph, list[Connection]]:
    """Remove edges until *graph* is acyclic, most-cycled edge first (reference 002).

    Returns the acyclic copy and the removed connections in removal order.
    Parallel connections between the same pair of components lie on the same
    cycles and are removed together. Ties prefer edges into inputs without
    direct feedthrough, then feedback edges (from a component added later to
    one added earlier), then names.
    """
    feedthrough = feedthrough or {}
    position = {node: i for i, node in enumerate(graph.nodes)}
    work = graph.copy()
    removed: list[Connection] = []
    while True:
        simple = nx.DiGraph(work)
        cycles = list(nx.simple_cycles(simple))
        if not cycles:
            return work, removed
        count: dict[tuple[str, str], int] = {}
        for cycle in cycles:
            for i, u in enumerate(cycle):
                edge = (u, cycle[(i + 1) % len(cycle)])
                count[edge] = count.get(edge, 0) + 1

        def rank(edge: tuple[str, str], count: dict[tuple[str, str], int] = count) -> tuple[int, int, int]:
            passive = all(not _is_reactive(c, feedthrough) for c in work[edge[0]][edge[1]])
            backward = position[edge[0]] > position[edge[1]]
            return (count[edge], int(passive), int(backward))

        edge = max(sorted(count), key=rank)
        conns = sorted(work[edge[0]][edge[1]], key=str)
        for conn in conns:
            work.remove_edge(edge[0], edge[1], key=conn)
        removed.extend(conns)


def priority_levels(dag: nx.MultiDiGraph) -> list[list[str]]:
    """Topological generations of an acyclic graph, each sorted by name."""
    return [sorted(gen) for gen in nx.topological_generations(dag)]


def feedthrough_graph(connections: Iterable[Connection], feedthrough: Feedthrough) -> nx.DiGraph:
    """Port-level graph: ``(comp, port, 'out') -> (comp, port, 'in') -> (comp, out, 'out')``."""
    graph = nx.DiGraph()
    for conn in connections:
        graph.add_edge((conn.src_component, conn.src_port, "out"), (conn.dst_component, conn.dst_port, "in"),
                       connection=conn)
    for comp, deps in feedthrough.items():
        for out, ins in deps.items():
            for inp in ins:
                graph.add_edge((comp, inp, "in"), (comp, out, "out"))
    return graph


ANALYSES_KEPT = 64
"""How many structures' analyses :func:`analyze` keeps (a sweep's workers see one or a few)."""

_analyses: OrderedDict[Hashable, GraphAnalysis] = OrderedDict()
"""Analyses by structure (:func:`structure_key`), latest used last."""
_analyses_lock = threading.Lock()
"""Held while :data:`_analyses` changes (jobs may build systems in threads of one process)."""


def structure_key(components: Iterable[str], connections: Iterable[Connection], feedthrough: Feedthrough
                  ) -> Hashable:
    """Everything :func:`analyze` reads, as a hashable value: the components in their order, the connections
    (their transformations included) in theirs and the feedthrough in its iteration order."""
    return (tuple(components), tuple(connections),
            tuple((comp, tuple((out, tuple(ins)) for out, ins in deps.items())) for comp, deps in feedthrough.items()))


def analyze(
    components: Iterable[str], connections: Iterable[Connection], feedthrough: Feedthrough
) -> GraphAnalysis:
    """Order the components, find algebraic loops and the re-evaluation schedule.

    A structure analysed before (equal :func:`structure_key`) is not analysed again: the result is a copy of the
    kept analysis (connections are immutable values, the lists are the caller's own).
    """
    components = list(components)
    connections = list(connections)
    key = structure_key(components, connections, feedthrough)
    with _analyses_lock:
        kept = _analyses.pop(key, None)
        if kept is not None:
            _analyses[key] = kept  # the latest used last
    if kept is None:
        kept = _analyze(components, connections, feedthrough)
        with _analyses_lock:
            _analyses[key] = kept
            while len(_analyses) > ANALYSES_KEPT:
                _analyses.popitem(last=False)
    return _copy(kept)


def _copy(analysis: GraphAnalysis) -> GraphAnalysis:
    """*analysis* with lists of its own (the connections, immutable, shared)."""
    loops = {id(loop): AlgebraicLoop(list(loop.components), list(loop.connections), list(loop.tears))
             for loop in analysis.loops}
    return GraphAnalysis(
        order=list(analysis.order),
        levels=[list(level) for level in analysis.levels],
        removed=list(analysis.removed),
        loops=list(loops.values()),
        resolution=[item if isinstance(item, str) else loops[id(item)] for item in analysis.resolution],
    )


def _analyze(components: list[str], connections: list[Connection], feedthrough: Feedthrough) -> GraphAnalysis:
    """:func:`analyze`'s work, for a structure not analysed yet."""
    dag, removed = greedy_cycle_removal(component_graph(components, connections), feedthrough)
    levels = priority_levels(dag)
    order = [c for level in levels for c in level]
    rank = {c: i for i, c in enumerate(order)}

    ft = feedthrough_graph(connections, feedthrough)
    condensed = nx.condensation(ft)
    loops: list[AlgebraicLoop] = []
    resolution: list[str | AlgebraicLoop] = []
    for scc_id in nx.topological_sort(condensed):
        members = condensed.nodes[scc_id]["members"]
        if len(members) > 1:
            loop = _make_loop(members, connections, feedthrough, rank)
            loops.append(loop)
            resolution.append(loop)
            continue
        (comp, port, kind) = next(iter(members))
        if kind == "out" and feedthrough.get(comp, {}).get(port) and (not resolution or resolution[-1] != comp):
            resolution.append(comp)
    return GraphAnalysis(order=order, levels=levels, removed=removed, loops=loops, resolution=resolution)


def _make_loop(
    members: set[tuple[str, str, str]], connections: list[Connection], feedthrough: Feedthrough, rank: dict[str, int]
) -> AlgebraicLoop:
    comps = sorted({m[0] for m in members}, key=lambda c: rank.get(c, 0))
    inside = [
        c for c in connections
        if (c.src_component, c.src_port, "out") in members and (c.dst_component, c.dst_port, "in") in members
    ]
    sub = component_graph(comps, inside)
    dag, tears = greedy_cycle_removal(sub, feedthrough)
    ordered = list(nx.lexicographical_topological_sort(dag, key=lambda c: rank.get(c, 0)))
    return AlgebraicLoop(components=ordered, connections=inside, tears=tears)
