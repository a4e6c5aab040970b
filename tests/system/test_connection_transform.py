"""Connections with a linear transformation: dst = scale * convert(src) + offset, folded into the link's map."""

import numpy as np
import pytest
from helpers import Constant, Probe, Ramp

from cosimrun import PortType
from cosimrun.errors import ConfigError, InvalidConnectionError
from cosimrun.masters import GaussSeidel, Jacobi
from cosimrun.system import Connection, System

MASTERS = [pytest.param(Jacobi, id="jacobi"), pytest.param(GaussSeidel, id="gauss_seidel")]
LEAD = {Jacobi: 0.0, GaussSeidel: 1.0}
"""Where in its step the sensor's input was sampled: Jacobi holds the start, Gauss-Seidel reads the fresh end."""
SLOPE, SCALE, OFFSET = 10.0, 2.0, 1.0


def heater_and_sensor(sensor_unit: str = "K", **transform) -> System:
    """A ramp of 10 degC/s into a probe in *sensor_unit* through a transformed connection."""
    s = System("thermo")
    s.add_component(Ramp("heater", slope=SLOPE, unit="degC"))
    s.add_component(Probe("sensor", unit=sensor_unit))
    s.connect("heater.y", "sensor.u", **transform)
    return s


@pytest.mark.parametrize("master", MASTERS)
def test_scale_and_offset_apply_after_the_unit_conversion(master):
    s = heater_and_sensor(scale=SCALE, offset=OFFSET)
    r = s.run(0.0, 1.0, 0.1, master=master())
    t, y = r.history.get_port_trajectory("sensor", "y")
    np.testing.assert_allclose(y, SCALE * (SLOPE * t + 273.15) + OFFSET, rtol=0, atol=1e-12)
    steps = np.array(s.components["sensor"].steps)  # the inputs it stepped with: transformed too
    sampled = steps[:, 0] + LEAD[master] * steps[:, 1]
    np.testing.assert_allclose(steps[:, 2], SCALE * (SLOPE * sampled + 273.15) + OFFSET, rtol=0, atol=1e-12)


@pytest.mark.parametrize("master", MASTERS)
def test_without_unit_conversion_the_number_passes_as_it_is(master):
    s = heater_and_sensor(scale=SCALE, offset=OFFSET, convert_units=False)
    r = s.run(0.0, 1.0, 0.1, master=master())
    t, y = r.history.get_port_trajectory("sensor", "y")
    np.testing.assert_allclose(y, SCALE * SLOPE * t + OFFSET, rtol=0, atol=1e-12)


def test_without_unit_conversion_the_dimensions_may_differ():
    s = heater_and_sensor(sensor_unit="s", convert_units=False)
    r = s.run(0.0, 0.5, 0.1, master=GaussSeidel())
    t, y = r.history.get_port_trajectory("sensor", "y")
    np.testing.assert_allclose(y, SLOPE * t, rtol=0, atol=1e-12)
    with pytest.raises(InvalidConnectionError, match=r"incompatible units, heater\.y is in degC but "
                                                     r"sensor\.u is in s \(convert_units=False"):
        heater_and_sensor(sensor_unit="s", scale=SCALE)


def test_the_link_holds_one_composed_map():
    s = heater_and_sensor(scale=SCALE, offset=OFFSET)
    s.initialize(0.0, GaussSeidel())
    (link,) = s.links
    assert link.conversion.scale == SCALE
    assert link.conversion.offset == pytest.approx(SCALE * 273.15 + OFFSET, rel=1e-15)
    assert "heater.y -> sensor.u  [degC -> K; scale 2, offset +1: x*2+547.3]" in s.describe()


def test_extrapolated_inputs_and_the_coupling_error_use_the_transformation():
    """Jacobi, extrapolation 1: a held input gets the extrapolated line's mean over the step, transformed;
    the estimated coupling error of a held ramp is its change over a step, scaled."""
    s = heater_and_sensor(scale=SCALE, offset=OFFSET)
    r = s.run(0.0, 1.0, 0.1, master=Jacobi(extrapolation=1))
    steps = np.array(s.components["sensor"].steps)[1:]  # the first step has one sample: held, not extrapolated
    mid = steps[:, 0] + steps[:, 1] / 2
    np.testing.assert_allclose(steps[:, 2], SCALE * (SLOPE * mid + 273.15) + OFFSET, rtol=0, atol=1e-9)
    held = heater_and_sensor(scale=SCALE, offset=OFFSET).run(0.0, 1.0, 0.1, master=Jacobi())
    (estimate,) = held.coupling_errors
    assert estimate.max == pytest.approx(SCALE * SLOPE * 0.1, rel=1e-9)
    assert r.coupling_errors[0].connection == "heater.y -> sensor.u"


@pytest.mark.parametrize(("transform", "key"), [({"scale": 2.0}, "scale"), ({"offset": 1.0}, "offset"),
                                                ({"convert_units": False}, "convert_units")])
def test_a_transformation_on_a_non_real_port_is_refused_at_its_key(transform, key):
    s = System("sys")
    s.add_component(Constant("count", 3, port_type=PortType.INT))
    s.add_component(Constant("other", 3, port_type=PortType.INT))
    probe = Probe("p")
    probe.input_specs["n"] = probe.input_specs["u"].__class__("n", PortType.INT, "in")
    s.add_component(probe)
    with pytest.raises(InvalidConnectionError) as info:
        s.connect("count.y", "p.n", **transform)
    assert info.value.key == key
    assert "applies to real ports only; count.y is int" in info.value.message
    assert s.connections == []


@pytest.mark.parametrize(("field", "value"), [("scale", "abc"), ("scale", float("nan")), ("offset", True),
                                              ("offset", None), ("convert_units", "no")])
def test_bad_values_name_the_field(field, value):
    with pytest.raises(ConfigError) as info:
        Connection.between("a.y", "b.u", **{field: value})
    assert info.value.key == field
    assert repr(value) in info.value.message


def test_an_identity_transformation_is_the_plain_connection():
    assert Connection.between("a.y", "b.u", scale=1, offset=0) == Connection.parse("a.y -> b.u")
    assert not Connection.parse("a.y -> b.u").transforms
    assert Connection.between("a.y", "b.u", scale=np.float64(2.0)).scale == 2.0
