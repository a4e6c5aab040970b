"""`System`: building, initialization, `run` results, re-running, inputs through `set_inputs`."""

import numpy as np
import pytest
from helpers import Affine, Constant, Delay, MassA, MassB, Probe, Ramp, StoringInputs

from cosimrun.masters import GaussSeidel, Jacobi, MasterStats
from cosimrun.system import RunResult, System

MASTERS = [pytest.param(Jacobi, id="jacobi"), pytest.param(GaussSeidel, id="gauss_seidel")]


def oscillator() -> System:
    s = System("osc")
    s.add_component(MassA())
    s.add_component(MassB())
    s.connect("A.x1 -> B.x1")
    s.connect("A.v1 -> B.v1")
    s.connect("B.F -> A.F")
    return s


# ---------------------------------------------------------------------- building
def test_component_names_are_unique_and_components_are_checked():
    s = System("sys")
    s.add_component(Affine("pump"))
    with pytest.raises(ValueError, match="already has a component named 'pump'"):
        s.add_component(Affine("pump"))
    with pytest.raises(TypeError, match="expected a CoSimComponent"):
        s.add_component(object())
    with pytest.raises(KeyError, match=r"unknown component 'pmup'.*did you mean 'pump'"):
        s.get_component("pmup")


# ---------------------------------------------------------------------- initialization
def test_initialize_makes_a_feedthrough_chain_consistent_at_t0():
    s = System("chain")
    s.add_component(Affine("g2", 3.0, 1.0))  # added first: order must not depend on insertion
    s.add_component(Affine("g1", 2.0))
    s.add_component(Constant("c", 5.0))
    s.connect("c.y -> g1.u")
    s.connect("g1.y -> g2.u")
    s.initialize(0.0, GaussSeidel())
    assert s.components["g1"].outputs["y"].value == 10.0
    assert s.components["g2"].outputs["y"].value == 31.0
    for comp in s.components.values():  # exactly one sample at t0
        t, _ = comp.history.to_arrays()
        assert t.tolist() == [0.0]


# ---------------------------------------------------------------------- run
@pytest.mark.parametrize("master", MASTERS)
def test_run_returns_a_result_with_history_and_stats(master):
    s = oscillator()
    progress = []
    m = master()
    r = s.run(0.0, 1.0, 0.1, master=m, progress=progress.append)
    assert isinstance(r, RunResult)
    assert isinstance(r.stats, MasterStats)
    assert r.stats is s.master_run.stats
    assert r.stats.macro_steps == 10
    assert r.master == master.name
    assert (r.system, r.t0, r.tf, r.dt) == ("osc", 0.0, 1.0, 0.1)
    assert r.wall_time_s >= 0.0
    assert r.history is s.history
    assert r.events == [] and r.mode_switches == []
    for comp in ("A", "B"):
        t, values = r.history.to_arrays([comp])[comp]
        assert len(t) == 11
        np.testing.assert_allclose(t, np.linspace(0.0, 1.0, 11), atol=1e-15)
        assert t[-1] == 1.0
    assert set(r.history.to_arrays(["B"])["B"][1]) == {"F", "x2"}
    assert progress and progress[-1] == 1.0
    assert progress == sorted(progress)


def test_number_of_macro_steps_counts_extra_communication_points():
    s = System("sys")
    s.add_component(Ramp("r"))
    s.add_component(Probe("p"))
    s.connect("r.y -> p.u")
    r = s.run(0.0, 1.05, 0.1, master=GaussSeidel())  # ten grid steps and a final half step
    assert r.stats.macro_steps == 11
    assert len(r.history.get_port_trajectory("p", "y")[0]) == 12


@pytest.mark.parametrize("master", MASTERS)
def test_run_twice_reinitializes_and_gives_the_same_result(master):
    s = oscillator()
    m = master()
    first = s.run(0.0, 2.0, 0.05, master=m)
    a = {c: first.history.to_arrays([c])[c] for c in ("A", "B")}
    stats = first.stats.as_dict()
    second = s.run(0.0, 2.0, 0.05, master=m)  # same master object
    third = s.run(0.0, 2.0, 0.05, master=master())  # fresh master
    for r in (second, third):
        assert r.stats.as_dict() == stats
        for c in ("A", "B"):
            t, values = r.history.to_arrays([c])[c]
            np.testing.assert_array_equal(t, a[c][0])
            for port in values:
                np.testing.assert_array_equal(values[port], a[c][1][port])


def test_switching_masters_between_runs_on_one_system():
    s = oscillator()
    j = s.run(0.0, 1.0, 0.1, master=Jacobi())
    xj = j.history.get_port_trajectory("A", "x1")[1]
    g = s.run(0.0, 1.0, 0.1, master=GaussSeidel())
    xg = g.history.get_port_trajectory("A", "x1")[1]
    assert len(xj) == len(xg) == 11
    assert not np.array_equal(xj, xg)
    j2 = s.run(0.0, 1.0, 0.1, master=Jacobi())
    np.testing.assert_array_equal(j2.history.get_port_trajectory("A", "x1")[1], xj)


def test_run_from_a_later_start_time():
    s = System("sys")
    s.add_component(Ramp("r"))
    s.add_component(Delay("d"))
    s.connect("r.y -> d.u")
    r = s.run(2.0, 2.5, 0.1, master=Jacobi())
    t, y = r.history.get_port_trajectory("d", "y")
    np.testing.assert_allclose(t, [2.0, 2.1, 2.2, 2.3, 2.4, 2.5], atol=1e-15)
    np.testing.assert_allclose(y, [0.0, 2.0, 2.1, 2.2, 2.3, 2.4], atol=1e-12)


# ---------------------------------------------------------------------- inputs through set_inputs
@pytest.mark.parametrize("master", MASTERS)
def test_component_overriding_set_inputs_receives_its_inputs_there(master):
    s = System("sys")
    s.add_component(Ramp("r", slope=2.0))
    s.add_component(StoringInputs("st", gain=3.0))
    s.add_component(Probe("p"))
    s.connect("r.y -> st.u")
    s.connect("st.y -> p.u")
    dt = 0.1
    r = s.run(0.0, 1.0, dt, master=master())
    st = s.components["st"]
    assert st.direct_feedthrough["y"] == {"u"}
    assert st.calls > 10
    t, y = r.history.get_port_trajectory("st", "y")
    np.testing.assert_allclose(y, 3.0 * 2.0 * t, atol=1e-12)  # feedthrough re-evaluated with the pushed input
    _, seen = r.history.get_port_trajectory("p", "y")
    np.testing.assert_allclose(seen, 3.0 * 2.0 * t, atol=1e-12)
    # the accumulator integrated the pushed inputs: left sums under Jacobi, right sums under Gauss-Seidel
    _, acc = r.history.get_port_trajectory("st", "s")
    k = np.arange(len(t))
    expected = 2.0 * dt * dt * (k * (k - 1) / 2 if master is Jacobi else k * (k + 1) / 2)
    np.testing.assert_allclose(acc, expected, atol=1e-12)


@pytest.mark.parametrize("solver", ["jacobi", "gauss_seidel", "newton"])
def test_loop_through_a_component_overriding_set_inputs(solver):
    s = System("sys")
    s.add_component(StoringInputs("st", gain=0.5))
    s.add_component(Affine("g", 0.8, 2.0))
    s.connect("st.y -> g.u")
    s.connect("g.y -> st.u")
    s.set_initial_value("st.u", 0.0)
    r = s.run(0.0, 0.3, 0.1, master=GaussSeidel(loop_solver=solver))
    # u = 0.8 * 0.5 * u + 2  ->  u = 2 / 0.6
    _, y = r.history.get_port_trajectory("g", "y")
    np.testing.assert_allclose(y, 2.0 / 0.6, rtol=1e-8)
    assert s.components["st"].store["u"] == pytest.approx(2.0 / 0.6, rel=1e-8)


class CountingInits(Ramp):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.inits = 0

    def _initialize_component(self, t0: float) -> None:
        self.inits += 1
        super()._initialize_component(t0)


def test_run_takes_over_a_fresh_initialize_and_reinitializes_otherwise() -> None:
    system = System("once")
    comp = system.add_component(CountingInits("src"))
    master = GaussSeidel()
    system.initialize(0.0, master)
    assert comp.inits == 1
    first = system.run(0.0, 1.0, 0.1, master=master)
    assert comp.inits == 1  # the initialization just made is used
    assert first.stats.macro_steps == 10
    system.run(0.0, 1.0, 0.1, master=master)
    assert comp.inits == 2  # a second run starts afresh
    system.initialize(0.0, master)
    system.run(0.5, 1.0, 0.1, master=master)
    assert comp.inits == 4  # initialized for another start time: initialized again
    t, _ = system.history.get_port_trajectory("src", "y")
    assert t[0] == 0.5 and len(t) == 6
