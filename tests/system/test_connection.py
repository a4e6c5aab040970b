"""Connections: parsing, validation with clear errors, and compiled unit conversions in a run."""

import numpy as np
import pytest
from helpers import Affine, Constant, Probe, Ramp

from cosimrun import PortType
from cosimrun.masters import GaussSeidel, Jacobi
from cosimrun.system import Connection, InvalidConnectionError, System

MASTERS = [pytest.param(Jacobi, id="jacobi"), pytest.param(GaussSeidel, id="gauss_seidel")]


def two_affines() -> System:
    s = System("sys")
    s.add_component(Affine("first", 2.0, 1.0, unit="m"))
    s.add_component(Affine("second", 1.0, 0.0, unit="m"))
    return s


# ---------------------------------------------------------------------- Connection objects
def test_parse_and_between_give_the_same_connection():
    a = Connection.parse("  p.y ->  q.u ")
    b = Connection.between("p.y", "q.u")
    assert a == b == Connection("p", "y", "q", "u")
    assert str(a) == "p.y -> q.u"
    assert (a.src, a.dst) == ("p.y", "q.u")


def test_port_names_may_contain_dots_after_the_component():
    c = Connection.parse("bus.sig.x -> q.u")
    assert (c.src_component, c.src_port) == ("bus", "sig.x")


@pytest.mark.parametrize("text", ["p.y q.u", "p.y -> q.u -> r.u", "py -> q.u", "p. -> q.u", ".y -> q.u", 42])
def test_malformed_connection_text_is_rejected(text):
    with pytest.raises(ValueError, match="must be written"):
        Connection.parse(text)


def test_connect_accepts_three_spellings():
    s = System("sys")
    for name in "abcd":
        s.add_component(Affine(name))
    c1 = s.connect("a.y", "b.u")
    c2 = s.connect("b.y -> c.u")
    c3 = s.connect(Connection("c", "y", "d", "u"))
    assert s.connections == [c1, c2, c3]
    assert [str(c) for c in s.connections] == ["a.y -> b.u", "b.y -> c.u", "c.y -> d.u"]


# ---------------------------------------------------------------------- validation errors
def test_unknown_component_suggests_a_close_name():
    s = two_affines()
    with pytest.raises(InvalidConnectionError, match=r"unknown component 'frist'.*did you mean 'first'"):
        s.connect("frist.y", "second.u")
    with pytest.raises(InvalidConnectionError, match=r"unknown component 'secnd'.*did you mean 'second'"):
        s.connect("first.y -> secnd.u")


def test_unknown_ports_suggest_close_names():
    s = two_affines()
    with pytest.raises(InvalidConnectionError, match=r"unknown output 'yy' of component 'first'.*did you mean 'y'"):
        s.connect("first.yy", "second.u")
    with pytest.raises(InvalidConnectionError, match=r"unknown input 'uu' of component 'second'.*did you mean 'u'"):
        s.connect("first.y", "second.uu")


def test_direction_mismatches_are_named():
    s = two_affines()
    with pytest.raises(InvalidConnectionError, match=r"first\.u is an input; a connection starts at an output"):
        s.connect("first.u", "second.u")
    with pytest.raises(InvalidConnectionError, match=r"second\.y is an output; a connection ends at an input"):
        s.connect("first.y", "second.y")


def test_type_mismatch_names_both_ports_and_types():
    s = System("sys")
    s.add_component(Constant("count", 3, port_type=PortType.INT))
    s.add_component(Affine("gain"))
    with pytest.raises(InvalidConnectionError, match=r"type mismatch, count\.y is int but gain\.u is real"):
        s.connect("count.y", "gain.u")


def test_incompatible_units_name_both_ports_and_both_units():
    s = System("sys")
    s.add_component(Constant("length", 1.0, unit="m"))
    s.add_component(Probe("timer", unit="s"))
    with pytest.raises(InvalidConnectionError) as err:
        s.connect("length.y", "timer.u")
    message = str(err.value)
    assert "incompatible units" in message
    assert "length.y is in m" in message and "timer.u is in s" in message


def test_a_physical_unit_does_not_meet_a_unitless_port():
    s = System("sys")
    s.add_component(Constant("length", 1.0, unit="m"))
    s.add_component(Probe("plain"))
    with pytest.raises(InvalidConnectionError, match=r"length\.y is in m but plain\.u is in no unit"):
        s.connect("length.y", "plain.u")


def test_an_input_driven_twice_is_rejected_and_names_the_first_driver():
    s = two_affines()
    s.add_component(Constant("c", 1.0, unit="m"))
    s.connect("first.y", "second.u")
    with pytest.raises(InvalidConnectionError, match=r"input second\.u is already driven by first\.y -> second\.u"):
        s.connect("c.y", "second.u")


def test_a_rejected_connection_leaves_the_system_unchanged():
    s = two_affines()
    with pytest.raises(InvalidConnectionError):
        s.connect("first.y", "second.uu")
    assert s.connections == []
    s.connect("first.y", "second.u")  # the input is still free
    assert [str(c) for c in s.connections] == ["first.y -> second.u"]


# ---------------------------------------------------------------------- unit conversion in a run
@pytest.mark.parametrize("master", MASTERS)
def test_degc_output_arrives_offset_in_a_kelvin_input(master):
    s = System("thermo")
    s.add_component(Ramp("heater", slope=10.0, unit="degC"))  # 0, 1, 2, ... degC at t = 0, 0.1, 0.2, ...
    s.add_component(Probe("sensor", unit="K"))
    s.connect("heater.y", "sensor.u")
    r = s.run(0.0, 1.0, 0.1, master=master())
    t, kelvin = r.history.get_port_trajectory("sensor", "y")
    np.testing.assert_allclose(kelvin, 10.0 * t + 273.15, rtol=0, atol=1e-12)
    # the inputs the sensor stepped with were converted too
    steps = np.array(s.components["sensor"].steps)
    assert np.all(steps[:, 2] > 273.0)
    # and the history converts back on request
    _, celsius = r.history.get_port_trajectory("sensor", "y", as_unit="degC")
    np.testing.assert_allclose(celsius, 10.0 * t, atol=1e-9)


@pytest.mark.parametrize("master", MASTERS)
def test_radians_arrive_scaled_in_a_degree_input(master):
    s = System("angles")
    s.add_component(Constant("angle", np.pi / 2, unit="rad"))
    s.add_component(Probe("display", unit="deg"))
    s.connect("angle.y -> display.u")
    r = s.run(0.0, 0.3, 0.1, master=master())
    _, deg = r.history.get_port_trajectory("display", "y")
    np.testing.assert_allclose(deg, 90.0, rtol=1e-14)


def test_compiled_links_carry_the_affine_conversion():
    s = System("mixed")
    s.add_component(Constant("temp", 20.0, unit="degC"))
    s.add_component(Probe("kelvin", unit="K"))
    s.add_component(Constant("dist", 1.5, unit="km"))
    s.add_component(Probe("metres", unit="m"))
    s.connect("temp.y -> kelvin.u")
    s.connect("dist.y -> metres.u")
    s.initialize(0.0, GaussSeidel())
    conv = {str(lk.connection): lk.conversion for lk in s.links}
    assert conv["temp.y -> kelvin.u"].scale == pytest.approx(1.0)
    assert conv["temp.y -> kelvin.u"].offset == pytest.approx(273.15)
    assert conv["dist.y -> metres.u"].scale == pytest.approx(1000.0)
    assert conv["dist.y -> metres.u"].offset == 0.0
    # values are consistent right after initialization
    assert s.components["kelvin"].inputs["u"].value == pytest.approx(293.15)
    assert s.components["metres"].outputs["y"].value == pytest.approx(1500.0)
