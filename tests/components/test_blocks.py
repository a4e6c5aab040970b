"""Blocks: gain, sum, saturation (values, declared feedthrough, units), integrator and first-order lag."""

import numpy as np
import pytest
from component_testing import simulate

from cosimrun.components.blocks import FirstOrderLag, Gain, Integrator, Saturation, Sum
from cosimrun.masters import GaussSeidel
from cosimrun.plugins import create_component
from cosimrun.system import System


def test_gain_value_feedthrough_and_units():
    g = create_component("gain", "g", {"k": 3.0, "input_unit": "m", "output_unit": "N"})
    assert g.direct_feedthrough == {"y": {"u"}}
    assert (g.input_specs["u"].unit_name, g.output_specs["y"].unit_name) == ("m", "N")
    g.initialize(0.0)
    assert g.evaluate_outputs({"u": 2.0})["y"] == 6.0
    assert g.direct_feedthrough == {"y": {"u"}}
    same = create_component("gain", "g2", {"input_unit": "deg"})
    assert same.output_specs["y"].unit_name == "deg"


def test_sum_signs_ports_and_feedthrough():
    s = create_component("sum", "s", {"signs": "+-+", "unit": "N"})
    assert list(s.input_specs) == ["u1", "u2", "u3"]
    assert all(spec.unit_name == "N" for spec in (*s.input_specs.values(), s.output_specs["y"]))
    assert s.direct_feedthrough == {"y": {"u1", "u2", "u3"}}
    s.initialize(0.0)
    assert s.evaluate_outputs({"u1": 5.0, "u2": 2.0, "u3": 0.5})["y"] == 3.5
    s2 = create_component("sum", "s2", {"signs": (1, "-")})
    assert s2.parameters["signs"] == "+-" and list(s2.input_specs) == ["u1", "u2"]
    with pytest.raises(ValueError, match=r"component 's3' \(Sum\): parameter 'signs' must be a non-empty string "
                                         r"of '\+' and '-'.*got '\+\*'"):
        create_component("sum", "s3", {"signs": "+*"})


def test_sum_in_a_system_with_feedthrough_ordering():
    sys_ = System("s")
    sys_.add_component(create_component("constant", "a", {"value": 3.0}))
    sys_.add_component(create_component("constant", "b", {"value": 1.0}))
    sys_.add_component(create_component("sum", "e", {"signs": "+-"}))
    sys_.add_component(create_component("integrator", "i", {}))
    for c in ("a.y -> e.u1", "b.y -> e.u2", "e.y -> i.u"):
        sys_.connect(c)
    sys_.run(0.0, 1.0, 0.1, master=GaussSeidel())
    _, out = sys_.components["i"].get_history_arrays()
    assert out["y"][-1] == pytest.approx(2.0, rel=1e-12)


def test_saturation_values_and_limits_check():
    s = create_component("saturation", "s", {"lower": -0.5, "upper": 2.0, "unit": "N*m"})
    assert s.direct_feedthrough == {"y": {"u"}}
    s.initialize(0.0)
    assert [s.evaluate_outputs({"u": u})["y"] for u in (-3.0, 0.1, 5.0)] == [-0.5, 0.1, 2.0]
    with pytest.raises(ValueError, match=r"parameter 'lower' must be <= upper = -1.0, got 1.0"):
        create_component("saturation", "s", {"lower": 1.0, "upper": -1.0})


def test_integrator_of_a_constant_with_derived_unit():
    i = create_component("integrator", "i", {"k": 2.0, "input_unit": "m/s", "y0": 1.0})
    assert i.output_specs["y"].unit_name == "m"
    assert i.get_state() == {"y": {"value": 1.0, "unit": "m"}}
    t, out = simulate(i, 1.0, 0.1, inputs={"u": 0.5})
    assert out["y"] == pytest.approx(1.0 + 2.0 * 0.5 * t, abs=1e-13)
    assert i.direct_feedthrough == {"y": set()}


def test_integrator_rollback():
    i = Integrator("i")
    i.initialize(0.0)
    i.set_inputs({"u": 1.0})
    snap = i.snapshot_state()
    i.do_step(0.0, 0.5)
    assert i.get_outputs()["y"] == pytest.approx(0.5)
    i.restore_state(snap, 0.0)
    assert i.get_outputs()["y"] == 0.0


def test_first_order_lag_step_response():
    lag = create_component("first_order_lag", "lag", {"time_constant": 0.5, "k": 2.0, "unit": "K"})
    assert lag.input_specs["u"].unit_name == "K" and lag.output_specs["y"].unit_name == "K"
    t, out = simulate(lag, 3.0, 0.05, inputs={"u": 1.0})
    assert out["y"] == pytest.approx(2.0 * (1.0 - np.exp(-t / 0.5)), abs=1e-7)
    assert lag.direct_feedthrough == {"y": set()}


def test_lag_time_constant_validation():
    with pytest.raises(ValueError, match=r"^time_constant: must be a finite number > 0 \(in s\), got 0$"):
        FirstOrderLag("lag").set_parameters(time_constant=0)
    lag = create_component("first_order_lag", "lag", {"time_constant": "250 ms"})
    assert lag.parameters["time_constant"] == pytest.approx(0.25)


def test_block_classes_declare_documented_ports():
    assert set(Gain("g").input_specs) == {"u"}
    assert set(Saturation("s").output_specs) == {"y"}
    assert set(Sum("s").input_specs) == {"u1", "u2"}
