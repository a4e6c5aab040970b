"""OdeComponent: integrators against analytic solutions, rollback, hooks, event hints, state, feedthrough."""

import math

import numpy as np
import pytest

from cosimrun.core.ode import INTEGRATORS, OdeComponent

G = 9.81


class Oscillator(OdeComponent):
    """x'' = -w^2 x + f, with an explicit output (energy) and an input-dependent one (f * v)."""

    def __init__(self, name="osc", w=2.0, **params):
        super().__init__(name)
        self.parameters["w"] = w
        self.add_state("x", "m", initial=1.0)
        self.add_state("v", "m/s")
        self.add_input("f", "m/s**2")
        self.set_parameters(**params)

    def derivatives(self, t, x, u):
        w = self.parameters["w"]
        return np.array([x[1], -w * w * x[0] + u[0]])


class Ball(OdeComponent):
    """Free fall from h0 with a 'ground' event (falling crossings of h = 0) that bounces."""

    def __init__(self, name="ball", h0=1.0, restitution=0.8, **params):
        super().__init__(name)
        self.add_state("h", "m", initial=h0)
        self.add_state("v", "m/s")
        self.add_state_event("ground", lambda t, x, u: x[0], direction=-1,
                             update=lambda t, x, u: [0.0, -restitution * x[1]])
        self.set_parameters(**params)

    def derivatives(self, t, x, u):
        return np.array([x[1], -G])


class Actuator(OdeComponent):
    """x' = u; y = 2 x + 3 u (feedthrough), z = x (no feedthrough)."""

    def __init__(self, name="act", declare=None):
        super().__init__(name)
        self.add_state("x", initial=0.5, output=False)
        self.add_input("u", default=1.0)
        self.add_output("y", feedthrough=declare)
        self.add_output("z", feedthrough=False if declare is not None else None)

    def derivatives(self, t, x, u):
        return np.array([u[0]])

    def compute_outputs(self, t, x, u):
        return (2.0 * x[0] + 3.0 * u[0], x[0])


def run(comp, t0, dt, n, inputs=None):
    """Step *n* macro steps; returns the output dicts after each step."""
    out = []
    t = t0
    for k in range(n):
        if inputs is not None:
            comp.set_inputs(inputs(k, t), t)
        comp.do_step(t, dt)
        t = t0 + (k + 1) * dt
        out.append(comp.get_outputs())
    return out


# ---------------------------------------------------------------------- accuracy
def test_rk45_matches_harmonic_oscillator():
    osc = Oscillator(integrator="rk45", rtol=1e-9, atol=1e-12)
    osc.initialize(0.0)
    dt, n = 0.1, 100
    outs = run(osc, 0.0, dt, n)
    t = dt * np.arange(1, n + 1)
    x = np.array([o["x"] for o in outs])
    v = np.array([o["v"] for o in outs])
    assert np.max(np.abs(x - np.cos(2.0 * t))) < 1e-7
    assert np.max(np.abs(v + 2.0 * np.sin(2.0 * t))) < 2e-7


@pytest.mark.parametrize("integrator", [m for m in INTEGRATORS if m != "rk4"])
def test_every_adaptive_method_is_accurate(integrator):
    osc = Oscillator(integrator=integrator, rtol=1e-8, atol=1e-10)
    osc.initialize(0.0)
    run(osc, 0.0, 0.1, 20)
    assert osc.get_outputs()["x"] == pytest.approx(math.cos(4.0), abs=1e-5)


def rk4_error(substeps, dt=0.1, tf=5.0, **params):
    osc = Oscillator(integrator="rk4", substeps=substeps, **params)
    osc.initialize(0.0)
    n = round(tf / dt)
    run(osc, 0.0, dt, n)
    return abs(osc.get_outputs()["x"] - math.cos(2.0 * tf))


def test_rk4_is_fourth_order():
    e2, e4, e8 = rk4_error(2), rk4_error(4), rk4_error(8)
    assert 12.0 < e2 / e4 < 20.0
    assert 12.0 < e4 / e8 < 20.0


def test_max_substep_refines_rk4():
    # max_substep = dt / 8 gives 8 sub-steps where substeps asks for only 2.
    assert rk4_error(2, max_substep=0.1 / 8) == rk4_error(8)


def test_input_is_held_over_the_step():
    # x' = v, v' = f (w = 0): constant f gives x = x0 + f t^2 / 2 exactly with RK4.
    osc = Oscillator(w=0.0)
    osc.initialize(0.0)
    osc.set_inputs({"f": 2.0})
    run(osc, 0.0, 0.25, 4)
    assert osc.get_outputs()["x"] == pytest.approx(1.0 + 1.0, abs=1e-12)
    assert osc.get_outputs()["v"] == pytest.approx(2.0, abs=1e-12)


# ---------------------------------------------------------------------- rollback
@pytest.mark.parametrize("integrator", ["rk4", "rk45", "radau"])
def test_snapshot_restore_is_bit_for_bit(integrator):
    # Tight tolerances make the adaptive solvers take several steps per macro step,
    # so the step size carried between macro steps matters.
    osc = Oscillator(integrator=integrator, rtol=1e-10, atol=1e-12)
    osc.initialize(0.0)

    def forcing(k, t):
        return {"f": math.sin(3.0 * t) + 0.1 * k}

    run(osc, 0.0, 0.05, 7, forcing)
    t1 = osc.t
    snap = osc.snapshot_state()
    first = run(osc, t1, 0.05, 6, forcing)
    osc.restore_state(snap, t1)
    assert osc.t == t1
    second = run(osc, t1, 0.05, 6, forcing)
    assert first == second  # exact equality of every float


def test_restore_brings_back_ports_and_time():
    osc = Oscillator()
    osc.initialize(0.0)
    osc.set_inputs({"f": 1.5})
    snap = osc.snapshot_state()
    before = osc.get_outputs()
    osc.set_inputs({"f": -4.0})
    osc.do_step(0.0, 0.1)
    osc.restore_state(snap, 0.0)
    assert osc.t == 0.0
    assert osc.inputs["f"].value == 1.5
    assert osc.get_outputs() == before
    assert osc.supports_rollback


def test_restore_rejects_foreign_snapshot_and_wrong_time():
    a, b = Oscillator("a"), Oscillator("b")
    a.initialize(0.0)
    b.initialize(0.0)
    with pytest.raises(ValueError, match="does not belong"):
        a.restore_state(b.snapshot_state(), 0.0)
    with pytest.raises(ValueError, match="taken at t=0.0"):
        a.restore_state(a.snapshot_state(), 1.0)


# ---------------------------------------------------------------------- hooks
class WallMass(OdeComponent):
    """Reference 003's example: a mass pushed into a wall at x = 0 (post_integrate override)."""

    def __init__(self):
        super().__init__("mass")
        self.add_state("x", "m", initial=0.1)
        self.add_state("v", "m/s")
        self.add_input("F", "N", default=-2.0)
        self.parameters["m"] = 1.0

    def derivatives(self, t, x, u):
        return np.array([x[1], u[0] / self.parameters["m"]])

    def post_integrate(self, t, x, u):
        if x[0] < 0.0:
            return np.array([0.0, 0.0])
        return None


def test_post_integrate_wall_overrides_state():
    mass = WallMass()
    mass.initialize(0.0)
    outs = run(mass, 0.0, 0.01, 100)
    xs = np.array([o["x"] for o in outs])
    assert xs.min() >= 0.0
    t_hit = math.sqrt(2 * 0.1 / 2.0)  # x = 0.1 - t^2
    k_hit = math.ceil(t_hit / 0.01)
    assert xs[k_hit - 2] > 0.0
    assert np.all(xs[k_hit:] == 0.0)
    assert outs[-1]["v"] == 0.0


class ResettingIntegrator(OdeComponent):
    """x' = 1, reset to 0 by pre_integrate at the start of every step beginning at t >= 1."""

    def __init__(self):
        super().__init__("ri")
        self.add_state("x")
        self.seen = []

    def derivatives(self, t, x, u):
        return np.ones(1)

    def pre_integrate(self, t, x, u):
        self.seen.append(t)
        return np.zeros(1) if t >= 1.0 - 1e-12 else None


def test_pre_integrate_override_then_integrates():
    comp = ResettingIntegrator()
    comp.initialize(0.0)
    outs = run(comp, 0.0, 0.25, 6)
    assert [o["x"] for o in outs] == pytest.approx([0.25, 0.5, 0.75, 1.0, 0.25, 0.25], abs=1e-12)
    assert comp.seen == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0, 1.25])


def test_hook_returning_wrong_shape_is_an_error():
    class Bad(ResettingIntegrator):
        def pre_integrate(self, t, x, u):
            return np.zeros(3)

    comp = Bad()
    comp.initialize(0.0)
    with pytest.raises(ValueError, match="pre_integrate returned shape"):
        comp.do_step(0.0, 0.1)


# ---------------------------------------------------------------------- event hints
T_GROUND = math.sqrt(2.0 / G)  # ball from h0 = 1 m


def test_rk4_hint_is_one_substep_containing_the_crossing():
    ball = Ball(integrator="rk4", substeps=10)
    ball.initialize(0.0)
    ball.do_step(0.0, 0.4)
    assert ball.get_internal_event_hints() == []
    ball.do_step(0.4, 0.1)
    (hint,) = ball.get_internal_event_hints()
    assert hint.event_name == "ground"
    assert hint.t_before <= T_GROUND <= hint.t_after
    assert hint.interval_width == pytest.approx(0.01, rel=1e-9)
    assert hint.indicator_before > 0.0 > hint.indicator_after
    assert ball.get_internal_event_hints() == []  # hints are consumed


def test_rk45_hint_is_tight():
    ball = Ball(integrator="rk45")
    ball.initialize(0.0)
    ball.do_step(0.0, 0.4)
    ball.do_step(0.4, 0.1)
    (hint,) = ball.get_internal_event_hints()
    assert hint.t_before <= T_GROUND <= hint.t_after
    assert hint.interval_width < 1e-3 * 0.1
    assert hint.indicator_before > 0.0 > hint.indicator_after


@pytest.mark.parametrize("rtol", [1e-4, 1e-6, 1e-9])
def test_rk45_hint_brackets_a_transcendental_crossing(rtol):
    # x = cos(2 t) falls through zero at pi/4; the solution is not a polynomial,
    # so the bracket must account for the integration error.
    osc = Oscillator(integrator="rk45", rtol=rtol, atol=rtol * 1e-3)
    osc.add_state_event("zero", lambda t, x, u: x[0], direction=-1)
    osc.initialize(0.0)
    run(osc, 0.0, 0.25, 4)
    (hint,) = osc.get_internal_event_hints()
    assert hint.t_before <= math.pi / 4 <= hint.t_after
    assert hint.interval_width < 0.05 * 0.25


def test_hint_respects_direction():
    osc = Oscillator(integrator="rk4")
    osc.add_state_event("rising", lambda t, x, u: x[0], direction=+1)
    osc.initialize(0.0)
    run(osc, 0.0, 0.25, 4)  # x = cos(2t) falls through 0 at pi/4 ~ 0.785
    assert osc.get_internal_event_hints() == []
    run(osc, 1.0, 0.25, 6)  # ... and rises at 3 pi/4 ~ 2.356
    (hint,) = osc.get_internal_event_hints()
    assert hint.t_before <= 3 * math.pi / 4 <= hint.t_after


def test_event_indicator_and_update():
    ball = Ball()
    ball.initialize(0.0)
    assert ball.evaluate_event_indicators() == {"ground": 1.0}
    ball.do_step(0.0, 0.2)
    h, v = ball.x
    assert ball.evaluate_event_indicators()["ground"] == h
    ball.handle_event(["ground"], 0.2)
    assert ball.get_outputs()["h"] == 0.0
    assert ball.get_outputs()["v"] == pytest.approx(-0.8 * v)
    assert ball.get_outputs()["ground"] is True


# ---------------------------------------------------------------------- physical state
class Pendulum(OdeComponent):
    def __init__(self):
        super().__init__("pend")
        self.add_state("q", "rad", initial=0.1)
        self.add_state("omega", "rad/s")

    def derivatives(self, t, x, u):
        return np.array([x[1], -G * math.sin(x[0])])


def test_get_state_format():
    p = Pendulum()
    assert p.get_state() == {"q": {"value": 0.1, "unit": "rad"}, "omega": {"value": 0.0, "unit": "rad/s"}}
    p.initialize(0.0)
    p.do_step(0.0, 0.1)
    state = p.get_state()
    assert state["q"]["value"] == p.get_outputs()["q"]


def test_set_state_converts_units():
    p = Pendulum()
    p.initialize(0.0)
    p.set_state({"q": {"value": 90.0, "unit": "deg"}, "omega": {"value": 60.0, "unit": "rpm"}}, 2.0)
    assert p.t == 2.0
    assert p.get_outputs()["q"] == pytest.approx(math.pi / 2, rel=1e-14)
    assert p.get_state()["omega"]["value"] == pytest.approx(2 * math.pi, rel=1e-14)
    p.set_state({"q": 0.5, "omega": {"value": 0.0}}, 2.0)  # plain numbers: the state's unit
    assert p.x.tolist() == [0.5, 0.0]


def test_set_state_errors():
    p = Pendulum()
    p.initialize(0.0)
    with pytest.raises(KeyError, match="unknown state 'omgea'.*did you mean 'omega'"):
        p.set_state({"q": 0.0, "omgea": 0.0}, 0.0)
    with pytest.raises(KeyError, match="missing state.*omega"):
        p.set_state({"q": {"value": 0.0, "unit": "rad"}}, 0.0)
    with pytest.raises(ValueError, match="state 'q'.*cannot convert"):
        p.set_state({"q": {"value": 1.0, "unit": "m"}, "omega": 0.0}, 0.0)


def test_set_state_before_initialize_sets_initial_parameters():
    p = Pendulum()
    p.set_state({"q": {"value": 180.0, "unit": "deg"}, "omega": 1.0}, 0.0)
    assert p.parameters["q0"] == pytest.approx(math.pi)
    p.initialize(0.0)
    assert p.get_outputs()["q"] == pytest.approx(math.pi)


# ---------------------------------------------------------------------- parameters
def test_initial_state_parameters():
    p = Pendulum()
    assert p.parameters["q0"] == 0.1 and p.parameters["omega0"] == 0.0
    p.set_parameters(q0="30 deg", omega0=2)
    assert p.parameters["q0"] == pytest.approx(math.pi / 6)
    assert p.parameters["omega0"] == 2.0
    p.initialize(0.0)
    assert p.get_outputs() == {"q": pytest.approx(math.pi / 6), "omega": 2.0}


def test_parameter_validation():
    p = Pendulum()
    with pytest.raises(ValueError, match=r"unknown integrator 'rk5'; did you mean 'rk45'.*valid: rk4, rk45"):
        p.set_parameters(integrator="rk5")
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="substeps must be an integer >= 1"):
            p.set_parameters(substeps=bad)
    for name in ("rtol", "atol", "max_substep"):
        with pytest.raises(ValueError, match=f"{name} must be a finite number > 0"):
            p.set_parameters(**{name: 0.0})
    with pytest.raises(ValueError, match="one value per state"):
        p.set_parameters(atol=[1e-6])
    with pytest.raises(ValueError, match="parameter 'q0' for state 'q'.*cannot convert"):
        p.set_parameters(q0="1 m")
    with pytest.raises(KeyError, match="unknown parameter"):
        p.set_parameters(substep=4)
    p.set_parameters(integrator="RK45", substeps=4.0, atol=[1e-8, 1e-7])
    assert p.parameters["integrator"] == "rk45"
    assert p.parameters["substeps"] == 4
    assert set(INTEGRATORS) >= {"rk4", "rk45"}


def test_declaration_errors():
    p = Pendulum()
    with pytest.raises(ValueError, match="already exists"):
        p.add_input("q")
    with pytest.raises(ValueError, match="unknown unit"):
        p.add_state("z", "meterz")
    p.initialize(0.0)
    with pytest.raises(RuntimeError, match="before initialize"):
        p.add_state("late")


# ---------------------------------------------------------------------- feedthrough
def test_feedthrough_detected_for_input_dependent_output_only():
    act = Actuator()
    act.initialize(0.0)
    assert act.direct_feedthrough["y"] == {"u"}
    assert act.direct_feedthrough["z"] == set()
    assert act.has_direct_feedthrough


def test_state_outputs_are_not_feedthrough():
    osc = Oscillator()
    osc.initialize(0.0)
    assert not osc.has_direct_feedthrough
    assert osc.direct_feedthrough == {"x": set(), "v": set()}


def test_declared_feedthrough_is_used():
    act = Actuator(declare=False)  # deliberately wrong declaration: no detection runs
    act.initialize(0.0)
    assert act.direct_feedthrough == {"y": set(), "z": set()}
    act = Actuator(declare=["u"])
    act.initialize(0.0)
    assert act.direct_feedthrough == {"y": {"u"}, "z": set()}


def test_evaluate_outputs_recomputes_from_inputs_without_stepping():
    act = Actuator()
    act.initialize(0.0)
    assert act.get_outputs() == {"y": 2 * 0.5 + 3 * 1.0, "z": 0.5}
    assert act.evaluate_outputs({"u": 2.0}) == {"y": 2 * 0.5 + 3 * 2.0, "z": 0.5}
    assert act.t == 0.0 and act.x.tolist() == [0.5]
    act.do_step(0.0, 0.5)
    assert act.get_outputs() == {"y": pytest.approx(2 * 1.5 + 6.0), "z": pytest.approx(1.5)}


def test_inputs_return_to_defaults_on_reset():
    act = Actuator()
    act.initialize(0.0)
    act.set_inputs({"u": 7.0})
    act.do_step(0.0, 1.0)
    act.reset()
    act.initialize(0.0)
    assert act.inputs["u"].value == 1.0
    assert act.x.tolist() == [0.5]
