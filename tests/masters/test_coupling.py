"""Coupling accuracy and data flow of the Jacobi and Gauss-Seidel masters.

A two-mass oscillator is split into two components coupled by force/displacement:
A is mass 1 on a spring to the wall driven by the coupling force F; B is mass 2 on a
spring to the wall plus the coupling spring, reading x1 and v1 and returning F
(direct feedthrough). Both integrate with many RK4 sub-steps, so the coupling error
dominates, and are compared with a monolithic ``solve_ivp`` reference.
"""

import numpy as np
import pytest
from helpers import Delay, MassA, MassB, Ramp, two_mass_rhs
from scipy.integrate import solve_ivp

from cosimrun.masters import GaussSeidel, Jacobi
from cosimrun.masters.extrapolation import mean_extrapolation
from cosimrun.system import Connection, System

PARAMS = {"m1": 1.0, "k1": 10.0, "m2": 1.0, "k2": 20.0, "kc": 15.0, "dc": 0.0}
DAMPERS = [0.0, 0.5]  # coupling damper dc: with it, B also reads v1
X0 = [1.0, 0.0, 0.0, 0.0]  # x1, v1, x2, v2
T_END = 4.0
DTS = [0.04, 0.02, 0.01, 0.005]
SCHEMES = {
    "gauss_seidel": lambda: GaussSeidel(),
    "jacobi0": lambda: Jacobi(extrapolation=0),
    "jacobi1": lambda: Jacobi(extrapolation=1),
    "jacobi2": lambda: Jacobi(extrapolation=2),
}


def oscillator(substeps: int = 20, dc: float = 0.0) -> System:
    p = dict(PARAMS, dc=dc)
    a = MassA(m1=p["m1"], k1=p["k1"], x0=X0[0], v0=X0[1])
    b = MassB(m2=p["m2"], k2=p["k2"], kc=p["kc"], dc=p["dc"], x0=X0[2], v0=X0[3])
    a.substeps = b.substeps = substeps
    s = System("two_mass")
    s.add_component(a)
    s.add_component(b)
    s.connect("A.x1 -> B.x1")
    s.connect("A.v1 -> B.v1")
    s.connect("B.F -> A.F")
    return s


def reference_solution(dc: float):
    sol = solve_ivp(two_mass_rhs(dict(PARAMS, dc=dc)), (0.0, T_END), X0, method="DOP853", rtol=1e-10,
                    atol=1e-12, dense_output=True)
    assert sol.success
    return sol.sol


@pytest.fixture(scope="module")
def errors():
    """Max-norm error of x1 and x2 over the run, per damper, scheme and dt."""
    out = {}
    for dc in DAMPERS:
        reference = reference_solution(dc)
        for name, make in SCHEMES.items():
            for dt in DTS:
                r = oscillator(dc=dc).run(0.0, T_END, dt, master=make())
                assert r.stats.macro_steps == round(T_END / dt)
                t1, x1 = r.history.get_port_trajectory("A", "x1")
                t2, x2 = r.history.get_port_trajectory("B", "x2")
                np.testing.assert_array_equal(t1, t2)
                ref = reference(t1)
                out[dc, name, dt] = max(np.max(np.abs(x1 - ref[0])), np.max(np.abs(x2 - ref[2])))
    return out


def slope(errors, dc, name) -> float:
    """Least-squares slope of log(error) over log(dt): the observed order of convergence."""
    return float(np.polyfit(np.log(DTS), np.log([errors[dc, name, dt] for dt in DTS]), 1)[0])


@pytest.mark.parametrize("dc", DAMPERS)
def test_the_split_without_coupling_error_matches_the_reference(dc):
    # with a tiny macro step the coupling error vanishes and the sub-step integration must agree
    r = oscillator(substeps=2, dc=dc).run(0.0, 0.5, 1e-3, master=Jacobi(extrapolation=2))
    t, x1 = r.history.get_port_trajectory("A", "x1")
    _, x2 = r.history.get_port_trajectory("B", "x2")
    ref = reference_solution(dc)(t)
    assert np.max(np.abs(x1 - ref[0])) < 1e-5
    assert np.max(np.abs(x2 - ref[2])) < 1e-5


@pytest.mark.parametrize("dc", DAMPERS)
@pytest.mark.parametrize("name", list(SCHEMES))
def test_coupling_error_shrinks_with_the_step(errors, name, dc):
    errs = [errors[dc, name, dt] for dt in DTS]
    assert all(e2 < 0.7 * e1 for e1, e2 in zip(errs, errs[1:], strict=False)), errs
    assert errs[-1] < 0.1  # and is small in absolute terms at the finest step


def test_gauss_seidel_beats_jacobi_at_the_same_step(errors):
    # Undamped coupling. With the damper (dc = 0.5) this split makes Gauss-Seidel about twice
    # as inaccurate as Jacobi: sequential coupling is not better in general.
    for dt in DTS:
        assert errors[0.0, "gauss_seidel", dt] < 0.8 * errors[0.0, "jacobi0", dt], dt


@pytest.mark.parametrize("dc", DAMPERS)
def test_extrapolation_raises_the_order_of_jacobi(errors, dc):
    s0, s1, s2 = (slope(errors, dc, name) for name in ("jacobi0", "jacobi1", "jacobi2"))
    assert 0.8 < s0 < 1.35, s0
    assert 1.6 < s1 < 2.5, s1
    assert s1 - s0 > 0.6
    assert s2 > 1.6, s2
    assert slope(errors, dc, "gauss_seidel") < 1.35  # sequential coupling is first order too
    for dt in DTS:
        assert errors[dc, "jacobi1", dt] < 0.5 * errors[dc, "jacobi0", dt], dt
        assert errors[dc, "jacobi2", dt] <= 1.05 * errors[dc, "jacobi1", dt], dt


# ---------------------------------------------------------------------- data flow
def delay_chain() -> System:
    s = System("chain")
    for name in ("c", "b", "a"):  # insertion order must not matter
        s.add_component(Delay(name))
    s.add_component(Ramp("src"))
    s.connect("src.y -> a.u")
    s.connect("a.y -> b.u")
    s.connect("b.y -> c.u")
    return s


def test_gauss_seidel_uses_fresh_outputs_within_the_step():
    r = delay_chain().run(0.0, 1.0, 0.1, master=GaussSeidel())
    for name in "abc":
        t, y = r.history.get_port_trajectory(name, "y")
        # each delay steps with its producer's output at the end of the step
        np.testing.assert_allclose(y[1:], t[1:], atol=1e-12)


def test_jacobi_propagates_one_step_per_component():
    r = delay_chain().run(0.0, 1.0, 0.1, master=Jacobi())
    for lag, name in enumerate("abc", start=1):
        t, y = r.history.get_port_trajectory(name, "y")
        expected = np.concatenate([np.zeros(lag), t[:-lag]])
        np.testing.assert_allclose(y, expected, atol=1e-12)


def test_cut_feedback_edge_lags_under_gauss_seidel():
    s = System("ring")
    s.add_component(Delay("a", increment=1.0))  # y(t+dt) = u(t) + 1
    s.add_component(Delay("b"))  # y(t+dt) = u(t)
    s.connect("a.y -> b.u")
    s.connect("b.y -> a.u")
    r = s.run(0.0, 0.5, 0.1, master=GaussSeidel())
    assert s.analysis.removed == [Connection("b", "y", "a", "u")]
    assert s.analysis.order == ["a", "b"]
    _, ya = r.history.get_port_trajectory("a", "y")
    _, yb = r.history.get_port_trajectory("b", "y")
    # a reads b from the start of the step (lagging), b reads a from its end (fresh)
    np.testing.assert_array_equal(ya, [0, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(yb, [0, 1, 2, 3, 4, 5])
    seen = [u for _, u in s.components["a"].seen]
    np.testing.assert_array_equal(seen, [0, 1, 2, 3, 4])

    r = s.run(0.0, 0.5, 0.1, master=Jacobi())
    _, ya = r.history.get_port_trajectory("a", "y")
    _, yb = r.history.get_port_trajectory("b", "y")
    np.testing.assert_array_equal(ya, [0, 1, 1, 2, 2, 3])
    np.testing.assert_array_equal(yb, [0, 0, 1, 1, 2, 2])


def test_gauss_seidel_extrapolates_only_the_cut_edges():
    s = System("ring")
    s.add_component(Ramp("src"))
    s.add_component(Delay("a"))
    s.add_component(Delay("b"))
    s.connect("src.y -> a.u")
    s.connect("a.y -> b.u")
    m = GaussSeidel(extrapolation=1)
    s.run(0.0, 0.5, 0.1, master=m)
    assert s.master_run.lagging == []  # an acyclic graph has nothing to extrapolate
    # a fresh input is the producer's value at the end of the step, never extrapolated
    np.testing.assert_allclose([u for _, u in s.components["a"].seen], [0.1, 0.2, 0.3, 0.4, 0.5], atol=1e-12)


def test_jacobi_extrapolation_feeds_the_mean_of_the_extrapolated_ramp():
    s = System("ramp")
    s.add_component(Ramp("src", slope=2.0))
    s.add_component(Delay("d"))
    s.connect("src.y -> d.u")
    s.run(0.0, 0.5, 0.1, master=Jacobi(extrapolation=1))
    seen = np.array(s.components["d"].seen)
    # first step: one sample only (order 0); then the exact mean of 2t over [t, t + dt]
    np.testing.assert_allclose(seen[0], [0.0, 0.0])
    np.testing.assert_allclose(seen[1:, 1], 2.0 * (seen[1:, 0] + 0.05), atol=1e-12)


# ---------------------------------------------------------------------- extrapolation formula
@pytest.mark.parametrize("h", [0.1, 0.37])
def test_mean_extrapolation_is_exact_for_polynomials_of_its_order(h):
    times = [0.0, 0.2, 0.5]  # non-uniform, newest last
    t = times[-1]

    def mean(f):  # exact mean over [t, t + h] by Simpson's rule (exact up to cubics)
        return (f(t) + 4 * f(t + h / 2) + f(t + h)) / 6

    def line(s):
        return 1.0 - 2.0 * s

    def quad(s):
        return 0.5 + s - 4.0 * s * s

    assert mean_extrapolation([t], [3.0], t, h) == 3.0
    assert mean_extrapolation(times[-2:], [line(s) for s in times[-2:]], t, h) == pytest.approx(mean(line))
    assert mean_extrapolation(times, [quad(s) for s in times], t, h) == pytest.approx(mean(quad))
    assert mean_extrapolation(times, [line(s) for s in times], t, h) == pytest.approx(mean(line))
