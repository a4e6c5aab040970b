"""Coupling-graph analysis: greedy cycle removal, priority levels, algebraic loops, describe()."""

import networkx as nx
import pytest
from helpers import Affine, Constant, Delay, Probe, Stateless, real_in, real_out

from cosimrun.masters import GaussSeidel
from cosimrun.system import (
    Connection,
    System,
    analyze,
    greedy_cycle_removal,
    priority_levels,
)
from cosimrun.system.graph import component_graph


def conns(*texts: str) -> list[Connection]:
    return [Connection.parse(t) for t in texts]


def chain(*edges: str) -> list[Connection]:
    """``"a>b"`` -> ``a.y -> b.u``, with a distinct input per source so parallel inputs do not clash."""
    out = []
    for edge in edges:
        src, dst = edge.split(">")
        out.append(Connection(src, "y", dst, f"u_{src}"))
    return out


def remove(nodes: str, connections: list[Connection], feedthrough=None):
    graph = component_graph(list(nodes), connections)
    dag, removed = greedy_cycle_removal(graph, feedthrough)
    assert nx.is_directed_acyclic_graph(dag)
    assert dag.number_of_edges() + len(removed) == len(connections)
    return dag, removed


# ---------------------------------------------------------------------- greedy cycle removal
def test_the_edge_on_most_simple_cycles_is_removed_first_and_alone():
    # Three nested cycles share b->c: a>b>c>a, b>c>b, b>c>d>b. Every other edge lies on one cycle.
    edges = chain("a>b", "b>c", "c>a", "c>b", "c>d", "d>b")
    _, removed = remove("abcd", edges)
    assert removed == chain("b>c")


def test_nested_cycles_need_several_rounds():
    # a>b>a and a>b>c>a share a>b (2 cycles); once it is gone, the cycle c>d>c remains.
    edges = chain("a>b", "b>a", "b>c", "c>a", "c>d", "d>c")
    _, removed = remove("abcd", edges)
    assert removed[0] == chain("a>b")[0]
    assert len(removed) == 2
    assert removed[1] in chain("c>d", "d>c")


def test_acyclic_graph_loses_nothing():
    _, removed = remove("abcd", chain("a>b", "a>c", "b>d", "c>d"))
    assert removed == []


def test_tie_prefers_the_feedback_edge():
    # a 3-cycle: every edge lies on one cycle; c>a runs against the insertion order a, b, c
    _, removed = remove("abc", chain("a>b", "b>c", "c>a"))
    assert removed == chain("c>a")


def test_tie_prefers_an_edge_into_an_input_without_feedthrough():
    # a <-> b; b's input from a feeds b's output directly, a's input does not -> cut b>a ...
    feedthrough = {"a": {"y": set()}, "b": {"y": {"u_a"}}}
    _, removed = remove("ab", chain("a>b", "b>a"), feedthrough)
    assert removed == chain("b>a")
    # ... and the other way round, even against the insertion order
    feedthrough = {"a": {"y": {"u_b"}}, "b": {"y": set()}}
    _, removed = remove("ab", chain("a>b", "b>a"), feedthrough)
    assert removed == chain("a>b")


def test_parallel_connections_are_removed_together():
    edges = [Connection("a", "y", "b", "u"), Connection("b", "y", "a", "u"), Connection("b", "z", "a", "v")]
    _, removed = remove("ab", edges)
    assert sorted(map(str, removed)) == ["b.y -> a.u", "b.z -> a.v"]


def test_self_loop_is_removed():
    _, removed = remove("ab", [Connection("a", "y", "a", "u"), Connection("a", "y", "b", "u")])
    assert removed == [Connection("a", "y", "a", "u")]


# ---------------------------------------------------------------------- priority levels
def test_priority_levels_of_a_chain():
    dag = component_graph("abc", chain("a>b", "b>c"))
    assert priority_levels(dag) == [["a"], ["b"], ["c"]]


def test_priority_levels_of_a_diamond_and_an_isolated_node():
    dag = component_graph("dcbae", chain("a>b", "a>c", "b>d", "c>d"))
    assert priority_levels(dag) == [["a", "e"], ["b", "c"], ["d"]]


def test_analyze_orders_after_cutting_the_feedback_edge():
    result = analyze("abc", chain("a>b", "b>c", "c>a"), {})
    assert result.removed == chain("c>a")
    assert result.levels == [["a"], ["b"], ["c"]]
    assert result.order == ["a", "b", "c"]
    assert result.loops == []


# ---------------------------------------------------------------------- algebraic loops
def test_algebraic_loop_only_where_the_feedthrough_graph_closes():
    connections = conns("p.y1 -> q.u", "q.y -> p.u1", "q.y2 -> p.u2")
    # p: y1 depends on u1 directly; its other output y2 on nothing (a state)
    feedthrough = {"p": {"y1": {"u1"}, "y2": set()}, "q": {"y": {"u"}, "y2": set()}}
    result = analyze("pq", connections, feedthrough)
    assert len(result.loops) == 1
    loop = result.loops[0]
    assert set(loop.components) == {"p", "q"}
    assert sorted(map(str, loop.connections)) == ["p.y1 -> q.u", "q.y -> p.u1"]
    assert len(loop.tears) == 1 and loop.tear_inputs[0] in ("p.u1", "q.u")
    # the same component cycle through an input without feedthrough is not an algebraic loop
    result = analyze("pq", conns("p.y1 -> q.u", "q.y -> p.u2"), feedthrough)
    assert result.loops == [] and result.needs_initial_values == []
    assert result.removed == conns("q.y -> p.u2")


def test_resolution_schedule_puts_a_loop_between_its_producers_and_consumers():
    connections = conns("src.y -> p.u", "q.y -> p.v", "p.y -> q.u", "q.y -> sink.u")
    feedthrough = {"p": {"y": {"u", "v"}}, "q": {"y": {"u"}}, "sink": {"y": {"u"}}, "src": {"y": set()}}
    result = analyze(["src", "p", "q", "sink"], connections, feedthrough)
    kinds = [item if isinstance(item, str) else "LOOP" for item in result.resolution]
    assert kinds == ["LOOP", "sink"]
    assert result.needs_initial_values == result.loops[0].tears


class Split(Stateless):
    """Two paths: ``y1 = u1`` (feedthrough) and ``y2`` = a state fed by ``u2`` (no feedthrough)."""

    def __init__(self, name):
        super().__init__(name)
        self.input_specs = {"u1": real_in("u1"), "u2": real_in("u2")}
        self.output_specs = {"y1": real_out("y1"), "y2": real_out("y2")}
        self._state = 0.0

    def _initialize_component(self, t0):
        self._state = 0.0

    def _do_step_internal(self, t, dt):
        self._state = self.inputs["u2"].value

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["y1"].value = self.inputs["u1"].value
        self.outputs["y2"].value = self._state


def test_detected_feedthrough_decides_whether_a_component_cycle_is_an_algebraic_loop():
    s = System("split")
    s.add_component(Split("x"))
    s.add_component(Affine("g", 0.5))
    s.connect("x.y1 -> g.u")
    s.connect("g.y -> x.u2")  # closes a component cycle, not a feedthrough cycle
    s.initialize(0.0, GaussSeidel())
    assert s.components["x"].direct_feedthrough == {"y1": {"u1"}, "y2": set()}
    assert s.analysis.loops == []
    assert [str(c) for c in s.analysis.removed] == ["g.y -> x.u2"]

    s = System("split")
    s.add_component(Split("x"))
    s.add_component(Affine("g", 0.5))
    s.connect("x.y1 -> g.u")
    s.connect("g.y -> x.u1")  # through the feedthrough path: an algebraic loop
    s.initialize(0.0, GaussSeidel())  # solved from the start value: u1 = 0.5 * u1
    assert len(s.analysis.loops) == 1
    assert s.components["x"].inputs["u1"].value == 0.0


def test_a_delay_in_the_cycle_breaks_the_algebraic_loop():
    s = System("ring")
    s.add_component(Affine("p", 0.5, 1.0))
    s.add_component(Affine("q", 0.5))
    s.add_component(Delay("d"))
    s.connect("p.y -> q.u")
    s.connect("q.y -> d.u")
    s.connect("d.y -> p.u")
    s.initialize(0.0, GaussSeidel())  # no initial value needed
    assert s.analysis.loops == []
    assert s.analysis.removed == [Connection("q", "y", "d", "u")]  # into the input without feedthrough
    assert s.analysis.levels == [["d"], ["p"], ["q"]]


def test_a_torn_input_without_initial_value_starts_from_its_start_value():
    """p.u = q.y = 0.8 (0.5 p.u + 1) + 2: the consistent point p.u = 2.8 / 0.6, found without an initial value."""
    s = System("loop")
    s.add_component(Affine("p", 0.5, 1.0))
    s.add_component(Affine("q", 0.8, 2.0))
    s.connect("p.y -> q.u")
    s.connect("q.y -> p.u")
    s.run(0.0, 0.1, 0.1, master=GaussSeidel())
    assert s.components["q"].get_history(["y"])["y"]["values"][0] == pytest.approx(2.8 / 0.6, rel=1e-9)


def test_initial_value_of_an_unknown_input_is_rejected():
    s = System("loop")
    s.add_component(Affine("p"))
    with pytest.raises(KeyError, match=r"unknown input 'uu'.*did you mean 'u'"):
        s.set_initial_value("p.uu", 0.0)
    with pytest.raises(KeyError, match=r"unknown component 'pp'"):
        s.set_initial_value("pp.u", 0.0)
    with pytest.raises(TypeError):
        s.set_initial_value("p.u", "zero")


# ---------------------------------------------------------------------- describe
def described_system() -> System:
    s = System("plant")
    s.add_component(Constant("temp", 20.0, unit="degC"))
    s.add_component(Probe("kelvin", unit="K"))
    s.add_component(Affine("p", 0.5, 1.0))
    s.add_component(Affine("q", 0.8, 2.0))
    s.add_component(Delay("d"))
    s.connect("temp.y -> kelvin.u")
    s.connect("p.y -> q.u")
    s.connect("q.y -> p.u")
    s.connect("q.y -> d.u")
    return s


def test_describe_before_initialization_finds_loops_and_missing_initial_values():
    text = described_system().describe()
    assert "System 'plant': 5 components, 4 connections" in text
    assert "  temp (Constant)" in text
    assert "out y: real [degC]" in text and "in  u: real [K]" in text
    assert "temp.y -> kelvin.u  [degC -> K: x*1+273.15]" in text
    assert "loop 1: p -> q (torn at q.y -> p.u)" in text
    assert "p.u  (its start value)" in text
    assert "Priority levels:" in text
    levels = text.split("Priority levels:")[1].strip().splitlines()
    assert levels[0].strip() == "0: p, temp"
    assert levels[1].strip() == "1: kelvin, q"
    assert levels[2].strip() == "2: d"


def test_describe_reports_the_initial_value_and_is_side_effect_free():
    s = described_system()
    s.set_initial_value("p.u", 0.25)
    text = s.describe()
    assert "p.u = 0.25" in text
    assert not any(c.is_initialized for c in s.components.values())
    r = s.run(0.0, 0.2, 0.1, master=GaussSeidel())
    assert r.stats.macro_steps == 2
    assert s.describe().count("loop 1:") == 1


def test_describe_after_adding_a_connection_is_not_stale():
    s = described_system()
    s.set_initial_value("p.u", 0.0)
    s.initialize(0.0, GaussSeidel())
    s.add_component(Probe("late"))
    s.connect("d.y -> late.u")
    text = s.describe()
    assert "d.y -> late.u" in text
    assert "3: late" in text
