"""IJCSA master: Newton on algebraic loops, implicit (iterated) macro steps for strong coupling.

References: the closed-form solution of a linear loop, and a monolithic ``solve_ivp``
solution of the two-mass oscillator the co-simulation splits.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import Affine, Constant
from scipy.integrate import solve_ivp

from cosimrun.core.ode import OdeComponent
from cosimrun.errors import ConfigError, InitializationError
from cosimrun.masters import IJCSA, GaussSeidel, Jacobi, LoopConvergenceError
from cosimrun.masters.plan import Schedule
from cosimrun.storage import load_results
from cosimrun.system import System

# ---------------------------------------------------------------------------- 1. algebraic loop
C1, C2 = 0.7, -1.3


class DriftingAffine(Affine):
    """``y = a u + c + s t``: a loop whose solution moves, so every solve has work to do."""

    def __init__(self, name: str, a: float, c: float, s: float) -> None:
        super().__init__(name, a=a, c=c)
        self.slope = s

    def _update_output_states(self, t=None, event_names=()):
        t = self.t if t is None else t
        self.outputs["y"].value = self.parameters["a"] * self.inputs["u"].value + self.parameters["c"] + self.slope * t


def loop_system(a: float, b: float, s: float = 0.0) -> System:
    """``y1 = a u1 + c1 + s t``, ``y2 = b u2 + c2`` with ``u1 = y2``, ``u2 = y1``."""
    system = System("loop")
    system.add_component(DriftingAffine("one", a=a, c=C1, s=s))
    system.add_component(Affine("two", a=b, c=C2))
    system.connect("one.y", "two.u")
    system.connect("two.y", "one.u")
    system.set_initial_value("one.u", 5.0)
    system.set_initial_value("two.u", -4.0)
    return system


def loop_solution(a: float, b: float, c1: float) -> tuple[float, float]:
    y1 = (a * C2 + c1) / (1.0 - a * b)
    return y1, b * y1 + C2


@pytest.mark.parametrize(("a", "b"), [(0.5, 1.0), (-1.0, -2.0), (1.5, -2.0)], ids=["ab=0.5", "ab=2", "ab=-3"])
def test_newton_solves_a_linear_loop_exactly_in_at_most_two_iterations(a, b, monkeypatch):
    system = loop_system(a, b, s=3.0)
    master = IJCSA(loop_tolerance=1e-13)
    assert master.loop_solver == "newton"
    per_solve = []
    resolve = Schedule.resolve

    def counting_resolve(schedule, t):
        before = schedule.stats.newton_iterations
        resolve(schedule, t)
        per_solve.append(schedule.stats.newton_iterations - before)

    monkeypatch.setattr(Schedule, "resolve", counting_resolve)
    result = system.run(0.0, 0.5, 0.1, master=master)
    for comp, index in (("one", 0), ("two", 1)):
        t, y = system.history.get_port_trajectory(comp, "y")
        assert len(t) == 6
        exact = [loop_solution(a, b, C1 + 3.0 * ti)[index] for ti in t]
        np.testing.assert_allclose(y, exact, rtol=1e-12, atol=1e-12)
    # once at t0 (from the point the coupled initialization found: one sweep, no Newton update) and once per
    # communication point; the FD Jacobian of a linear loop is exact up to rounding, so one Newton update lands
    # within ~1e-9 and a second one at rounding level
    assert len(per_solve) + 1 == result.stats.loop_solves == 6
    assert all(1 <= n <= 2 for n in per_solve), per_solve
    assert result.stats.newton_iterations == sum(per_solve)
    # each solve ends with one residual evaluation after its last Newton update
    assert result.stats.loop_iterations == result.stats.newton_iterations + result.stats.loop_solves


@pytest.mark.parametrize(("a", "b"), [(-1.0, -2.0), (1.5, -2.0)], ids=["ab=2", "ab=-3"])
def test_fixed_point_iteration_fails_where_newton_converges(a, b):
    with pytest.raises(LoopConvergenceError, match=r"algebraic loop .* diverged at t=0.1"):
        loop_system(a, b, s=3.0).run(0.0, 0.5, 0.1, master=GaussSeidel())


def test_a_singular_loop_is_reported():
    with pytest.raises(InitializationError, match="singular interface Jacobian"):
        loop_system(1.0, 1.0).run(0.0, 0.1, 0.1, master=IJCSA())


# ---------------------------------------------------------------------------- 2. strong coupling
M1 = M2 = 1.0
K1 = K2 = 10.0


class MassA(OdeComponent):
    """Mass 1 on spring k1, driven by the coupling force F; outputs its displacement."""

    def __init__(self) -> None:
        super().__init__("A")
        self.add_state("x1", "m", initial=1.0)
        self.add_state("v1", "m/s")
        self.add_input("F", "N")
        self.parameters.update(substeps=20)

    def derivatives(self, t, x, u):
        return np.array([x[1], (-K1 * x[0] + u[0]) / M1])


class MassB(OdeComponent):
    """Mass 2 on spring k2, coupled to mass 1 by spring kc; outputs the coupling force (feedthrough)."""

    def __init__(self, kc: float) -> None:
        super().__init__("B")
        self.kc = kc
        self.add_state("x2", "m")
        self.add_state("v2", "m/s")
        self.add_input("x1", "m")
        self.add_output("F", "N", feedthrough=["x1"])
        self.parameters.update(substeps=20)

    def derivatives(self, t, x, u):
        return np.array([x[1], (-K2 * x[0] - self.kc * (x[0] - u[0])) / M2])

    def compute_outputs(self, t, x, u):
        return [self.kc * (x[0] - u[0])]


def oscillator(kc: float) -> System:
    system = System("osc")
    system.add_component(MassA())
    system.add_component(MassB(kc))
    system.connect("A.x1", "B.x1")
    system.connect("B.F", "A.F")
    return system


def monolithic(kc: float, t: np.ndarray) -> np.ndarray:
    def f(_, y):
        x1, v1, x2, v2 = y
        return [v1, (-K1 * x1 + kc * (x2 - x1)) / M1, v2, (-K2 * x2 - kc * (x2 - x1)) / M2]

    return solve_ivp(f, (0.0, t[-1]), [1.0, 0.0, 0.0, 0.0], method="DOP853", rtol=1e-12, atol=1e-12, t_eval=t).y


def max_error(kc: float, dt: float, master, tf: float = 1.0):
    system = oscillator(kc)
    result = system.run(0.0, tf, dt, master=master)
    t, x1 = system.history.get_port_trajectory("A", "x1")
    ref = monolithic(kc, t)
    assert len(t) == round(tf / dt) + 1
    return float(np.max(np.abs(x1 - ref[0]))), result, system


def test_iterated_steps_converge_with_second_order_and_beat_gauss_seidel():
    dts = [0.02, 0.01, 0.005]
    ijcsa = [max_error(100.0, dt, IJCSA(iterate_steps=True))[0] for dt in dts]
    gauss_seidel = [max_error(100.0, dt, GaussSeidel())[0] for dt in dts]
    slope = np.polyfit(np.log(dts), np.log(ijcsa), 1)[0]
    assert 1.8 <= slope <= 2.2, (ijcsa, slope)
    # measured: 3.3e-2, 8.4e-3, 2.1e-3 (Gauss-Seidel: 0.44, 0.21, 0.099, first order)
    assert ijcsa[-1] < 3e-3
    gs_slope = np.polyfit(np.log(dts), np.log(gauss_seidel), 1)[0]
    assert 0.8 <= gs_slope <= 1.3
    for e_ijcsa, e_gs in zip(ijcsa, gauss_seidel, strict=True):
        assert e_ijcsa < 0.1 * e_gs


def test_iterated_steps_keep_stiff_coupling_bounded_where_jacobi_blows_up():
    kc, dt = 1e4, 0.01  # coupling frequency sqrt(2 kc) ~ 141 rad/s: omega * dt ~ 1.4
    err, result, system = max_error(kc, dt, IJCSA(iterate_steps=True))
    _, x1 = system.history.get_port_trajectory("A", "x1")
    _, v1 = system.history.get_port_trajectory("A", "v1")
    _, x2 = system.history.get_port_trajectory("B", "x2")
    _, v2 = system.history.get_port_trajectory("B", "v2")
    energy = 0.5 * (M1 * v1**2 + M2 * v2**2 + K1 * x1**2 + K2 * x2**2 + kc * (x1 - x2) ** 2)
    assert np.all(np.isfinite(energy))
    # the implicit coupling does not create energy (the monolithic system conserves it)
    assert np.max(energy) <= energy[0] * 1.01
    assert np.max(np.abs(x1)) <= 1.0 + 1e-9
    for explicit in (Jacobi(), GaussSeidel()):
        system = oscillator(kc)
        system.run(0.0, 1.0, dt, master=explicit)
        _, x1 = system.history.get_port_trajectory("A", "x1")
        assert not np.max(np.abs(x1)) < 1e3  # blown up (or overflowed to inf/nan)


def test_iterated_steps_record_their_statistics():
    _, result, _ = max_error(100.0, 0.01, IJCSA(iterate_steps=True))
    s = result.stats
    assert s.macro_steps == 100
    # a linear problem: one Newton update per step (sometimes two), then the converged evaluation
    assert s.macro_steps <= s.newton_iterations <= 2 * s.macro_steps
    assert s.step_iterations == s.macro_steps + s.newton_iterations
    # every residual evaluation restarts from the step's snapshot: the iterations plus the
    # finite-difference columns (two interface variables) per Newton update
    assert s.trial_steps == s.step_iterations + 2 * s.newton_iterations
    assert s.trial_steps - s.macro_steps <= s.rollbacks <= s.trial_steps
    assert s.as_dict()["step_iterations"] == s.step_iterations


@pytest.mark.parametrize("rtol", [1e-3, 1e-4])
def test_iterated_steps_under_error_control_stay_within_the_tolerance(rtol):
    """Each implicit step is a trial of error control, its estimate the inputs' deviation from the line they were
    iterated on (local order 2): the global error stays within 10 x rtol (measured 4.0 and 4.6 x rtol) and the
    steps grow as rtol ** -1/2 (184 and 561 steps)."""
    system = oscillator(100.0)
    result = system.run(0.0, 1.0, 0.01, master=IJCSA(iterate_steps=True, step_control="error", rtol=rtol))
    t, x1 = (np.asarray(a) for a in system.history.get_port_trajectory("A", "x1"))
    error = float(np.max(np.abs(x1 - monolithic(100.0, t)[0])))
    assert error <= 10 * rtol, error
    assert result.stats.step_control == "error" and result.stats.step_rejection == "rollback"
    assert len(result.steps["time"]) == result.stats.macro_steps + result.stats.rejected_steps
    steps = {1e-3: 184, 1e-4: 561}[rtol]
    assert 0.8 * steps <= result.stats.macro_steps <= 1.25 * steps, result.stats.macro_steps


def test_iterated_steps_need_rollback_in_every_component():
    system = oscillator(100.0)
    system.add_component(Constant("offset", 0.0, unit="m"))
    needs = r"iterate_steps needs rollback in every component; offset cannot roll back"
    with pytest.raises(ConfigError, match=needs) as info:  # a ValueError, as before
        system.run(0.0, 0.1, 0.01, master=IJCSA(iterate_steps=True))
    assert info.value.key == "iterate_steps"
    # without iterate_steps the same system runs (Gauss-Seidel stepping)
    system.run(0.0, 0.1, 0.01, master=IJCSA())


def test_iterated_step_that_does_not_converge_raises():
    with pytest.raises(LoopConvergenceError, match=r"implicit step t=0 -> 0\.01 did not converge in 1 iterations"):
        oscillator(100.0).run(0.0, 0.1, 0.01, master=IJCSA(iterate_steps=True, max_step_iterations=1))


def test_an_iterated_step_that_does_not_converge_goes_on_under_warn():
    system = oscillator(100.0)
    master = IJCSA(iterate_steps=True, max_step_iterations=1, on_nonconvergence="warn")
    with pytest.warns(UserWarning) as caught:
        result = system.run(0.0, 0.1, 0.01, master=master)
    assert [str(w.message) for w in caught] == [
        "implicit step t=0 -> 0.01 did not converge in 1 iterations: residual 0.5 on B.x1, A.F; "
        "the run goes on from the best iterate (further such solves are only counted)"]
    assert result.stats.unconverged_loop_solves == result.stats.macro_steps == 10
    # one trial per step, from the inputs at the step's start held: a Jacobi step, bit for bit
    jacobi = oscillator(100.0)
    jacobi.run(0.0, 0.1, 0.01, master=Jacobi())
    for comp, port in (("A", "x1"), ("B", "x2"), ("B", "F")):
        t, y = system.history.get_port_trajectory(comp, port)
        t_ref, y_ref = jacobi.history.get_port_trajectory(comp, port)
        assert len(t) == 11 and np.array_equal(t, t_ref) and np.array_equal(y, y_ref)


@pytest.mark.slow
def test_the_command_completes_an_unconverged_iterated_run_under_warn(cosimrun, tmp_path):
    proc = cosimrun("+experiment=coupled_oscillators", "master=ijcsa", "master.iterate_steps=true",
                    "master.max_step_iterations=1", "master.on_nonconvergence=warn", "run.tf=0.01",
                    "hydra.run.dir=out")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "cosimrun: warning: implicit step t=0 -> 0.001 did not converge in 1 iterations: residual 0.11 on "
        "mass2.x_in, mass2.v_in, mass1.force; the run goes on from the best iterate (further such solves are only "
        "counted)"]
    assert "| 10 unconverged loop solves |" in proc.stdout
    results = load_results(tmp_path / "out" / "results.h5")
    assert results.stats["unconverged_loop_solves"] == results.stats["macro_steps"] == 10


def test_settings_are_validated():
    with pytest.raises(ValueError, match="step_tolerance"):
        IJCSA(step_tolerance=0.0)
    with pytest.raises(ValueError, match="max_step_iterations"):
        IJCSA(max_step_iterations=0)
