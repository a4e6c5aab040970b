"""Algebraic loops solved at communication points: fixed point, Aitken, Newton, failures.

The loop ``y1 = a*u1 + c1 + d1*t``, ``y2 = b*u2 + c2 + d2*t`` with ``u1 = y2``, ``u2 = y1``
is built from memoryless components whose direct feedthrough is detected automatically.
Its solution is ``y1 = (a*(c2 + d2*t) + c1 + d1*t) / (1 - a*b)``.
"""

import re
import warnings

import numpy as np
import pytest
from helpers import Affine

from cosimrun.errors import InitializationError
from cosimrun.masters import GaussSeidel, Jacobi, LoopConvergenceError
from cosimrun.system import System

MASTERS = [pytest.param(Jacobi, id="Jacobi"), pytest.param(GaussSeidel, id="GaussSeidel")]
C1, C2, D1, D2 = 1.0, 2.0, 0.5, -1.5


def loop(a: float, b: float, **late) -> System:
    s = System("loop")
    s.add_component(Affine("p", a, C1, drift=D1, **late))
    s.add_component(Affine("q", b, C2, drift=D2))
    s.connect("p.y -> q.u")
    s.connect("q.y -> p.u")
    s.set_initial_value("p.u", 0.0)
    return s


def exact(a: float, b: float, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y1 = (a * (C2 + D2 * t) + C1 + D1 * t) / (1.0 - a * b)
    return y1, b * y1 + C2 + D2 * t


def check_solution(result, a, b, rtol=1e-8):
    t, y1 = result.history.get_port_trajectory("p", "y")
    _, y2 = result.history.get_port_trajectory("q", "y")
    e1, e2 = exact(a, b, t)
    np.testing.assert_allclose(y1, e1, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(y2, e2, rtol=rtol, atol=rtol)


def test_the_loop_is_detected_and_torn_once():
    s = loop(0.5, 0.8)
    s.initialize(0.0, GaussSeidel())
    (lp,) = s.analysis.loops
    assert lp.components == ["p", "q"]
    assert lp.tear_inputs == ["p.u"]


# ---------------------------------------------------------------------- fixed point
@pytest.mark.parametrize("master", MASTERS)
@pytest.mark.parametrize("solver", ["jacobi", "gauss_seidel"])
@pytest.mark.parametrize(("a", "b"), [(0.5, 0.8), (-0.9, 0.5), (0.3, -2.0)])
def test_fixed_point_converges_to_the_exact_solution(master, solver, a, b):
    r = loop(a, b).run(0.0, 1.0, 0.1, master=master(loop_solver=solver))
    check_solution(r, a, b)
    assert r.stats.loop_solves == 11  # at t0 and after each of the 10 steps
    assert r.stats.macro_steps == 10


@pytest.mark.parametrize("master", MASTERS)
def test_gauss_seidel_sweeps_need_about_half_the_jacobi_iterations(master):
    a, b = 0.5, 0.8
    jac = loop(a, b).run(0.0, 1.0, 0.1, master=master(loop_solver="jacobi")).stats
    gs = loop(a, b).run(0.0, 1.0, 0.1, master=master(loop_solver="gauss_seidel")).stats
    assert jac.loop_solves == gs.loop_solves == 11
    ratio = gs.loop_iterations / jac.loop_iterations
    assert 0.35 <= ratio <= 0.65, (gs.loop_iterations, jac.loop_iterations)


@pytest.mark.parametrize("solver", ["jacobi", "gauss_seidel"])
def test_divergent_loop_raises_naming_input_time_and_residual(solver):
    # |ab| = 0.4 until t = 0.3, then 2.0: the solve at t = 0.3 diverges
    s = loop(0.5, 0.8, a_late=2.5, t_late=0.3)
    with pytest.raises(LoopConvergenceError) as err:
        s.run(0.0, 1.0, 0.1, master=GaussSeidel(loop_solver=solver))
    message = str(err.value)
    assert "p -> q" in message
    assert re.search(r"\bt=0\.3\b", message), message
    assert re.search(r"residual \d[\d.e+]*", message), message
    expected_port = r"on input p\.u" if solver == "gauss_seidel" else r"on input [pq]\.u"
    assert re.search(expected_port, message), message


@pytest.mark.parametrize("solver", ["jacobi", "gauss_seidel", "newton"])
def test_nonconvergence_can_warn_instead(solver):
    # fixed point diverges from t = 0.3 on; Newton meets a singular Jacobian (ab = 1) there
    s = loop(0.5, 0.8, a_late=2.5 if solver != "newton" else 1.25, t_late=0.3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        r = s.run(0.0, 1.0, 0.1, master=GaussSeidel(loop_solver=solver, on_nonconvergence="warn"))
    assert r.stats.macro_steps == 10
    assert r.stats.unconverged_loop_solves == 8  # every failed solve is counted: t = 0.3, 0.4, ..., 1.0
    assert len(record) == 1 and record[0].category is UserWarning  # only the first warns (a cosimrun notice)
    assert re.search(r"algebraic loop p -> q .* at t=0\.3 .* on input [pq]\.u", str(record[0].message))
    assert "further such solves are only counted" in str(record[0].message)
    # each solve goes on from its best iterate instead of a diverged one (which reached 1e53 by t = 1)
    _, y1 = r.history.get_port_trajectory("p", "y")
    assert np.all(np.abs(y1) < 1e7)


def test_every_run_of_a_process_warns_under_the_default_filter():
    # Python's "default" action shows a warning once per location and message: a second run in the same
    # process (a sweep worker's next job) must still be told, so the notice bypasses that registry
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("default")
        for _ in range(2):
            loop(0.5, 0.8, a_late=2.5, t_late=0.3).run(0.0, 1.0, 0.1, master=GaussSeidel(on_nonconvergence="warn"))
    messages = [str(w.message) for w in record]
    assert len(messages) == 2 and messages[0] == messages[1], messages
    assert messages[0].startswith("algebraic loop p -> q diverged at t=0.3 ")


def test_converging_loop_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loop(0.5, 0.8).run(0.0, 1.0, 0.1, master=GaussSeidel(on_nonconvergence="warn"))


def test_iteration_limit_is_reported():
    s = loop(0.95, 1.0)  # converges, but slowly (the coupled initialization goes on to Newton at t0)
    with pytest.raises(LoopConvergenceError, match=r"did not converge at t=0.1 after 5 gauss_seidel iterations"):
        s.run(0.0, 1.0, 0.1, master=GaussSeidel(max_loop_iterations=5))


def test_under_relaxation_makes_an_oscillating_divergent_loop_converge():
    a, b = -1.5, 1.0  # G(x) = ab x + c: plain iteration diverges, x + 0.4 (G(x) - x) is exact at once
    with pytest.raises(LoopConvergenceError, match="diverged"):
        loop(a, b).run(0.0, 0.5, 0.1, master=GaussSeidel())
    r = loop(a, b).run(0.0, 0.5, 0.1, master=GaussSeidel(relaxation=0.4))
    check_solution(r, a, b)


# ---------------------------------------------------------------------- Aitken
@pytest.mark.parametrize("solver", ["jacobi", "gauss_seidel"])
def test_aitken_relaxation_accelerates_a_slowly_converging_loop(solver):
    a, b = 0.95, 1.0
    plain = loop(a, b).run(0.0, 0.5, 0.1, master=GaussSeidel(loop_solver=solver, max_loop_iterations=2000))
    fast = loop(a, b).run(0.0, 0.5, 0.1, master=GaussSeidel(loop_solver=solver, max_loop_iterations=2000,
                                                              aitken=True))
    # the residual tolerance leaves an error of residual / (1 - ab) = 20 residuals
    check_solution(plain, a, b, rtol=1e-7)
    check_solution(fast, a, b, rtol=1e-7)
    assert fast.stats.loop_iterations < 0.1 * plain.stats.loop_iterations
    if solver == "gauss_seidel":  # one unknown: Aitken is the secant method, exact for a linear loop
        assert fast.stats.loop_iterations <= 4 * fast.stats.loop_solves


# ---------------------------------------------------------------------- Newton
@pytest.mark.parametrize(("a", "b"), [(0.5, 0.8), (0.95, 1.0), (2.0, 0.8), (3.0, 1.5), (-4.0, 2.0), (1.0, 1.1)])
def test_newton_converges_in_at_most_two_iterations_even_where_fixed_point_fails(a, b):
    s = loop(a, b)
    first = s.run(0.0, 0.0, 0.1, master=GaussSeidel(loop_solver="newton"))  # only the solve at t0
    assert first.stats.loop_solves == 1
    assert first.stats.newton_iterations == 0  # the coupled initialization found the point already
    # the residual tolerance bounds the error by about residual * ab / (1 - ab)
    rtol = 1e-9 * max(1.0, 1.0 / abs(1.0 - a * b))
    check_solution(first, a, b, rtol)
    r = s.run(0.0, 1.0, 0.1, master=GaussSeidel(loop_solver="newton"))
    assert r.stats.loop_solves == 11
    assert 10 <= r.stats.newton_iterations <= 2 * 10  # one or two at each point after t0
    check_solution(r, a, b, rtol)


def test_newton_works_under_the_jacobi_master_too():
    r = loop(2.0, 0.8).run(0.0, 1.0, 0.1, master=Jacobi(loop_solver="newton"))
    check_solution(r, 2.0, 0.8, rtol=1e-9)


@pytest.mark.parametrize(("a", "b"), [(1.0, 1.0), (2.0, 0.5), (-0.25, -4.0)])
def test_singular_interface_jacobian_gives_a_clear_error(a, b):
    # detected at once, before a step towards a huge x that a relative tolerance might accept; at t0 by the
    # coupled initialization, later by the loop solve of the run (the gain a from t = 0.3 on)
    with pytest.raises(InitializationError, match=r"singular interface Jacobian"):
        loop(a, b).run(0.0, 1.0, 0.1, master=GaussSeidel(loop_solver="newton"))
    with pytest.raises(LoopConvergenceError,
                       match=r"singular interface Jacobian .* at t=0.3 after 0 newton iterations: .* on input p\.u"):
        loop(a / 2, b, a_late=a, t_late=0.3).run(0.0, 1.0, 0.1, master=GaussSeidel(loop_solver="newton"))


# ---------------------------------------------------------------------- settings
def test_loop_settings_are_validated():
    with pytest.raises(ValueError, match=r"loop_solver: 'newtn' is not valid; did you mean 'newton'"):
        GaussSeidel(loop_solver="newtn")
    with pytest.raises(ValueError, match="on_nonconvergence"):
        Jacobi(on_nonconvergence="ignore")
    with pytest.raises(ValueError, match="loop_tolerance"):
        Jacobi(loop_tolerance=0.0)
    with pytest.raises(ValueError, match="max_loop_iterations"):
        Jacobi(max_loop_iterations=0)
    assert Jacobi().loop_solver == "jacobi" and GaussSeidel().loop_solver == "gauss_seidel"
