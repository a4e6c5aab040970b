"""Unit parsing, compatibility and compiled affine conversions."""

import math

import pytest

from cosimrun.core.units import (
    IncompatibleUnitsError,
    UnitConversion,
    compile_conversion,
    is_dimensionless,
    parse_unit,
    units_compatible,
    ureg,
)


def test_rad_to_deg_scale():
    conv = compile_conversion("rad", "deg")
    assert conv.offset == 0.0
    assert conv.scale == pytest.approx(180.0 / math.pi, rel=1e-15)
    assert conv(math.pi) == pytest.approx(180.0, rel=1e-14)
    assert compile_conversion("deg", "rad")(90.0) == pytest.approx(math.pi / 2, rel=1e-15)


@pytest.mark.parametrize(
    ("src", "dst", "value", "expected"),
    [
        ("degC", "K", 0.0, 273.15),
        ("degC", "K", 100.0, 373.15),
        ("degC", "K", -273.15, 0.0),
        ("K", "degC", 0.0, -273.15),
        ("K", "degC", 300.0, 26.85),
        ("degF", "degC", 32.0, 0.0),
        ("degF", "degC", 212.0, 100.0),
        ("degF", "degC", -40.0, -40.0),
        ("degF", "degC", 98.6, 37.0),
        ("degC", "degF", 100.0, 212.0),
    ],
)
def test_offset_units_are_exact(src, dst, value, expected):
    conv = compile_conversion(src, dst)
    assert abs(conv(value) - expected) <= 1e-12


def test_offset_conversion_is_affine_with_unit_slope():
    conv = compile_conversion("degC", "K")
    assert conv.scale == pytest.approx(1.0, abs=1e-15)
    assert conv.offset == pytest.approx(273.15, abs=1e-12)
    f2c = compile_conversion("degF", "degC")
    assert f2c.scale == pytest.approx(5.0 / 9.0, abs=1e-15)
    assert f2c.offset == pytest.approx(-160.0 / 9.0, abs=1e-12)


def test_torque_to_kilo():
    conv = compile_conversion("N*m", "kN*m")
    assert conv.offset == 0.0
    assert conv.scale == pytest.approx(1e-3, rel=1e-15)
    assert conv(2500.0) == pytest.approx(2.5, rel=1e-15)


def test_identity_conversions():
    assert compile_conversion("m", "m").is_identity
    assert compile_conversion(None, None).is_identity
    assert compile_conversion("meter", "m").is_identity
    assert not compile_conversion("m", "km").is_identity
    assert UnitConversion()(3.5) == 3.5


def test_pint_unit_objects_accepted():
    conv = compile_conversion(ureg.Unit("km"), "m")
    assert conv(1.5) == pytest.approx(1500.0)


def test_incompatible_dimensions_name_both_units():
    with pytest.raises(IncompatibleUnitsError) as info:
        compile_conversion("m", "s")
    msg = str(info.value)
    assert "'m'" in msg or " m " in msg
    assert "'s'" in msg or " s:" in msg
    assert "[length]" in msg and "[time]" in msg
    # a ValueError subclass, so callers catching ValueError still see it
    assert isinstance(info.value, ValueError)


def test_incompatible_names_both_units_verbatim():
    with pytest.raises(IncompatibleUnitsError, match=r"N\*m.*kg"):
        compile_conversion("N*m", "kg")


def test_unknown_unit_suggests_close_names():
    with pytest.raises(ValueError, match=r"unknown unit 'meterz'.*did you mean.*'meter'"):
        parse_unit("meterz")


def test_unknown_unit_without_close_match_still_names_it():
    with pytest.raises(ValueError, match="qqqqqqzzzz"):
        parse_unit("qqqqqqzzzz")


def test_parse_none_and_empty():
    assert parse_unit(None) is None
    assert parse_unit("").dimensionless
    assert parse_unit("m") == ureg.Unit("meter")


def test_none_vs_dimensionless_rules():
    # no unit meets no unit and dimensionless units, never a physical unit
    assert units_compatible(None, None)
    assert units_compatible(None, "dimensionless")
    assert units_compatible("dimensionless", None)
    assert units_compatible(None, "percent")
    assert not units_compatible(None, "m")
    assert not units_compatible("m", None)
    assert units_compatible("m", "km")
    assert not units_compatible("m", "m/s")
    assert is_dimensionless(None)
    assert is_dimensionless("percent")
    assert not is_dimensionless("K")


def test_none_to_physical_unit_raises():
    with pytest.raises(IncompatibleUnitsError, match="no unit"):
        compile_conversion(None, "m")
    with pytest.raises(IncompatibleUnitsError, match="no unit"):
        compile_conversion("m", None)


def test_none_converts_as_plain_number():
    # a unit-less value 0.5 is 50 percent (not 0.5 percent)
    assert compile_conversion(None, "percent")(0.5) == pytest.approx(50.0)
    assert compile_conversion("percent", None)(50.0) == pytest.approx(0.5)
    assert compile_conversion(None, "dimensionless").is_identity
    # radians are pint's dimensionless angle: a plain number is an angle in rad
    assert compile_conversion("deg", None)(180.0) == pytest.approx(math.pi, rel=1e-15)
