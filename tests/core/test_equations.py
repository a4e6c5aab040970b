"""EquationComponent: continuous, sampled and memoryless systems, events with updates."""

import math

import numpy as np
import pytest

from cosimrun.core.equations import EquationComponent

G = 9.81


def lag(integrator="rk4", tau=0.5):
    comp = EquationComponent(
        "lag",
        states=[("y", "V")],
        inputs=[("u", "V")],
        state_equation=lambda t, x, u: (u - x) / tau,
        initial_state=[0.2],
    )
    comp.set_parameters(integrator=integrator)
    return comp


@pytest.mark.parametrize("integrator", ["rk4", "rk45"])
def test_continuous_first_order_lag_matches_analytic(integrator):
    comp = lag(integrator)
    comp.initialize(0.0)
    comp.set_inputs({"u": 1.0})
    dt = 0.1
    errors = []
    for k in range(30):
        comp.do_step(k * dt, dt)
        t = (k + 1) * dt
        errors.append(abs(comp.get_outputs()["y"] - (1.0 - 0.8 * math.exp(-t / 0.5))))
    assert max(errors) < 1e-6
    assert comp.direct_feedthrough == {"y": set()}
    assert comp.next_time_event(0.3) is None and comp.max_step is None
    assert comp.get_state() == {"y": {"value": comp.get_outputs()["y"], "unit": "V"}}


def accumulator(**kwargs):
    return EquationComponent(
        "acc",
        states=["s"],
        inputs=["u"],
        state_equation=lambda t, x, u: x + u,
        output_equation=lambda t, x: [10.0 * x[0]],
        outputs=["y"],
        dt=0.1,
        **kwargs,
    )


@pytest.mark.parametrize("macro", [0.1, 0.05, 0.025])
def test_sampled_accumulator_matches_exact_sequence(macro):
    # y_k = 10 s_k, s_{k+1} = s_k + u_k, with u_k = k + 1 sampled at t_k = 0.1 k.
    comp = accumulator(initial_state=[2.0])
    comp.initialize(0.0)
    per_sample = round(0.1 / macro)
    s = [2.0]
    for k in range(8):
        s.append(s[-1] + (k + 1))
    t = 0.0
    for k in range(8):
        for j in range(per_sample):
            if j == 0:
                comp.set_inputs({"u": float(k + 1)})
            else:
                comp.set_inputs({"u": -100.0})  # between samples: must be ignored
            comp.do_step(t, macro)
            t = 0.1 * k + (j + 1) * macro
            expected = s[k + 1] if j == per_sample - 1 else s[k]  # held until the next sample
            assert comp.get_outputs()["y"] == pytest.approx(10.0 * expected, abs=1e-12)
    assert comp.get_state()["s"]["value"] == pytest.approx(s[8])


def test_sampled_timing():
    comp = accumulator()
    assert comp.max_step == 0.1
    comp.initialize(0.0)
    assert comp.next_time_event(0.0) == pytest.approx(0.1)
    assert comp.next_time_event(0.05) == pytest.approx(0.1)
    assert comp.next_time_event(0.1) == pytest.approx(0.2)
    assert comp.next_time_event(0.30000000000000004) == pytest.approx(0.4)
    assert comp.next_time_event(0.29999999999999993) == pytest.approx(0.4)
    assert comp.next_time_event(1.23) == pytest.approx(1.3)
    assert comp.direct_feedthrough == {"y": set()}


def test_sampled_rollback_is_bit_for_bit():
    comp = accumulator(initial_state=[0.5])
    comp.initialize(0.0)

    def go(t0):
        out = []
        for k in range(7):
            t = t0 + 0.05 * k
            comp.set_inputs({"u": math.sin(t)})
            comp.do_step(t, 0.05)
            out.append(comp.get_outputs()["y"])
        return out

    go(0.0)
    t1 = comp.t
    snap = comp.snapshot_state()  # a sample update is pending here
    first = go(t1)
    comp.restore_state(snap, t1)
    assert go(t1) == first


def test_memoryless_output_is_feedthrough():
    comp = EquationComponent(
        "mix",
        inputs=[("a", "m"), ("b", "m")],
        outputs=[("sum", "m"), ("diff", "m")],
        output_equation=lambda t, u: (u[0] + u[1], u[0] - u[1]),
    )
    comp.initialize(0.0)
    assert comp.direct_feedthrough == {"sum": {"a", "b"}, "diff": {"a", "b"}}
    assert comp.evaluate_outputs({"a": 3.0, "b": 1.0}) == {"sum": 4.0, "diff": 2.0}
    comp.do_step(0.0, 0.1)
    assert comp.get_outputs() == {"sum": 4.0, "diff": 2.0}
    assert comp.get_state() == {}


def test_sampled_memoryless_holds_input():
    comp = EquationComponent("zoh", inputs=1, outputs=1, output_equation=lambda t, u: u[0], dt=0.1)
    comp.initialize(0.0)
    comp.set_inputs({"u": 1.0})
    assert comp.evaluate_outputs({}) == {"y": 1.0}  # at a sample instant: live
    comp.do_step(0.0, 0.05)
    comp.set_inputs({"u": 5.0})
    assert comp.evaluate_outputs({}) == {"y": 1.0}  # between samples: held
    comp.do_step(0.05, 0.05)
    assert comp.evaluate_outputs({}) == {"y": 5.0}  # next sample sees the new input


def test_feedthrough_output_equation_with_state():
    comp = EquationComponent(
        "pi",
        states=["i"],
        inputs=["e"],
        outputs=["u"],
        state_equation=lambda t, x, u: u,
        output_equation=lambda t, x, u: [2.0 * u[0] + 0.5 * x[0]],
        feedthrough=True,
    )
    comp.initialize(0.0)
    assert comp.direct_feedthrough == {"u": {"e"}}
    comp.set_inputs({"e": 1.0})
    comp.do_step(0.0, 1.0)
    assert comp.get_outputs()["u"] == pytest.approx(2.0 + 0.5)


def bouncing_ball(integrator, h0=1.0, e=0.8):
    comp = EquationComponent(
        "ball",
        states=[("h", "m"), ("v", "m/s")],
        state_equation=lambda t, x, u: np.array([x[1], -G]),
        event_equation=lambda t, x: x[0],
        update_equation=lambda t, x: np.array([0.0, -e * x[1]]),
        event_name="bounce",
        event_direction=-1,
        initial_state=[h0, 0.0],
    )
    comp.set_parameters(integrator=integrator)
    return comp


def step_with_hints(comp, t, dt):
    """What a hybrid master does: step; on a hint roll back, step to the bracket's end, handle."""
    found = []
    t_end = t + dt
    while t < t_end:
        snap = comp.snapshot_state()
        comp.do_step(t, t_end - t)
        hints = comp.get_internal_event_hints()
        if not hints:
            break
        hint = min(hints, key=lambda h: h.t_before)
        assert t <= hint.t_before < hint.t_after <= t_end
        comp.restore_state(snap, t)
        comp.do_step(t, hint.t_after - t)
        comp.get_internal_event_hints()
        comp.handle_event([hint.event_name], hint.t_after)
        found.append(hint)
        t = hint.t_after
    return found


def ball_height(t, h0, e):
    """Analytic height of a ball dropped from h0 bouncing with restitution e."""
    v = math.sqrt(2 * G * h0)
    t_impact = math.sqrt(2 * h0 / G)
    if t < t_impact:
        return h0 - G * t * t / 2
    while True:
        v *= e
        flight = 2 * v / G
        if t < t_impact + flight:
            s = t - t_impact
            return v * s - G * s * s / 2
        t_impact += flight


@pytest.mark.parametrize(("integrator", "tol", "h_tol"), [("rk45", 1e-4, 1e-4), ("rk4", 2e-2, 0.1)])
def test_bouncing_ball_with_event_and_update(integrator, tol, h_tol):
    # Events are handled at the end of the hint's bracket (RK4: one sub-step late at most).
    h0, e = 1.0, 0.8
    comp = bouncing_ball(integrator, h0, e)
    comp.initialize(0.0)
    dt = 0.05
    hints, errors = [], []
    for k in range(40):
        hints += step_with_hints(comp, k * dt, dt)
        errors.append(abs(comp.get_outputs()["h"] - ball_height((k + 1) * dt, h0, e)))
    t1 = math.sqrt(2 * h0 / G)
    t2 = t1 + 2 * e * math.sqrt(2 * G * h0) / G
    t3 = t2 + 2 * e * e * math.sqrt(2 * G * h0) / G
    assert [h.event_name for h in hints] == ["bounce"] * 3
    assert hints[0].t_before <= t1 <= hints[0].t_after
    assert hints[0].t_after == pytest.approx(t1, abs=tol)
    assert hints[1].t_after == pytest.approx(t2, abs=3 * tol)
    assert hints[2].t_after == pytest.approx(t3, abs=5 * tol)
    assert max(errors) < h_tol


def test_memoryless_event_update_runs_for_side_effects():
    calls = []
    comp = EquationComponent(
        "cmp",
        inputs=["u"],
        outputs=["y"],
        output_equation=lambda t, u: u[0] > 0,
        event_equation=lambda t, u: u[0],
        update_equation=lambda t, u: calls.append((t, u[0])),
    )
    comp.initialize(0.0)
    comp.set_inputs({"u": -1.0})
    assert comp.evaluate_event_indicators() == {"event": -1.0}
    comp.handle_event(["event"], 0.5)
    assert calls == [(0.5, -1.0)]


def test_default_names_and_dimensions():
    comp = EquationComponent("ss", dim_state=2, inputs=1, state_equation=lambda t, x, u: -x)
    assert comp.state_names == ("x0", "x1")
    assert comp.input_names == ("u",)
    assert (comp.dim_state, comp.dim_input, comp.dim_output) == (2, 1, 2)
    assert comp.parameters["x00"] == 0.0 and comp.parameters["x10"] == 0.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dim_state": 1}, "needs a state_equation"),
        ({"state_equation": lambda t, x, u: x}, "dim_state is 0"),
        ({"inputs": 1}, "needs an output_equation"),
        ({"dim_state": 1, "state_equation": lambda t, x, u: x, "outputs": 1}, "without an output_equation"),
        ({"output_equation": lambda t, u: u}, "declare the outputs"),
        ({"dim_state": 2, "states": ["a"], "state_equation": lambda t, x, u: x}, "dim_state=2 but 1"),
        ({"dim_state": 1, "state_equation": lambda t, x, u: x, "initial_state": [1, 2]}, "2 values for 1 states"),
        ({"dim_state": 1, "state_equation": lambda t, x, u: x, "dt": -1.0}, "dt must be"),
        ({"dim_state": 1, "state_equation": lambda t, x, u: x, "update_equation": lambda t, x: x}, "event_equation"),
    ],
)
def test_constructor_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EquationComponent("bad", **kwargs)


def test_wrong_state_equation_shape_is_reported():
    comp = EquationComponent("bad", dim_state=2, state_equation=lambda t, x, u: 1.0, dt=0.1)
    comp.initialize(0.0)
    with pytest.raises(ValueError, match=r"state_equation returned shape \(\)"):
        comp.do_step(0.0, 0.1)
