"""DaeComponent: IDA on residuals, consistent initialization, rollback, physical state, events, hooks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from cosimrun import DaeComponent
from cosimrun.errors import SimulationError, UnknownNameError
from cosimrun.masters import Hybrid
from cosimrun.system import System

ROBER_1E11 = (0.2083340149701255e-07, 0.8333360770334713e-13, 0.9999999791665050)
"""Robertson's kinetics at t = 1e11: the reference solution of problem ROBER in the Test Set for IVP Solvers
(F. Mazzia, C. Magherini et al., University of Bari, https://archimede.uniba.it/~testset/; the problem of
Hairer & Wanner, Solving ODEs II, Sect. IV.10)."""


def rober_rhs(t: float, y: np.ndarray) -> list[float]:
    return [-0.04 * y[0] + 1e4 * y[1] * y[2], 0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2, 3e7 * y[1] ** 2]


class Robertson(DaeComponent):
    """Robertson's chemical kinetics as an index-1 DAE: the third equation is the mass balance."""

    def __init__(self, name: str, y3_guess: float = 0.0) -> None:
        super().__init__(name)
        self.add_state("y1", initial=1.0)
        self.add_state("y2")
        self.add_state("y3", initial=y3_guess, algebraic=True)

    def residuals(self, t, y, yp, u, res):
        res[0] = yp[0] + 0.04 * y[0] - 1e4 * y[1] * y[2]
        res[1] = yp[1] - 0.04 * y[0] + 1e4 * y[1] * y[2] + 3e7 * y[1] ** 2
        res[2] = y[0] + y[1] + y[2] - 1.0


class Driven(DaeComponent):
    """``p' = z``, ``0 = z - u cos t``: the algebraic state follows the (held) input at once."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.add_state("p", "m")
        self.add_state("z", "m/s", algebraic=True)
        self.add_input("u", "m/s", 1.0)
        self.add_output("p2", "m**2", feedthrough=False)

    def residuals(self, t, y, yp, u, res):
        res[0] = yp[0] - y[1]
        res[1] = y[1] - u[0] * math.cos(t)

    def compute_outputs(self, t, x, u):
        return (x[0] ** 2,)


class Falling(DaeComponent):
    """``h' = v``, ``0 = v + 1``: h falls at 1 m/s; at h = 0 it is reset to 1 m (event ``floor``)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.add_state("h", "m", initial=0.5)
        self.add_state("v", "m/s", algebraic=True)
        self.add_state_event("floor", lambda t, x, u: x[0], direction=-1,
                             update=lambda t, x, u: np.array([1.0 + x[0], x[1]]))

    def residuals(self, t, y, yp, u, res):
        res[0] = yp[0] - y[1]
        res[1] = y[1] + 1.0


def run_steps(comp: DaeComponent, times) -> None:
    for a, b in zip(times[:-1], times[1:], strict=True):
        comp.do_step(a, b - a)


def test_robertson_dae_matches_the_published_reference_at_1e11():
    comp = Robertson("rober")
    comp.set_parameters(rtol=1e-10, atol=[1e-12, 1e-16, 1e-12])
    comp.record_history = False
    comp.initialize(0.0)
    run_steps(comp, np.concatenate([[0.0], np.logspace(-6, 11, 18)]))
    y = comp.x
    # measured: relative errors 1.2e-5 (y1, y2; values near the absolute tolerance) and 3e-13 (y3)
    assert y[0] == pytest.approx(ROBER_1E11[0], rel=1e-4)
    assert y[1] == pytest.approx(ROBER_1E11[1], rel=1e-4)
    assert y[2] == pytest.approx(ROBER_1E11[2], rel=1e-11)


def test_robertson_dae_matches_radau_at_40_and_conserves_mass():
    ref = solve_ivp(rober_rhs, (0.0, 40.0), [1.0, 0.0, 0.0], method="Radau", rtol=1e-10, atol=1e-14).y[:, -1]
    comp = Robertson("rober")
    comp.set_parameters(rtol=1e-8, atol=[1e-10, 1e-14, 1e-10])
    comp.initialize(0.0)
    run_steps(comp, np.linspace(0.0, 40.0, 41))
    # measured: relative errors below 3e-8
    assert comp.x == pytest.approx(ref, rel=1e-6)
    assert comp.x.sum() == pytest.approx(1.0, abs=1e-14)
    t, out = comp.get_history_arrays()
    assert len(t) == 41 and out["y3"][0] == pytest.approx(0.0, abs=1e-15)


def test_calc_ic_corrects_the_algebraic_guess_and_the_derivatives():
    comp = Robertson("rober", y3_guess=0.3)
    assert comp.algebraic_indices == (2,)
    assert comp.yp.tolist() == [0.0, 0.0, 0.0]
    comp.initialize(0.0)
    assert comp.x.tolist()[:2] == [1.0, 0.0]  # the differential states stay as given
    assert comp.x[2] == pytest.approx(0.0, abs=1e-14)
    assert comp.yp == pytest.approx([-0.04, 0.04, 0.0], rel=1e-5)  # calc-IC solves to a fraction of rtol
    assert comp.outputs["y3"].value == pytest.approx(0.0, abs=1e-14)


def test_an_algebraic_state_follows_a_held_input_at_once():
    """Exact: ``p = u0 sin t`` up to t = 1, then ``p = sin 1 + u1 (sin t - sin 1)``; z jumps with u."""
    comp = Driven("d")
    comp.set_parameters(rtol=1e-10, atol=1e-12)
    comp.initialize(0.0)
    assert comp.direct_feedthrough == {"p": set(), "z": set(), "p2": set()}
    times = np.linspace(0.0, 2.0, 21)
    for a, b in zip(times[:-1], times[1:], strict=True):
        comp.set_inputs({"u": 1.0 if a < 1.0 - 1e-9 else 2.0})
        comp.do_step(a, b - a)
        exact = math.sin(b) if b <= 1.0 + 1e-9 else math.sin(1.0) + 2.0 * (math.sin(b) - math.sin(1.0))
        assert comp.x[0] == pytest.approx(exact, abs=1e-8)
        assert comp.x[1] == pytest.approx((1.0 if a < 1.0 - 1e-9 else 2.0) * math.cos(b), abs=1e-8)
        assert comp.outputs["p2"].value == pytest.approx(comp.x[0] ** 2, rel=1e-15)


def test_inconsistent_initial_conditions_fail_in_one_line_naming_the_component():
    class NoSolution(DaeComponent):
        def __init__(self, name):
            super().__init__(name)
            self.add_state("x", initial=1.0)
            self.add_state("z", algebraic=True)

        def residuals(self, t, y, yp, u, res):
            res[0] = yp[0] + y[0]
            res[1] = y[1] ** 2 + 1.0  # no real z solves it

    with pytest.raises(SimulationError) as info:
        NoSolution("plant").initialize(2.0)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("component 'plant': no consistent initial conditions at t=2.0: IDACalcIC")
    assert "algebraic states (z)" in message and "differential states (x)" in message
    assert info.value.component == "plant" and info.value.time == 2.0


def test_a_model_error_in_the_residuals_reaches_the_caller_unchanged():
    class Broken(Robertson):
        def residuals(self, t, y, yp, u, res):
            if t > 0.5:
                raise ZeroDivisionError("model says no")
            super().residuals(t, y, yp, u, res)

    comp = Broken("b")
    comp.initialize(0.0)
    with pytest.raises(ZeroDivisionError, match="model says no"):
        comp.do_step(0.0, 1.0)


def test_a_failing_step_is_one_simulation_error_line():
    class Jump(DaeComponent):
        def __init__(self, name):
            super().__init__(name)
            self.add_state("x")
            self.add_state("z", algebraic=True)

        def residuals(self, t, y, yp, u, res):
            res[0] = yp[0] - y[1]
            res[1] = y[1] - (0.0 if t < 0.5 else 1e6)  # the algebraic state jumps inside the step

    comp = Jump("jump")
    comp.initialize(0.0)
    failed = r"^component 'jump': IDA failed in \[0\.0, 1\.0\]: at t=0\.4999"
    with pytest.raises(SimulationError, match=failed) as info:
        comp.do_step(0.0, 1.0)
    assert "\n" not in str(info.value) and "corrector convergence failed" in str(info.value)
    assert info.value.component == "jump" and info.value.time == pytest.approx(0.5)


def test_rollback_restores_exactly_and_steps_again_reproducibly():
    comp = Robertson("rober")
    comp.initialize(0.0)
    comp.do_step(0.0, 0.5)
    snap = comp.snapshot_state()
    x_snap, yp_snap = comp.x.copy(), comp.yp
    comp.do_step(0.5, 0.5)
    x_continued = comp.x.copy()
    comp.restore_state(snap, 0.5)
    assert comp.t == 0.5 and comp.x.tolist() == x_snap.tolist() and comp.yp.tolist() == yp_snap.tolist()
    assert comp.outputs["y1"].value == x_snap[0]
    comp.do_step(0.5, 0.5)
    first = comp.x.copy()
    comp.restore_state(snap, 0.5)
    comp.do_step(0.5, 0.5)
    assert comp.x.tolist() == first.tolist()  # bitwise: a restored step restarts IDA the same way
    assert first == pytest.approx(x_continued, rel=1e-5)  # and agrees with the uninterrupted run
    assert comp.supports_rollback and comp.can_always_roll_back


def test_physical_state_round_trip_with_units():
    comp = Driven("d")
    comp.initialize(0.0)
    comp.do_step(0.0, 0.3)
    state = comp.get_state()
    assert state == {"p": {"value": pytest.approx(math.sin(0.3), abs=1e-6), "unit": "m"},
                     "z": {"value": pytest.approx(math.cos(0.3), abs=1e-6), "unit": "m/s"}}
    other = Driven("other")
    other.initialize(0.0)
    other.set_state(state, 0.3)
    assert other.get_state() == state and other.t == 0.3
    other.set_state({"p": {"value": 20.0, "unit": "cm"}, "z": "2 km/h"}, 0.3)
    assert other.x[0] == pytest.approx(0.2)
    other.do_step(0.3, 0.1)  # z is made consistent again (calc-IC at the restart): z = u cos t
    assert other.x[1] == pytest.approx(math.cos(0.4), abs=1e-6)
    assert other.x[0] == pytest.approx(0.2 + math.sin(0.4) - math.sin(0.3), abs=1e-6)
    with pytest.raises(UnknownNameError, match="unknown state 'q'"):
        other.set_state({"q": 1.0}, 0.4)


def test_state_event_hints_bracket_the_root_and_the_hybrid_master_locates_it():
    comp = Falling("f")
    comp.initialize(0.0)
    comp.do_step(0.0, 0.7)
    (hint,) = comp.get_internal_event_hints()
    assert hint.event_name == "floor"
    assert hint.t_before < 0.5 < hint.t_after and hint.t_after - hint.t_before < 1e-6
    assert hint.indicator_before > 0 > hint.indicator_after

    system = System("falling")
    system.add_component(Falling("f"))
    result = system.run(0.0, 2.2, 0.1, master=Hybrid(time_tolerance=1e-10))
    times = [ev[0].t for ev in result.events if ev[2] == "floor"]
    assert times == pytest.approx([0.5, 1.5], abs=2e-10)  # reset to h = 1 after each
    assert max(result.stats.event_trial_steps) <= 4  # the hint's bracket is tight


def test_pre_and_post_integrate_hooks_may_override_the_state():
    """The reference's wall: post_integrate puts the falling mass back on x = 0 and stops it."""

    class Wall(DaeComponent):
        def __init__(self, name):
            super().__init__(name)
            self.add_state("x", "m", initial=0.1)
            self.add_state("v", "m/s")
            self.add_state("a", "m/s**2", algebraic=True)
            self.calls: list[tuple[str, float]] = []

        def residuals(self, t, y, yp, u, res):
            res[:] = (yp[0] - y[1], yp[1] - y[2], y[2] + 9.81)

        def pre_integrate(self, t, x, u):
            self.calls.append(("pre", t))

        def post_integrate(self, t, x, u):
            self.calls.append(("post", t))
            if x[0] < 0:
                return np.array([0.0, 0.0, x[2]])
            return None

    comp = Wall("w")
    comp.initialize(0.0)
    for k in range(30):
        comp.do_step(0.01 * k, 0.01)
    assert comp.calls[:4] == [("pre", 0.0), ("post", 0.01), ("pre", 0.01), ("post", 0.02)]
    assert comp.x[0] == 0.0 and comp.x[1] == 0.0
    assert comp.x[2] == pytest.approx(-9.81, rel=1e-9)  # still consistent after the restarts


def test_solver_parameters_are_declared_and_checked():
    comp = Robertson("r")
    assert {"rtol", "atol", "max_substep", "y10", "y20", "y30"} <= set(comp.parameters)
    assert "integrator" not in comp.parameters and "substeps" not in comp.parameters
    assert type(comp).PARAMETERS["rtol"].default == comp.parameters["rtol"] == 1e-6
    with pytest.raises(ValueError, match="rtol must be a finite number > 0"):
        comp.set_parameters(rtol=0.0)
    with pytest.raises(ValueError, match=r"atol needs one value per state \(3\)"):
        comp.set_parameters(atol=[1e-8, 1e-8])
    comp.set_parameters(max_substep=1e-3)
    comp.initialize(0.0)
    comp.do_step(0.0, 0.01)
    assert comp.x[0] == pytest.approx(1.0 - 0.04 * 0.01, rel=1e-4)
