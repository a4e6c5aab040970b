"""What bounds an error-controlled step besides the coupling-error estimate (``step_control: error``).

Events: the bouncing ball (no coupled input at all) against its analytic
impact times; with rollback the step an event is handled at is at most the
first step (``rtol * run.dt``) long, without it no step exceeds ``run.dt``.
Components: a linear pendulum and a mass on a spring driven by a source,
against their analytic answers or a monolithic ``solve_ivp`` reference (DOP853,
rtol 1e-12); the target is a largest error of at most 10 x rtol of the
response's range, as in ``test_step_control.py``.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path
from typing import Any

import helpers
import numpy as np
import pytest
from helpers import Affine
from scipy.integrate import solve_ivp

from cosimrun.components.mechanics import BouncingBall, LinearPendulum, MassSpringDamper, Pendulum
from cosimrun.components.sources import Constant, Ramp, Sine
from cosimrun.core.multi import MultiComponent
from cosimrun.core.ode import OdeComponent
from cosimrun.masters import IJCSA, GaussSeidel, Jacobi, Master
from cosimrun.storage import load_results
from cosimrun.system import System

H0, E, G, DT, RTOL = 1.0, 0.8, 9.81, 0.01, 1e-4
V_REST = 1e-3
MASTERS = {"jacobi": lambda **kw: Jacobi(extrapolation=2, **kw), "gauss_seidel": GaussSeidel,
           "ijcsa": lambda **kw: IJCSA(extrapolation=1, **kw)}


def impacts() -> list[float]:
    """The analytic impacts of the ball up to its rest (the first rebound slower than ``v_rest``)."""
    v1 = math.sqrt(2 * G * H0)
    n = next(k for k in range(1, 1000) if E**k * v1 <= V_REST)
    return helpers.bounce_times(n, H0, E, G)


def ball_run(master: Master, tf: float = 5.0, extra: Any = None) -> tuple[Any, System, list[str]]:
    system = System("ball")
    ball = BouncingBall("ball")
    ball.set_parameters(h0=H0, v0=0.0, e=E, g=G, v_rest=V_REST)
    system.add_component(ball)
    if extra is not None:
        system.add_component(extra)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = system.run(0.0, tf, DT, master=master)
    return result, system, [str(w.message) for w in record if w.category is UserWarning]


@pytest.mark.parametrize("name", list(MASTERS))
def test_the_ball_bounces_on_time_under_step_control(name: str) -> None:
    master = MASTERS[name](step_control="error", rtol=RTOL)
    result, system, notices = ball_run(master)
    stats = result.stats
    delay = RTOL * DT  # the first step
    assert stats.event_delay == pytest.approx(delay, rel=1e-12)
    assert notices == [
        "step control has no coupled real input to estimate an error from; steps are limited to 0.01 s (run.dt)",
        "events are handled at the end of the step they occur in, and step control takes a step in which an event "
        "indicator crosses zero again, shorter, until it is at most 1e-06 s (the first step, rtol * run.dt): each "
        "is handled at most that late; use master=hybrid to locate them"]
    ref = impacts()
    times = [t.t for t, _, _ in result.events]
    assert len(times) == len(ref) == 38
    for t, t_ref in zip(times, ref, strict=True):
        assert t_ref <= t <= t_ref + delay + 1e-12  # handled within one first step of the crossing
    t, h = system.history.get_port_trajectory("ball", "h")
    _, v = system.history.get_port_trajectory("ball", "v")
    assert np.min(h) >= -math.sqrt(2 * G * H0) * delay  # never below the floor by more than that step's fall
    assert h[-1] == 0.0 and v[-1] == 0.0  # at rest after the last impact
    steps = result.steps
    assert steps["step"].max() <= DT * (1 + 1e-9)  # no coupled input: steps as fixed stepping would take them
    assert stats.steps_without_estimate == stats.macro_steps
    assert stats.rejected_steps == int((steps["accepted"] == 0).sum()) <= 4 * len(ref)


def test_without_rollback_steps_stay_within_run_dt_and_events_one_step_late() -> None:
    master = Jacobi(step_control="error", rtol=RTOL)
    result, system, notices = ball_run(master, tf=3.0, extra=Affine("no_rollback"))
    assert result.stats.step_rejection == "none" and result.stats.event_delay == DT
    assert notices[1] == (
        "events are handled at communication points, up to one step late, and step control keeps steps at most "
        "0.01 s (run.dt) while components have event indicators (a component cannot roll back to shorten the step "
        "an event occurs in); use master=hybrid to locate them")
    steps = result.steps["step"]
    assert steps.max() <= DT * (1 + 1e-9)
    times = [t.t for t, _, _ in result.events]
    ref = helpers.bounce_times(len(times), H0, E, G)
    assert len(times) == 6
    for t, t_ref in zip(times, ref, strict=True):
        assert t_ref <= t <= t_ref + DT
    _, h = system.history.get_port_trajectory("ball", "h")
    assert np.min(h) >= -(math.sqrt(2 * G * H0) * DT + G * DT**2 / 2)


def linear_pendulum(t: np.ndarray, q0: float, torque: float) -> np.ndarray:
    """``q(t)`` of the linear pendulum (m = L = 1) from rest at *q0* under a constant *torque*."""
    q_eq = torque / G
    return q_eq + (q0 - q_eq) * np.cos(math.sqrt(G) * t)


@pytest.mark.parametrize("model", ["linear", "nonlinear"])
@pytest.mark.parametrize("name", ["jacobi", "gauss_seidel"])
def test_a_pendulum_on_a_constant_torque_is_accurate_under_step_control(model: str, name: str) -> None:
    """The torque is constant (no coupling error to estimate): RK4 keeps its substeps of run.dt / 10."""
    rtol, q0, torque, tf = 1e-6, 0.1, 2.0, 10.0
    system = System("pendulum")
    source = Constant("torque")
    source.set_parameters(value=torque, unit="N*m")
    pendulum = (LinearPendulum if model == "linear" else Pendulum)("pendulum")
    pendulum.set_parameters(q0=q0, omega0=0.0)
    system.add_component(source)
    system.add_component(pendulum)
    system.connect("torque.y -> pendulum.torque")
    master = MASTERS[name](step_control="error", rtol=rtol)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = system.run(0.0, tf, DT, master=master)
    t, q = (np.asarray(a) for a in system.history.get_port_trajectory("pendulum", "q"))
    if model == "linear":
        ref = linear_pendulum(t, q0, torque)
    else:
        sol = solve_ivp(lambda s, y: [y[1], torque - G * math.sin(y[0])], (0.0, tf), [q0, 0.0], method="DOP853",
                        rtol=1e-12, atol=1e-14, dense_output=True).sol
        ref = sol(t)[0]
    assert t[-1] == tf
    assert np.max(np.abs(q - ref)) <= 10 * rtol * np.ptp(ref)
    assert result.stats.largest_step <= DT * (1 + 1e-9)


def driven_mass(source: Any, stiffness: float = 100.0, modes: bool = False) -> System:
    """A mass on a spring driven by *source*; *modes*: the mass is the active mode of a multi component (its
    other mode, the same mass, never becomes active)."""
    system = System("driven")
    models = []
    for name in ("mass", "spare") if modes else ("mass",):
        model = MassSpringDamper(name)
        model.set_parameters(mass=1.0, stiffness=stiffness, x0=0.0, v0=0.0)
        models.append(model)
    mass = MultiComponent("mass", {"a": models[0], "b": models[1]}, initial_mode="a") if modes else models[0]
    system.add_component(source)
    system.add_component(mass)
    system.connect(f"{source.name}.y -> mass.force")
    return system


def mass_error(system: System, force: Any, tf: float, stiffness: float = 100.0) -> float:
    """The largest error of the mass's position relative to its range, against the monolithic solution."""
    t, x = (np.asarray(a) for a in system.history.get_port_trajectory("mass", "x"))
    sol = solve_ivp(lambda s, y: [y[1], force(s) - stiffness * y[0]], (0.0, tf), [0.0, 0.0], method="DOP853",
                    rtol=1e-12, atol=1e-14, dense_output=True).sol
    assert t[-1] == tf
    return float(np.max(np.abs(x - sol(t)[0])) / np.ptp(sol(t)[0]))


@pytest.mark.parametrize("modes", [False, True], ids=["plain", "multi"])
@pytest.mark.parametrize("rtol", [1e-4, 1e-6])
def test_steps_longer_than_run_dt_keep_the_integrators_substep(rtol: float, modes: bool) -> None:
    """A slow force on a fast oscillator: the coupling allows steps far longer than run.dt, and RK4 integrates
    them by substeps of run.dt / substeps (ten substeps per step are off by 50 to 65 x rtol), also as a mode of a
    multi component."""
    tf, amplitude, frequency = 20.0, 1.0, 0.02
    source = Sine("force")
    source.set_parameters(amplitude=amplitude, frequency=frequency, unit="N")
    system = driven_mass(source, stiffness=400.0, modes=modes)
    master = Jacobi(extrapolation=2, step_control="error", rtol=rtol)
    result = system.run(0.0, tf, DT, master=master)
    assert result.stats.largest_step > 10 * DT
    error = mass_error(system, lambda s: amplitude * math.sin(2 * math.pi * frequency * s), tf, stiffness=400.0)
    assert error <= 10 * rtol, error


def test_after_a_controlled_run_fixed_steps_are_bitwise_those_of_a_fresh_system() -> None:
    source = Sine("force")
    source.set_parameters(amplitude=1.0, frequency=0.02, unit="N")
    used = driven_mass(source)
    used.run(0.0, 5.0, DT, master=Jacobi(extrapolation=2, step_control="error", rtol=1e-4))
    used.run(0.0, 5.0, 5 * DT, master=Jacobi(extrapolation=2))  # substeps of 5 * DT / 10, not DT / 10
    fresh_source = Sine("force")
    fresh_source.set_parameters(amplitude=1.0, frequency=0.02, unit="N")
    fresh = driven_mass(fresh_source)
    fresh.run(0.0, 5.0, 5 * DT, master=Jacobi(extrapolation=2))
    t_u, x_u = used.history.get_port_trajectory("mass", "x")
    t_f, x_f = fresh.history.get_port_trajectory("mass", "x")
    assert np.array_equal(t_u, t_f) and np.array_equal(x_u, x_f)


@pytest.mark.parametrize(("kind", "extrapolation"), [("constant", 0), ("ramp", 2)])
def test_an_input_the_estimate_sees_no_error_in_keeps_steps_within_run_dt(kind: str, extrapolation: int) -> None:
    """A constant force, or a ramp that extrapolation reproduces exactly: the estimate is zero and bounds nothing."""
    tf = 10.0
    if kind == "constant":
        source: Any = Constant("force")
        source.set_parameters(value=1.0, unit="N")
        force = lambda s: 1.0  # noqa: E731
    else:
        source = Ramp("force")
        source.set_parameters(slope=0.5, unit="N")
        force = lambda s: 0.5 * s  # noqa: E731
    system = driven_mass(source, stiffness=4.0)
    master = Jacobi(extrapolation=extrapolation, step_control="error", rtol=1e-6)
    result = system.run(0.0, tf, DT, master=master)
    steps = result.steps["step"]
    assert steps.max() <= DT * (1 + 1e-9)
    assert result.stats.steps_without_estimate == result.stats.macro_steps
    assert mass_error(system, force, tf, stiffness=4.0) <= 10 * 1e-6


@pytest.mark.slow
def test_the_cli_ball_under_step_control_reports_its_limits(tmp_path: Path, cosimrun) -> None:
    proc = cosimrun("+experiment=bouncing_ball", "master=gauss_seidel", "master.step_control=error",
                    f"hydra.run.dir={tmp_path}", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "step control has no coupled real input to estimate an error from; steps are limited to 0.01 s" \
        in proc.stderr
    assert "up to dt late" not in proc.stderr + proc.stdout
    assert re.search(r"complete \| master gauss_seidel \| \d+ steps \| 38 events \|.*\| steps \S+ to 0.01 s, \d+ "
                     r"rejected \|", proc.stdout), proc.stdout
    results = load_results(tmp_path / "results.h5")
    assert results.stats["event_delay"] == pytest.approx(1e-6, rel=1e-12)
    assert results.stats["steps_without_estimate"] == results.stats["macro_steps"]
    _, h = (np.asarray(a) for a in (results.to_dataframe("ball").index, results.to_dataframe("ball")["h"]))
    assert h.min() >= -math.sqrt(2 * G * H0) * 1e-6


def test_an_event_step_below_the_clocks_resolution_ends_at_its_shortest_step() -> None:
    """rtol * run.dt (1e-14 s) is shorter than the clock can step (2**-24 run.dt): the event step is the clock's
    shortest, and the run says so."""
    master = Jacobi(step_control="error", rtol=1e-12, min_step=1e-13)
    result, _, notices = ball_run(master, tf=1.0)
    delay = result.stats.event_delay
    assert delay == pytest.approx(DT * (2**-24 + 2**-40), rel=1e-9)
    assert f"until it is at most {delay:.3g} s" in notices[1]
    (event,) = result.events
    t_ref = impacts()[0]
    assert t_ref <= event[0].t <= t_ref + delay + 1e-12


PEAK = 0.255
"""The maxima of :class:`Peaks` are at k + PEAK: between two points of the grid k * run.dt."""


class Peaks(OdeComponent):
    """``x = sin(2 pi (t - PEAK) + pi / 2)``; event ``peak`` when x rises through ``level``: above it for a short
    window around each maximum (4.5 ms for level 0.9999, between two grid points), shorter than a step of run.dt."""

    def __init__(self, name: str, level: float) -> None:
        super().__init__(name)
        self.add_state("x", None, math.cos(2 * math.pi * PEAK))
        self.add_state_event("peak", lambda t, x, u: x[0] - level, direction=1)

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return np.array([-2 * math.pi * math.sin(2 * math.pi * (t - PEAK))])


def test_a_crossing_inside_a_step_that_its_end_does_not_show_is_an_event() -> None:
    """The integrator's hint reports the excursion above the level; the step is taken again to end inside it."""
    level = 0.9999
    system = System("peaks")
    system.add_component(Peaks("peaks", level))
    master = Jacobi(step_control="error", rtol=RTOL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = system.run(0.0, 5.0, DT, master=master)
    rise = PEAK - math.acos(level) / (2 * math.pi)  # the level is crossed at k + rise, k = 0..4
    times = [t.t for t, _, _ in result.events]
    assert len(times) == 5
    for k, t in enumerate(times):
        assert k + rise <= t <= k + rise + result.stats.event_delay + 1e-9
