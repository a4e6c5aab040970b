"""Hybrid master: state events located by rollback, superdense event handling, mode switches.

Reference values are analytic (bouncing ball, clocks, ramps) or come from the
crossing condition itself (the indicator value at the located instant).
"""

from __future__ import annotations

import math
from typing import Any

import helpers
import numpy as np
import pytest

from cosimrun import CoSimComponent, DenseTime, EventIndicator, PortSpec, PortType
from cosimrun.core.multi import Hysteresis, MultiComponent, SwitchRegions
from cosimrun.core.ode import OdeComponent
from cosimrun.masters import EventLocalizationError, GaussSeidel, Hybrid
from cosimrun.system import System

H0, E, G = 1.0, 0.8, 9.81
TOL = 1e-10
DT = 0.01


# ---------------------------------------------------------------------------- components
class Ball(OdeComponent):
    """Bouncing ball: falling state event on the height, the update reverses (and damps) the velocity."""

    def __init__(self, name: str = "ball", **params: Any) -> None:
        super().__init__(name)
        self.parameters.update(e=E, g=G)
        self.add_state("h", "m", initial=H0)
        self.add_state("v", "m/s")
        self.add_state_event("bounce", lambda t, x, u: x[0], direction=-1, update=self._bounce)
        self.set_parameters(**params)

    def _bounce(self, t, x, u):
        return [x[0], -self.parameters["e"] * x[1]]

    def derivatives(self, t, x, u):
        return np.array([x[1], -self.parameters["g"]])


class Clock(OdeComponent):
    """``dtau/dt = 1`` with an arbitrary indicator of ``tau`` (and optional extra events)."""

    def __init__(self, name: str, indicator, direction: int = 0, update=None) -> None:
        super().__init__(name)
        self.add_state("tau", "s")
        self.add_state_event("tick", lambda t, x, u: indicator(x[0]), direction, update)

    def derivatives(self, t, x, u):
        return np.ones(1)


class Counter(CoSimComponent):
    """Counts the events it receives (rollback-capable, no indicators of its own)."""

    def __init__(self, name: str = "counter") -> None:
        super().__init__(name)
        self.output_specs = {"count": PortSpec("count", PortType.REAL, "out")}
        self.received: list[tuple[list[str], float]] = []
        self.steps = 0

    def _initialize_component(self, t0):
        self.count = 0
        self.received = []

    def _do_step_internal(self, t, dt):
        self.steps += 1

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["count"].value = float(self.count)

    def _handle_events_internal(self, event_names, t):
        self.received.append((list(event_names), t))
        self.count += 1

    def get_state(self):
        return {"count": {"value": self.count, "unit": None}}

    def set_state(self, state, t):
        self.count = state["count"]["value"]

    def snapshot_state(self):
        return self.count

    def restore_state(self, snapshot, t):
        self.count = snapshot
        self.t = t


class Accumulator(CoSimComponent):
    """No rollback: ``y += u * dt`` over each step (exact for inputs held over the step); logs its steps."""

    def __init__(self, name: str = "acc") -> None:
        super().__init__(name)
        self.input_specs = {"u": PortSpec("u", PortType.REAL, "in", "m/s")}
        self.output_specs = {"y": PortSpec("y", PortType.REAL, "out", "m")}
        self.log: list[tuple[float, float, float]] = []

    def _initialize_component(self, t0):
        self.y = 0.0
        self.log = []

    def _do_step_internal(self, t, dt):
        u = self.inputs["u"].value
        self.log.append((t, dt, u))
        self.y += u * dt

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["y"].value = self.y

    def get_state(self):
        return {"y": {"value": self.y, "unit": "m"}}

    def set_state(self, state, t):
        self.y = state["y"]["value"]


class LegacyIndicatorComponent(Accumulator):
    """Registers an indicator by hand, bypassing ``add_event_indicator``'s rollback check."""

    def __init__(self, name: str = "legacy") -> None:
        super().__init__(name)
        self.event_indicators["low"] = EventIndicator("low", lambda c: c.y - 1.0, 0)


class Step(CoSimComponent):
    """``y = 0`` before ``t_step`` and ``1`` from it on; announces ``t_step`` as a time event (no rollback)."""

    def __init__(self, name: str = "step", t_step: float = 0.37) -> None:
        super().__init__(name)
        self.output_specs = {"y": PortSpec("y", PortType.REAL, "out", "m/s")}
        self.t_step = t_step
        self.asked: list[float] = []

    def _initialize_component(self, t0):
        pass

    def _do_step_internal(self, t, dt):
        pass

    def _update_output_states(self, t=None, event_names=()):
        t = self.t if t is None else t
        self.outputs["y"].value = 1.0 if t >= self.t_step else 0.0

    def next_time_event(self, t):
        self.asked.append(t)
        return self.t_step if t < self.t_step else None

    def get_state(self):
        return {}

    def set_state(self, state, t):
        self.t = t


class Integrator(OdeComponent):
    def __init__(self, name: str = "int") -> None:
        super().__init__(name)
        self.add_state("x", "m")
        self.add_input("u", "m/s")

    def derivatives(self, t, x, u):
        return np.array([u[0]])


class Pendulum(OdeComponent):
    """Damped pendulum ``q'' = -g/L sin(q) - d q' + torque / (m L^2)`` (``linear``: sin q -> q)."""

    def __init__(self, name: str, linear: bool, q0: float = 0.6) -> None:
        super().__init__(name)
        self.linear = linear
        self.parameters.update(length=1.0, mass=1.0, g=9.81, damping=0.3)
        self.add_state("q", "rad", initial=q0)
        self.add_state("omega", "rad/s")
        self.add_input("torque", "N*m")

    def derivatives(self, t, x, u):
        p = self.parameters
        q, w = x
        restoring = q if self.linear else math.sin(q)
        return np.array([w, -p["g"] / p["length"] * restoring - p["damping"] * w
                         + u[0] / (p["mass"] * p["length"] ** 2)])


class Drive(OdeComponent):
    """Stateless torque source ``0.3 sin(3 t)``."""

    def __init__(self, name: str = "drive") -> None:
        super().__init__(name)
        self.add_output("tau", "N*m", feedthrough=False)

    def derivatives(self, t, x, u):
        return np.zeros(0)

    def compute_outputs(self, t, x, u):
        return [0.3 * math.sin(3.0 * t)]


# ---------------------------------------------------------------------------- helpers
def bounce_times(n: int) -> list[float]:
    """Analytic instants of the first *n* impacts of the ball of these tests."""
    return helpers.bounce_times(n, H0, E, G)


def ball_system(**params: Any) -> System:
    system = System("ball")
    system.add_component(Ball(**params))
    return system


def run_ball(n: int = 10, *, params: dict[str, Any] | None = None, system: System | None = None, **master: Any):
    """Run until half way between bounce *n* and bounce *n+1*."""
    ref = bounce_times(n + 1)
    system = system or ball_system(**(params or {}))
    result = system.run(0.0, 0.5 * (ref[n - 1] + ref[n]), DT, master=Hybrid(time_tolerance=TOL, **master))
    return system, result, ref[:n]


def port(system: System, comp: str, name: str):
    return system.history.get_component_history(comp).get_port_history(name)


def samples_at(hist, t: float) -> dict[int, float]:
    """``{micro: value}`` of the samples recorded at exactly *t*."""
    idx = np.flatnonzero(hist.time == t)
    return {int(hist.micro[i]): float(hist.values[i]) for i in idx}


# Worst-case propagation of the localization error to the analytic bounce times: a reversal
# late by d in [0, TOL] (the bracket's right end, where h is past zero) shifts bounce n by sum_k |dt_n/dd_k| * |d|; for
# e = 0.8 that sum is 1, 2.35, 2.98, 3.03, 3.44, 4.22, 5.29, 6.59, 8.09, 9.73 for n = 1..10
# (differentiating the analytic recursion). Integration adds nothing: RK4 is exact on a
# quadratic. So 10 * TOL bounds every bounce; each event is also checked locally (below).
GLOBAL_BOUND = 10 * TOL


# ---------------------------------------------------------------------------- 1. bouncing ball
@pytest.mark.parametrize(
    ("params", "master"),
    [
        ({}, {}),
        ({}, {"use_hints": False}),
        ({"integrator": "rk45"}, {}),
        ({"integrator": "rk45"}, {"use_hints": False}),
    ],
    ids=["rk4-hints", "rk4-nohints", "rk45-hints", "rk45-nohints"],
)
def test_bouncing_ball_bounce_times_match_the_analytic_ones(params, master):
    if params.get("integrator") == "rk45":
        params = {**params, "rtol": 1e-12, "atol": 1e-14}
    system, result, ref = run_ball(10, params=params, **master)
    times = [t for t, comp, name in result.events]
    assert [(comp, name) for _, comp, name in result.events] == [("ball", "bounce")] * 10
    assert all(t.micro == 0 for t, _, _ in result.events)
    # each bounce exactly once, each within the global bound of its analytic instant
    assert np.max(np.abs(np.array([t.t for t in times]) - ref)) <= GLOBAL_BOUND
    assert result.stats.events == 10
    # locally: the pre-event sample lies within one time tolerance past the crossing (h < 0,
    # h >= -|v| TOL), and the post-event sample has the reversed, damped velocity
    h, v = port(system, "ball", "h"), port(system, "ball", "v")
    for t in times:
        h_at, v_at = samples_at(h, t.t), samples_at(v, t.t)
        assert sorted(h_at) == [0, 1]
        assert -abs(v_at[0]) * TOL * 1.01 <= h_at[0] < 0.0
        assert h_at[1] == h_at[0]
        assert v_at[1] == pytest.approx(-E * v_at[0], rel=1e-14)
    # localization is cheap: Illinois (with or without hints) needs a handful of trial steps
    assert len(result.stats.event_trial_steps) == 10
    assert max(result.stats.event_trial_steps) <= 8
    assert result.stats.rollbacks > 0


def test_bisection_needs_clearly_more_trial_steps_than_illinois():
    _, illinois_hints, ref = run_ball(10)
    _, illinois, _ = run_ball(10, use_hints=False)
    _, bisection, _ = run_ball(10, use_hints=False, root_finder="bisection")
    _, bisection_hints, _ = run_ball(10, root_finder="bisection")
    for result in (illinois_hints, illinois, bisection, bisection_hints):
        assert np.max(np.abs([t.t for t, _, _ in result.events] - np.array(ref))) <= GLOBAL_BOUND
    # bisection halves dt = 0.01 down to 1e-10: log2(1e8) = 26.6 -> 27 (+1 final re-step)
    assert 26 <= bisection.stats.trial_steps_per_event <= 29
    assert illinois_hints.stats.trial_steps_per_event <= 6
    assert illinois.stats.trial_steps_per_event <= 8
    assert 3 * illinois.stats.trial_steps_per_event < bisection.stats.trial_steps_per_event
    # the integrator's hints (a bracket one RK4 sub-step wide) are used: they save bisection steps
    assert bisection_hints.stats.trial_steps_per_event <= 0.75 * bisection.stats.trial_steps_per_event


def test_settings_are_validated():
    with pytest.raises(ValueError, match="root_finder"):
        Hybrid(root_finder="newton")
    with pytest.raises(ValueError, match="time_tolerance"):
        Hybrid(time_tolerance=0.0)
    with pytest.raises(ValueError, match="max_micro_steps"):
        Hybrid(max_micro_steps=0)


# ---------------------------------------------------------------------------- 2. discontinuous indicator
@pytest.mark.parametrize("root_finder", ["illinois", "bisection"])
@pytest.mark.parametrize("use_hints", [True, False])
def test_a_bracketed_jump_is_an_event_localized_to_the_time_tolerance(root_finder, use_hints):
    t_jump = 0.3137
    system = System("jump")
    # the indicator is +-1: it never comes within any value tolerance of zero
    system.add_component(Clock("clock", lambda tau: 1.0 if tau >= t_jump else -1.0))
    result = system.run(0.0, 1.0, 0.1, master=Hybrid(time_tolerance=TOL, root_finder=root_finder,
                                                     use_hints=use_hints))
    assert [(c, n) for _, c, n in result.events] == [("clock", "tick")]
    t_e = result.events[0][0]
    assert t_e.micro == 0
    # the event instant is where the indicator has jumped, at most one tolerance after the jump
    assert t_jump <= t_e.t <= t_jump + TOL
    assert result.stats.event_trial_steps[0] <= 40


# ---------------------------------------------------------------------------- 3. superdense time
def cascade_source(name: str, t_event: float) -> OdeComponent:
    """Clock with event ``tick`` at ``t_event``; its update sets flag ``f`` to 1, which makes the
    second indicator ``flag`` (``f - 0.5``) cross at once: a cascade at micro step 1."""

    class Cascade(OdeComponent):
        def __init__(self):
            super().__init__(name)
            self.add_state("tau", "s")
            self.add_state("f")
            self.add_state_event("tick", lambda t, x, u: x[0] - t_event, 1,
                                 update=lambda t, x, u: [x[0], 1.0])
            self.add_state_event("flag", lambda t, x, u: x[1] - 0.5, 1)

        def derivatives(self, t, x, u):
            return np.array([1.0, 0.0])

    return Cascade()


def test_simultaneous_events_and_a_cascade_are_handled_at_superdense_time():
    system = System("superdense")
    system.add_component(cascade_source("a", 0.25))
    system.add_component(Clock("b", lambda tau: tau - 0.25, 1))
    result = system.run(0.0, 0.5, 0.1, master=Hybrid(time_tolerance=TOL))
    log = [(t.micro, c, n) for t, c, n in result.events]
    assert sorted(log) == [(0, "a", "tick"), (0, "b", "tick"), (1, "a", "flag")]
    instants = {t.t for t, _, _ in result.events}
    assert len(instants) == 1
    (t_e,) = instants
    # located where the indicators are past zero, at most TOL after the crossing
    assert 0.25 <= t_e <= 0.25 + TOL
    assert result.events[-1][0] == DenseTime(t_e, 1)
    # the histories hold the pre-event sample (micro 0) and one per event iteration (1, 2)
    f = port(system, "a", "f")
    assert samples_at(f, t_e) == {0: 0.0, 1: 1.0, 2: 1.0}
    assert sorted(samples_at(port(system, "b", "tau"), t_e)) == [0, 1, 2]
    for name in ("tick", "flag"):
        ev = port(system, "a", name)
        assert samples_at(ev, t_e) == {0: False, 1: name == "tick", 2: name == "flag"}
    assert result.stats.events == 3


def test_an_event_cascade_that_never_settles_raises_after_max_micro_steps():
    def toggle(t, x, u):
        return [x[0], 1.0 - x[1]]

    class Zeno(OdeComponent):
        def __init__(self):
            super().__init__("zeno")
            self.add_state("tau", "s")
            self.add_state("f")
            self.add_state_event("start", lambda t, x, u: x[0] - 0.25, 1, update=toggle)
            # every handling flips f, so this indicator crosses again at every micro step
            self.add_state_event("flip", lambda t, x, u: x[1] - 0.5, 0, update=toggle)

        def derivatives(self, t, x, u):
            return np.array([1.0, 0.0])

    system = System("zeno")
    system.add_component(Zeno())
    with pytest.raises(EventLocalizationError, match=r"more than 5 event iterations at t=0\.2[45].*zeno\.flip"):
        system.run(0.0, 0.5, 0.1, master=Hybrid(max_micro_steps=5))


# ---------------------------------------------------------------------------- 4. subscriptions
def test_event_subscribers_receive_the_event_at_its_instant():
    system = ball_system()
    counter = system.add_component(Counter())
    system.connect_event("ball.bounce", "counter")
    _, result, ref = run_ball(4, system=system)
    times = [t.t for t, _, _ in result.events]
    assert [c for _, c, _ in result.events] == ["ball"] * 4
    assert counter.received == [(["bounce"], t) for t in times]
    assert np.max(np.abs(np.array(times) - ref)) <= GLOBAL_BOUND
    count = port(system, "counter", "count")
    for k, t in enumerate(times, 1):
        assert samples_at(count, t) == {0: k - 1, 1: k}
    # trial steps were rolled back: the counter counted each bounce once
    assert count.values[-1] == 4


# ---------------------------------------------------------------------------- 5. components without rollback
def test_a_component_without_rollback_steps_passively_over_accepted_steps_only():
    system = ball_system()
    acc = system.add_component(Accumulator())
    system.connect("ball.v", "acc.u")
    assert not acc.supports_rollback
    _, result, _ = run_ball(3, system=system)
    t_end = result.tf
    event_times = [t.t for t, _, _ in result.events]
    starts = [t for t, _, _ in acc.log]
    # its steps tile [0, tf] exactly, one per accepted step: grid points and event instants
    ends = [t + dt for t, dt, _ in acc.log]
    assert starts[0] == 0.0 and ends[-1] == pytest.approx(t_end, abs=1e-15)
    assert np.allclose(starts[1:], ends[:-1], rtol=0, atol=1e-15)
    expected = sorted(set(np.round(np.arange(0.0, t_end, DT), 12)) | set(event_times))
    assert starts == pytest.approx(expected, abs=1e-12)
    # each step used the ball's velocity at its start, after event handling (the reversed one)
    v = port(system, "ball", "v")
    for t, _, u in acc.log:
        at = samples_at(v, t)
        assert u == at[max(at)]
    # output = ZOH integral of the velocity samples, to rounding
    assert acc.y == pytest.approx(sum(dt * u for _, dt, u in acc.log), rel=1e-12)
    y = port(system, "acc", "y")
    assert y.values[-1] == acc.y and len(y) == len(port(system, "ball", "h"))


def test_a_component_without_rollback_cannot_host_event_indicators():
    with pytest.raises(RuntimeError, match=r"'acc'.*cannot host event indicator 'low'.*rollback"):
        Accumulator().add_event_indicator("low", lambda c: c.y - 1.0)
    # a component that slips an indicator in anyway is refused by the master, by name
    system = ball_system()
    system.add_component(LegacyIndicatorComponent())
    system.connect("ball.v", "legacy.u")
    with pytest.raises(ValueError, match=r"component 'legacy' has event indicators but cannot roll back"):
        system.run(0.0, 0.1, DT, master=Hybrid())


# ---------------------------------------------------------------------------- 6. history
def test_history_holds_accepted_steps_only_with_micro_indices_at_events():
    system = ball_system()
    system.add_component(Counter())
    system.connect_event("ball.bounce", "counter")
    _, result, _ = run_ball(5, system=system)
    event_times = {t.t for t, _, _ in result.events}
    assert result.stats.trial_steps > result.stats.macro_steps  # trials happened ...
    grid = set(np.round(np.arange(0.0, result.tf, DT), 12).tolist()) | {round(result.tf, 12)}
    for comp in ("ball", "counter"):
        for name, hist in system.history.get_component_history(comp).get_all_histories().items():
            t, micro = hist.time, hist.micro
            dt = np.diff(t)
            assert np.all(dt >= 0), (comp, name)
            dup = np.flatnonzero(dt == 0)
            # ... but only accepted instants were recorded: grid points and event instants
            assert set(t[dup].tolist()) == event_times, (comp, name)
            assert {round(x, 12) for x in t.tolist()} == grid | {round(x, 12) for x in event_times}
            for i in dup:
                assert (micro[i], micro[i + 1]) == (0, 1), (comp, name)
            assert np.all(micro[np.isin(t, list(event_times), invert=True)] == 0)
    h = port(system, "ball", "h")
    assert len(h) == result.stats.macro_steps + 1 + len(event_times)


# ---------------------------------------------------------------------------- 7. multi-model pendulum
UP, DOWN = 0.35, 0.25


def pendulum_system(record: bool = True) -> tuple[System, MultiComponent]:
    multi = MultiComponent(
        "pendulum",
        {"linear": Pendulum("lin", linear=True), "nonlinear": Pendulum("nl", linear=False)},
        initial_mode="nonlinear",
    )
    multi.set_switch_regions(SwitchRegions.threshold("q", "linear", "nonlinear", DOWN, UP, use_abs=True))
    multi.hysteresis = Hysteresis(dwell_time=0.05)
    multi.record_switch_state = record
    system = System("pendulum")
    system.add_component(Drive())
    system.add_component(multi)
    system.connect("drive.tau", "pendulum.torque")
    return system, multi


def check_switches(result, multi: MultiComponent, at_least: int = 4) -> list[tuple[float, str]]:
    """``result.mode_switches`` agrees with the component's log, alternates, honors the dwell time
    and carries the state over unchanged; returns ``[(time, to_mode)]``."""
    switches = [(s.time, s.to_mode) for s in result.mode_switches]
    assert [s.component for s in result.mode_switches] == ["pendulum"] * len(switches)
    assert switches == [(rec["time"], rec["to_mode"]) for rec in multi.sync_events]
    modes = [m for _, m in switches]
    assert len(modes) >= at_least and modes[0] == "linear"
    assert all(a != b for a, b in zip(modes, modes[1:], strict=False))
    assert np.all(np.diff([t for t, _ in switches]) >= multi.hysteresis.dwell_time - 1e-12)
    # the physical state is carried over unchanged
    for rec in multi.sync_events:
        assert {k: v["value"] for k, v in rec["now"].items()} == {k: v["value"] for k, v in rec["retrieved"].items()}
    return switches


def test_multi_model_pendulum_switches_at_located_crossings_under_hybrid():
    system, multi = pendulum_system()
    result = system.run(0.0, 3.0, 0.01, master=Hybrid(time_tolerance=TOL))
    switches = check_switches(result, multi)
    q, omega = port(system, "pendulum", "q"), port(system, "pendulum", "omega")
    assert [(t.t, n) for t, _, n in result.events] == [
        (t, "q_down0" if m == "linear" else "q_up0") for t, m in switches
    ]
    for t, mode in switches:
        q_at, w_at = samples_at(q, t), samples_at(omega, t)
        assert sorted(q_at) == [0, 1]
        # the boundary was crossed within one time tolerance: |q| is the threshold to |omega| * TOL
        threshold = DOWN if mode == "linear" else UP
        assert abs(abs(q_at[0]) - threshold) <= abs(w_at[0]) * TOL + 1e-12
        # continuous across the switch
        assert q_at[1] == q_at[0] and w_at[1] == w_at[0]


# the notice of a master that handles events at communication points is expected here
@pytest.mark.filterwarnings("ignore:events are handled at communication points")
def test_multi_model_pendulum_switches_at_communication_points_under_gauss_seidel():
    system, multi = pendulum_system()
    result = system.run(0.0, 3.0, 0.01, master=GaussSeidel())
    switches = check_switches(result, multi)
    # the boundary crossings are events, handled at the communication point that follows them
    assert [(t.t, n) for t, _, n in result.events] == [
        (t, "q_down0" if m == "linear" else "q_up0") for t, m in switches
    ]
    t_grid, q = system.history.get_port_trajectory("pendulum", "q")
    for t, mode in switches:
        k = int(round(t / 0.01))
        assert t == pytest.approx(k * 0.01, abs=1e-12)
        i = int(np.flatnonzero(np.isclose(t_grid, t, atol=1e-12))[0])
        # the selector saw the crossing at this point, not yet at the previous one
        if mode == "linear":
            assert abs(q[i]) < DOWN <= abs(q[i - 1])
        else:
            assert abs(q[i]) > UP >= abs(q[i - 1])
    # the same crossings as the located ones, one communication step late at most
    hybrid_system, hybrid_multi = pendulum_system()
    located = hybrid_system.run(0.0, 3.0, 0.01, master=Hybrid(time_tolerance=TOL)).mode_switches
    assert [s.to_mode for s in located] == [m for _, m in switches]
    for s, (t, _) in zip(located, switches, strict=True):
        assert s.time <= t + 1e-9 and t - s.time <= 0.01 + 1e-3


def test_a_boundary_event_inside_the_dwell_window_switches_at_the_window_end():
    system, multi = pendulum_system()
    multi.hysteresis = Hysteresis(dwell_time=0.5)
    result = system.run(0.0, 3.0, 0.01, master=Hybrid(time_tolerance=TOL))
    switches = check_switches(result, multi, at_least=3)
    # |q| leaves the band upwards at ~0.794, inside the window opened by the first switch: the
    # event is logged but the switch waits for the window to close, exactly there
    (t1, m1), (t2, m2), (t3, m3) = switches[:3]
    assert (m1, m2, m3) == ("linear", "nonlinear", "linear")
    events = [(t.t, n) for t, _, n in result.events]
    assert events[0] == (t1, "q_down0") and events[1][1] == "q_up0" and t1 < events[1][0] < t1 + 0.5
    assert t2 == pytest.approx(t1 + 0.5, abs=1e-12)
    assert t3 == pytest.approx(t2 + 0.5, abs=1e-12)
    q = port(system, "pendulum", "q")
    assert abs(samples_at(q, t2)[0]) > UP


# ---------------------------------------------------------------------------- 8. time events
class RollbackStep(Step):
    def snapshot_state(self):
        return self.t

    def restore_state(self, snapshot, t):
        self.t = t


def test_a_time_event_becomes_an_exact_communication_point():
    # the step source cannot roll back, so it is passive: the integrator sees its output from the
    # start of each step, and the integral is exact only if 0.37 is a communication point
    system = System("timed")
    step = system.add_component(Step())
    system.add_component(Integrator())
    system.add_component(Ball())
    system.connect("step.y", "int.u")
    result = system.run(0.0, 1.0, 0.1, master=Hybrid())
    t, y = system.history.get_port_trajectory("step", "y")
    assert t.tolist()[:6] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.37, 0.4], abs=1e-15)
    assert t[4] == 0.37 and y[4] == 1.0 and y[3] == 0.0
    assert step.asked and result.stats.macro_steps == 10 + 1 + 1  # grid, time event, bounce
    _, x = system.history.get_port_trajectory("int", "x")
    assert x[4] == 0.0
    assert x[-1] == pytest.approx(1.0 - 0.37, abs=1e-12)
    # the ball's bounce (state event) is still located between the communication points
    assert [round(e[0].t, 9) for e in result.events] == [round(bounce_times(1)[0], 9)]


def test_a_time_event_of_a_rollback_component_lands_exactly():
    system = System("timed")
    system.add_component(RollbackStep())
    system.add_component(Ball())
    result = system.run(0.0, 1.0, 0.1, master=Hybrid())
    for comp in ("step", "ball"):
        t, _ = system.history.get_port_trajectory(comp, "y" if comp == "step" else "h")
        assert 0.37 in t.tolist()
    assert result.stats.macro_steps == 11 + 1  # ten grid steps, the time event, the bounce


def test_bounces_shorter_than_a_step_are_caught_until_the_ball_rests() -> None:
    """Late bounces last less than one macro step (and one RK4 sub-step): none is missed."""
    from cosimrun.components.mechanics import BouncingBall

    system = System("zeno")
    ball = BouncingBall("ball")
    ball.set_parameters(h0=1.0, e=0.8)
    system.add_component(ball)
    result = system.run(0.0, 5.0, 0.01, master=Hybrid(time_tolerance=1e-10))
    t, h = result.history.get_port_trajectory("ball", "h")
    g, e = 9.81, 0.8
    v1 = np.sqrt(2 * g)
    t_rest = np.sqrt(2 / g) + 2 * v1 * e / (g * (1 - e))  # sum of the geometric series of flights
    assert h.min() > -1e-9  # never through the floor
    assert h[-1] == 0.0 and ball.resting
    last_bounce = result.events[-1][0].t
    assert last_bounce == pytest.approx(t_rest, abs=2e-3)
    bounces = [ev[0].t for ev in result.events]
    flights = np.diff(bounces)
    assert np.any(flights < 0.001)  # shorter than one sub-step of the 0.01 s macro step
