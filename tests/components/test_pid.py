"""PID: proportional steady state, anti-windup, derivative filter, limits, units, validation."""

import math

import numpy as np
import pytest
from component_testing import simulate

from cosimrun.components.control import PID
from cosimrun.masters import GaussSeidel
from cosimrun.plugins import create_component
from cosimrun.system import System


def test_p_only_output_and_feedthrough():
    pid = create_component("pid", "c", {"kp": 2.0})
    pid.initialize(0.0)
    assert pid.direct_feedthrough["u"] == {"r", "y"}
    assert pid.evaluate_outputs({"r": 1.0, "y": 0.25})["u"] == pytest.approx(1.5)


def test_p_only_closed_loop_steady_value():
    sys_ = System("loop")
    sys_.add_component(create_component("constant", "ref", {"value": 1.0}))
    sys_.add_component(create_component("pid", "ctrl", {"kp": 4.0}))
    sys_.add_component(create_component("first_order_lag", "plant", {"time_constant": 0.2}))
    for c in ("ref.y -> ctrl.r", "plant.y -> ctrl.y", "ctrl.u -> plant.u"):
        sys_.connect(c)
    sys_.run(0.0, 3.0, 0.01, master=GaussSeidel())
    _, out = sys_.components["plant"].get_history_arrays()
    assert out["y"][-1] == pytest.approx(4.0 / 5.0, rel=1e-6)


def integral_after(anti_windup, **extra):
    pid = create_component("pid", "c", {"kp": 0.0, "ki": 1.0, "u_max": 0.5, "anti_windup": anti_windup, **extra})
    _, out = simulate(pid, 5.0, 0.05, inputs={"r": 1.0, "y": 0.0})
    return pid.get_state()["integral"]["value"], out["u"]


def test_anti_windup_keeps_integrator_bounded_under_saturation():
    wound, u_none = integral_after("none")
    clamped, u_clamp = integral_after("clamping")
    tracked, _ = integral_after("back_calculation", tt=0.1)
    assert wound == pytest.approx(5.0, rel=1e-9)  # integrates the error for the whole 5 s
    assert 0.5 <= clamped <= 0.5 + 0.05  # frozen within one step of reaching the limit
    assert tracked == pytest.approx(0.5 + 0.1 * 1.0, rel=1e-3)  # u_max + tt * ki * e
    assert np.max(u_none) == np.max(u_clamp) == 0.5


def test_anti_windup_recovers_faster_after_saturation():
    def overshoot(anti_windup):
        sys_ = System("loop")
        sys_.add_component(create_component("step", "ref", {"step_time": 0.0, "final": 1.0}))
        sys_.add_component(create_component("pid", "ctrl", {"kp": 2.0, "ki": 4.0, "u_min": -0.5, "u_max": 0.5,
                                                            "anti_windup": anti_windup}))
        sys_.add_component(create_component("integrator", "plant", {}))
        for c in ("ref.y -> ctrl.r", "plant.y -> ctrl.y", "ctrl.u -> plant.u"):
            sys_.connect(c)
        sys_.run(0.0, 8.0, 0.01, master=GaussSeidel())
        _, out = sys_.components["plant"].get_history_arrays()
        return out["y"].max() - 1.0

    wound = overshoot("none")
    assert wound > 0.6  # the wound-up integral overshoots badly (0.29 without limits)
    assert overshoot("clamping") < 0.2 * wound
    assert overshoot("back_calculation") < 0.3 * wound


def test_derivative_filter_step_response():
    pid = create_component("pid", "c", {"kp": 0.0, "kd": 1.0, "tf": 0.1})
    t, out = simulate(pid, 0.5, 0.01, inputs={"r": 1.0, "y": 0.0})
    # kd * s / (1 + tf * s) applied to a unit step: kd / tf * exp(-t / tf)
    assert out["u"] == pytest.approx(10.0 * np.exp(-t / 0.1), rel=1e-6)


def test_derivative_on_measurement_has_no_kick_on_reference():
    pid = create_component("pid", "c", {"kp": 1.0, "kd": 1.0, "N": 10.0, "derivative_on": "measurement"})
    pid.initialize(0.0)
    assert pid.evaluate_outputs({"r": 1.0, "y": 0.0})["u"] == pytest.approx(1.0)
    pid2 = create_component("pid", "c2", {"kp": 1.0, "kd": 1.0, "N": 10.0})
    pid2.initialize(0.0)
    # default tf = (kd / kp) / N = 0.1: the derivative kicks with kd / tf = 10
    assert pid2.evaluate_outputs({"r": 1.0, "y": 0.0})["u"] == pytest.approx(11.0)


def test_pid_units_convert_in_a_system():
    sys_ = System("u")
    sys_.add_component(create_component("constant", "ref", {"value": 90.0, "unit": "deg"}))
    sys_.add_component(create_component("pid", "ctrl", {"kp": 2.0, "input_unit": "rad", "output_unit": "N*m"}))
    sys_.add_component(create_component("pendulum", "p", {}))
    sys_.connect("ref.y -> ctrl.r")
    sys_.connect("p.q -> ctrl.y")
    sys_.connect("ctrl.u -> p.torque")
    sys_.initialize(0.0, GaussSeidel())
    assert sys_.components["ctrl"].outputs["u"].value == pytest.approx(2.0 * math.pi / 2)
    assert sys_.components["ctrl"].get_state()["integral"]["unit"] == "N*m"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"u_min": 1.0, "u_max": 0.0}, r"parameter 'u_min' must be <= u_max = 0.0, got 1.0"),
        ({"kp": 0.0, "kd": 1.0}, r"parameter 'tf' must be set when kd != 0 and kp == 0"),
        ({"kp": 0.0, "ki": 1.0, "anti_windup": "back_calculation"}, r"parameter 'tt' must be set"),
        ({"anti_windup": "clamp"}, r"^anti_windup: 'clamp' is not one of clamping, back_calculation, none; did you "
                                   r"mean 'clamping'\?$"),
        ({"tf": -1.0}, r"^tf: must be a finite number > 0 \(in s, or null\), got -1.0$"),
        ({"kp": "big"}, r"^kp: must be a finite number, got 'big'$"),
    ],
)
def test_pid_parameter_errors(params, message):
    with pytest.raises(ValueError, match=message):
        create_component("pid", "c", params)


def test_pid_supports_rollback():
    pid = PID("c")
    pid.set_parameters(ki=1.0)
    pid.initialize(0.0)
    pid.set_inputs({"r": 1.0})
    snap = pid.snapshot_state()
    pid.do_step(0.0, 1.0)
    pid.restore_state(snap, 0.0)
    assert pid.get_state()["integral"]["value"] == 0.0
