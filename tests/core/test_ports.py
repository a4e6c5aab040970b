"""Port specifications (unit validation, compatibility) and port states (typed values)."""

import numpy as np
import pint
import pytest

from cosimrun.core.ports import PortSpec, PortState, PortType
from cosimrun.core.units import IncompatibleUnitsError, ureg


def real(name="x", unit=None, direction="out"):
    return PortState(PortSpec(name, PortType.REAL, direction, unit))


# ---------------------------------------------------------------- PortSpec construction
def test_unknown_unit_names_port_and_unit():
    with pytest.raises(ValueError) as info:
        PortSpec("speed", PortType.REAL, "out", unit="meterz")
    msg = str(info.value)
    assert "'speed'" in msg
    assert "'meterz'" in msg
    assert "meter" in msg.replace("'meterz'", "")  # suggestion


def test_unit_on_non_real_port_rejected():
    for kind in (PortType.INT, PortType.BOOL, PortType.STRING, PortType.EVENT):
        with pytest.raises(ValueError, match="only REAL ports carry a unit"):
            PortSpec("n", kind, "in", unit="m")


def test_spec_validates_type_direction_and_name():
    assert PortSpec("x", "real", "in").type is PortType.REAL
    with pytest.raises(ValueError, match="unknown port type"):
        PortSpec("x", "complex", "in")
    with pytest.raises(ValueError, match="direction"):
        PortSpec("x", PortType.REAL, "inout")
    with pytest.raises(ValueError, match="invalid port name"):
        PortSpec("a/b", PortType.REAL, "in")
    with pytest.raises(ValueError, match="invalid port name"):
        PortSpec("", PortType.REAL, "in")


def test_spec_is_immutable_and_reports_unit_name():
    spec = PortSpec("x", PortType.REAL, "in", unit="m/s")
    with pytest.raises(AttributeError):
        spec.unit = "m"
    assert spec.unit_name == "m/s"
    assert PortSpec("y", PortType.REAL, "in", unit=ureg.Unit("km")).unit_name == "km"
    assert PortSpec("z", PortType.REAL, "in").unit_name is None


def test_defaults_per_type():
    expected = {PortType.REAL: 0.0, PortType.INT: 0, PortType.BOOL: False, PortType.STRING: "", PortType.EVENT: False}
    for kind, value in expected.items():
        port = PortState(PortSpec("p", kind, "out"))
        assert port.get() == value
        assert type(port.get()) is type(value)
        assert port.t_last is None


# ---------------------------------------------------------------- type validation on set
def test_real_accepts_numbers_rejects_bool_and_strings():
    p = real()
    p.set(1.5, t=0.1)
    assert p.get() == 1.5 and p.t_last == 0.1
    p.set(3)
    assert p.get() == 3.0 and type(p.get()) is float
    for bad in (True, False, "1.0", None, [1.0], np.bool_(True)):
        with pytest.raises(TypeError):
            p.set(bad)
    assert p.get() == 3.0  # a rejected value leaves the port untouched


def test_int_accepts_integral_floats_only():
    p = PortState(PortSpec("n", PortType.INT, "in"))
    p.set(2.0)
    assert p.get() == 2 and type(p.get()) is int
    p.set(7)
    assert p.get() == 7
    for bad in (2.5, True, "2", float("inf"), float("nan")):
        with pytest.raises(TypeError):
            p.set(bad)


@pytest.mark.parametrize("kind", [PortType.BOOL, PortType.EVENT])
def test_bool_and_event(kind):
    p = PortState(PortSpec("b", kind, "out"))
    p.set(True)
    assert p.get() is True
    p.set(0)
    assert p.get() is False
    for bad in (2, 0.0, "True", None):
        with pytest.raises(TypeError):
            p.set(bad)


def test_string():
    p = PortState(PortSpec("s", PortType.STRING, "out"))
    p.set("hello")
    assert p.get() == "hello"
    for bad in (1, 1.0, True, None):
        with pytest.raises(TypeError):
            p.set(bad)


def test_numpy_scalars_coerced_to_python_types():
    p = real()
    p.set(np.float64(2.5))
    assert type(p.get()) is float and p.get() == 2.5
    p.set(np.float32(0.5))
    assert type(p.get()) is float and p.get() == 0.5
    p.set(np.int32(4))
    assert type(p.get()) is float and p.get() == 4.0
    p.set(np.array(1.25))  # 0-d array
    assert type(p.get()) is float and p.get() == 1.25

    n = PortState(PortSpec("n", PortType.INT, "in"))
    n.set(np.int64(5))
    assert type(n.get()) is int and n.get() == 5
    n.set(np.float64(6.0))
    assert type(n.get()) is int and n.get() == 6

    b = PortState(PortSpec("b", PortType.BOOL, "in"))
    b.set(np.bool_(True))
    assert b.get() is True

    s = PortState(PortSpec("s", PortType.STRING, "in"))
    s.set(np.str_("abc"))
    assert type(s.get()) is str and s.get() == "abc"


def test_validate_value_without_numpy_coercion_rejects_numpy_bool():
    spec = PortSpec("b", PortType.BOOL, "in")
    assert spec.validate_value(np.bool_(False)) is False
    with pytest.raises(TypeError):
        spec.validate_value(np.bool_(False), coerce_numpy=False)


def test_initial_value_is_validated():
    assert PortState(PortSpec("n", PortType.INT, "in"), value=3.0).get() == 3
    with pytest.raises(TypeError):
        PortState(PortSpec("n", PortType.INT, "in"), value=3.5)


# ---------------------------------------------------------------- units on get / set
def test_get_as_unit():
    p = real(unit="rad")
    p.set(np.pi)
    assert p.get(as_unit="deg") == pytest.approx(180.0, rel=1e-14)
    assert p.get() == np.pi  # stored value unchanged


def test_get_as_offset_unit():
    p = real(unit="degC")
    p.set(25.0)
    assert abs(p.get(as_unit="K") - 298.15) <= 1e-12
    assert abs(p.get(as_unit="degF") - 77.0) <= 1e-12
    k = real(unit="K")
    k.set(0.0)
    assert abs(k.get(as_unit="degC") + 273.15) <= 1e-12


def test_get_as_incompatible_unit_raises_naming_port():
    p = real("speed", unit="m/s")
    with pytest.raises(IncompatibleUnitsError, match="'speed'"):
        p.get(as_unit="K")
    with pytest.raises(ValueError, match="'speed'.*'furlongz'"):
        p.get(as_unit="furlongz")


def test_get_as_unit_on_non_real_port_raises():
    with pytest.raises(TypeError):
        PortState(PortSpec("n", PortType.INT, "out")).get(as_unit="m")


def test_quantity_set_converted_to_port_unit():
    p = real(unit="m")
    p.set(ureg.Quantity(2.5, "km"), t=1.0)
    assert type(p.get()) is float
    assert p.get() == pytest.approx(2500.0)

    temp = real(unit="K")
    temp.set(ureg.Quantity(25.0, "degC"))
    assert abs(temp.get() - 298.15) <= 1e-12

    ratio = real(unit=None)
    ratio.set(ureg.Quantity(50.0, "percent"))
    assert ratio.get() == pytest.approx(0.5)


def test_quantity_of_wrong_dimension_rejected():
    p = real(unit="m")
    with pytest.raises(pint.DimensionalityError):
        p.set(ureg.Quantity(1.0, "s"))
    assert p.get() == 0.0


def test_reset():
    p = real(unit="N*m")
    p.set(4.0, t=2.0)
    p.reset()
    assert p.get() == 0.0 and p.t_last is None


# ---------------------------------------------------------------- compatibility
def spec(kind=PortType.REAL, unit=None, direction="out", name="p"):
    return PortSpec(name, kind, direction, unit)


def test_compatible_type_mismatch():
    assert not PortSpec.compatible(spec(PortType.REAL), spec(PortType.INT, direction="in"))
    assert not PortSpec.compatible(spec(PortType.BOOL), spec(PortType.EVENT, direction="in"))
    assert PortSpec.compatible(spec(PortType.INT), spec(PortType.INT, direction="in"))
    assert PortSpec.compatible(spec(PortType.STRING), spec(PortType.STRING, direction="in"))


def test_compatible_units():
    assert PortSpec.compatible(spec(unit="m"), spec(unit="km", direction="in"))
    assert PortSpec.compatible(spec(unit="degC"), spec(unit="K", direction="in"))
    assert PortSpec.compatible(spec(unit="N*m"), spec(unit="J", direction="in"))
    assert not PortSpec.compatible(spec(unit="m"), spec(unit="s", direction="in"))
    assert not PortSpec.compatible(spec(unit="m"), spec(unit=None, direction="in"))
    assert not PortSpec.compatible(spec(unit=None), spec(unit="m", direction="in"))
    assert PortSpec.compatible(spec(unit=None), spec(unit=None, direction="in"))
    assert PortSpec.compatible(spec(unit=None), spec(unit="dimensionless", direction="in"))


def test_state_compatible_with_uses_spec_rules():
    p = real(unit="rad")
    assert p.compatible_with(spec(unit="deg", direction="in"))
    assert not p.compatible_with(spec(unit="m", direction="in"))
