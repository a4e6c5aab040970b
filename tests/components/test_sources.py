"""Sources: constant, step, ramp, sine, table (values, units, time events, CSV errors)."""

import math

import numpy as np
import pytest
from component_testing import simulate

from cosimrun.components.sources import Constant, Ramp, Sine, Step, Table
from cosimrun.errors import ConfigError
from cosimrun.masters import GaussSeidel, Jacobi
from cosimrun.plugins import create_component
from cosimrun.system import System


def test_constant_value_and_unit():
    c = create_component("constant", "c", {"value": "30 deg", "unit": "rad"})
    assert c.output_specs["y"].unit_name == "rad"
    _, out = simulate(c, 0.3, 0.1)
    assert out["y"] == pytest.approx(math.pi / 6, rel=1e-12)


def test_magnitude_with_wrong_dimension_fails_at_creation():
    with pytest.raises(ConfigError, match=r"^value: '3 s' has units of time, not of length \(m\)$") as info:
        create_component("constant", "c", {"value": "3 s", "unit": "m"})
    assert info.value.key == "value"


def test_step_values_and_time_event():
    s = create_component("step", "s", {"initial": 1.0, "final": 3.0, "step_time": 0.55})
    s.initialize(0.0)
    assert s.get_outputs()["y"] == 1.0
    assert s.next_time_event(0.0) == 0.55
    assert s.next_time_event(0.55) is None
    s.do_step(0.0, 0.5)
    assert s.get_outputs()["y"] == 1.0
    s.do_step(0.5, 0.55 - 0.5)  # t + dt lands within an ulp of 0.55: counts as the breakpoint
    assert s.get_outputs()["y"] == 3.0


def test_step_breakpoint_is_hit_exactly_in_a_system():
    sys_ = System("s")
    sys_.add_component(create_component("step", "s", {"step_time": 0.55, "final": 2.0}))
    sys_.add_component(create_component("integrator", "i", {}))
    sys_.connect("s.y -> i.u")
    sys_.run(0.0, 1.0, 0.1, master=Jacobi())
    t, out = sys_.components["s"].get_history_arrays()
    assert np.any(t == 0.55)
    _, iout = sys_.components["i"].get_history_arrays()
    # Jacobi holds inputs from the start of each step: the integral of 2 over [0.55, 1] is
    # exact only because 0.55 is a communication point (on the 0.1 grid it would be 0.8)
    assert iout["y"][-1] == pytest.approx(2.0 * 0.45, abs=1e-12)


def test_ramp_values_and_kinks():
    r = create_component("ramp", "r", {"slope": 2.0, "offset": 1.0, "start_time": 0.5, "end_time": 1.5})
    r.initialize(0.0)
    assert [r.value(t) for t in (0.0, 0.5, 1.0, 1.5, 3.0)] == pytest.approx([1.0, 1.0, 2.0, 3.0, 3.0])
    assert r.next_time_event(0.0) == 0.5
    assert r.next_time_event(0.5) == 1.5
    assert r.next_time_event(1.5) is None


def test_ramp_slope_quantity_and_end_time_check():
    r = create_component("ramp", "r", {"slope": "10 deg/s", "unit": "rad"})
    _, out = simulate(r, 1.0, 0.25)
    assert out["y"][-1] == pytest.approx(math.radians(10.0), rel=1e-12)
    with pytest.raises(ValueError, match=r"'end_time' must be > start_time"):
        create_component("ramp", "r", {"start_time": 2.0, "end_time": 1.0})


def test_sine_exact_at_step_end_with_units_and_phase():
    s = create_component("sine", "s", {"amplitude": 40, "unit": "deg", "frequency": 0.25, "phase": "90 deg",
                                       "offset": 1.0})
    assert s.output_specs["y"].unit_name == "deg"
    t, out = simulate(s, 2.0, 0.1)
    assert out["y"] == pytest.approx(1.0 + 40.0 * np.cos(2 * np.pi * 0.25 * t), abs=1e-12)
    s2 = create_component("sine", "s2", {"amplitude": "0.5 rad", "unit": "deg"})
    s2.initialize(0.0)
    assert s2.value(0.25) == pytest.approx(math.degrees(0.5))


def test_unit_parameter_rejects_unknown_unit():
    with pytest.raises(ConfigError, match=r"^unit: unknown unit 'blorp'"):
        create_component("sine", "s", {"unit": "blorp"})


def test_unit_change_after_initialize_is_refused():
    c = Constant("c")
    c.initialize(0.0)
    with pytest.raises(RuntimeError, match="before initialize"):
        c.set_parameters(unit="m")
    assert c.parameters["unit"] is None
    c.reset()
    c.set_parameters(unit="m")
    c.initialize(0.0)
    assert c.outputs["y"].spec.unit_name == "m"
    assert c.history.get_port_history("y").unit == "m"


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "signal.csv"
    path.write_text("# a comment\ntime,value\n0.0,0.0\n1.0,2.0\n2.0,2.0\n2.0,5.0\n3.0,4.0\n")
    return path


def test_table_linear_interpolation_and_jump(csv_file):
    tab = create_component("table", "tab", {"path": str(csv_file), "unit": "m"})
    tab.initialize(0.0)
    values = [tab.value(t) for t in (-1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 9.0)]
    assert values == pytest.approx([0.0, 0.0, 1.0, 2.0, 2.0, 5.0, 4.5, 4.0, 4.0])
    assert tab.output_specs["y"].unit_name == "m"


def test_table_previous_interpolation(csv_file):
    tab = create_component("table", "tab", {"path": csv_file, "interpolation": "previous"})
    tab.initialize(0.0)
    values = [tab.value(t) for t in (0.0, 0.999, 1.0, 1.5, 2.0, 2.9, 3.0, 9.0)]
    assert values == [0.0, 0.0, 2.0, 2.0, 5.0, 5.0, 4.0, 4.0]


def test_table_breakpoints_are_time_events(csv_file):
    tab = create_component("table", "tab", {"path": str(csv_file), "interpolation": "previous"})
    tab.initialize(0.0)
    assert [tab.next_time_event(t) for t in (-1.0, 0.0, 0.5, 1.0, 2.0, 3.0)] == [0.0, 1.0, 1.0, 2.0, 3.0, None]
    sys_ = System("s")
    sys_.add_component(tab)
    sys_.run(0.0, 3.0, 0.4, master=GaussSeidel())
    t, out = tab.get_history_arrays()
    for te in (1.0, 2.0, 3.0):
        assert te in t.tolist()
    assert out["y"][t.tolist().index(2.0)] == 5.0
    tab.set_parameters(time_events=False)
    assert tab.next_time_event(0.5) is None


def test_table_value_column_selection(tmp_path):
    path = tmp_path / "multi.csv"
    path.write_text("time,a,b\n0,1,10\n1,2,20\n")
    with pytest.raises(ValueError, match=r"columns time, a, b; set 'value_column'"):
        create_component("table", "tab", {"path": str(path)})
    tab = create_component("table", "tab", {"path": str(path), "value_column": "b"})
    assert tab.values.tolist() == [10.0, 20.0]
    with pytest.raises(ValueError, match=r"no value column 'bb'; did you mean 'b'\?"):
        create_component("table", "tab", {"path": str(path), "value_column": "bb"})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("t,value\n0,1\n", r"no time column 'time'.*\(columns: t, value\)"),
        ("time,value\n0,1\n1,x\n", r"data row 3: expected numbers in columns 'time' and 'value'"),
        ("time,value\n0,1\n2,1\n1,1\n", r"column 'time' must not decrease \(2.0 is followed by 1.0\)"),
        ("time,value\n", r"has a header but no data rows"),
        ("", r"is empty"),
        ("time,value\n1,1\n1,2\n1,3\n", r"appears more than twice"),
    ],
)
def test_table_csv_errors(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        create_component("table", "tab", {"path": str(path)})


def test_table_missing_file_and_path(tmp_path):
    with pytest.raises(ValueError, match=r"component 'tab' \(Table\): parameter 'path': CSV file not found: "
                                         r"'nope.csv'"):
        create_component("table", "tab", {"path": "nope.csv"})
    with pytest.raises(ValueError, match=r"parameter 'path' must name a CSV file"):
        Table("tab").initialize(0.0)


def test_table_bad_interpolation_suggests():
    with pytest.raises(ConfigError, match=r"^interpolation: 'lineaer' is not one of linear, previous; did you mean "
                                          r"'linear'\?$") as info:
        Table("tab").set_parameters(interpolation="lineaer")
    assert info.value.suggestion == "linear"


def test_sources_have_no_inputs_and_support_rollback():
    for cls in (Constant, Step, Ramp, Sine):
        comp = cls("x")
        assert comp.input_specs == {}
        assert comp.supports_rollback
    s = Sine("s")
    s.initialize(0.0)
    snap = s.snapshot_state()
    s.do_step(0.0, 0.3)
    s.restore_state(snap, 0.0)
    assert s.t == 0.0 and s.get_outputs()["y"] == 0.0
