"""Declared parameters (cosimrun.parameters): checks, unit conversion, keyed errors, through the builder too."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from cosimrun.config import build
from cosimrun.config.build import build_experiment
from cosimrun.core import OdeComponent
from cosimrun.errors import ConfigError
from cosimrun.parameters import Parameter, declared_parameters, dimension_name, value_in_unit


class Coil(OdeComponent):
    """An RL coil driven by a voltage (v -> i)."""

    PARAMETERS = {
        "L": Parameter(float, unit="H", default=0.5, gt=0, doc="inductance"),
        "R": Parameter(float, unit="ohm", default=1.0, ge=0, doc="resistance"),
        "turns": Parameter(int, default=100, ge=1, doc="number of turns"),
        "core": Parameter("choice", choices=("air", "iron"), default="air", doc="core material"),
        "shielded": Parameter(bool, default=False, doc="whether the coil is shielded"),
        "datasheet": Parameter(Path, doc="where the values come from"),
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.add_state("i", "A", 0.0, "current")
        self.add_input("v", "V", 0.0, "voltage")

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        p = self.parameters
        return (u - p["R"] * x) / p["L"]


class LongCoil(Coil):
    """A coil with a length."""

    PARAMETERS = {"length": Parameter(float, unit="m", default=0.1, gt=0, doc="coil length")}


def test_declared_parameters_start_at_their_defaults_and_subclasses_inherit_them() -> None:
    coil = LongCoil("c")
    assert {k: coil.parameters[k] for k in ("L", "R", "turns", "core", "shielded", "datasheet", "length")} == {
        "L": 0.5, "R": 1.0, "turns": 100, "core": "air", "shielded": False, "datasheet": None, "length": 0.1}
    assert list(declared_parameters(LongCoil)) == ["L", "R", "turns", "core", "shielded", "datasheet", "length"]
    assert coil.parameters["integrator"] == "rk4"  # the ODE settings are still there


def test_quantities_are_converted_to_the_declared_unit_and_stored_as_floats() -> None:
    coil = Coil("c")
    coil.set_parameters(L="500 mH", R="2 kohm", turns=np.int64(20), core="Iron", shielded=np.bool_(True),
                        datasheet=Path("coil.pdf"))
    assert coil.parameters == {**coil.parameters, "L": 0.5, "R": 2000.0, "turns": 20, "core": "iron",
                               "shielded": True, "datasheet": "coil.pdf"}
    assert type(coil.parameters["L"]) is float and type(coil.parameters["turns"]) is int
    coil.set_parameters(L=0.25)  # a plain number is in the declared unit
    assert coil.parameters["L"] == 0.25


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"L": "2 s"}, "L: '2 s' has units of time, not of inductance (H)"),
        ({"L": "-5 mH"}, "L: must be a finite number > 0 (in H), got '-5 mH' = -0.005 H"),
        ({"L": 0}, "L: must be a finite number > 0 (in H), got 0"),
        ({"L": "lots"}, "L: 'lots' is not a number or a quantity such as '1.5 H' ("),
        ({"L": None}, "L: must be a finite number > 0 (in H) or a quantity such as '1 H', got None"),
        ({"R": math.inf}, "R: must be a finite number >= 0 (in ohm) or a quantity such as '1 ohm', got inf"),
        ({"turns": 2.5}, "turns: must be an integer >= 1, got 2.5"),
        ({"turns": True}, "turns: must be an integer >= 1, got True"),
        ({"core": "irons"}, "core: 'irons' is not one of air, iron; did you mean 'iron'?"),
        ({"shielded": "yes"}, "shielded: must be true or false, got 'yes'"),
        ({"datasheet": 3}, "datasheet: must be a file path (or null), got 3"),
    ],
)
def test_invalid_values_raise_one_keyed_line(params: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Coil("c").set_parameters(**params)
    assert str(info.value).startswith(message), str(info.value)
    assert info.value.key == next(iter(params)) and isinstance(info.value, ValueError)


def test_the_builder_places_the_error_at_the_config_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reported case: a plugin's float parameter given as '500 mH' used to fail at t = 0.001 in numpy."""
    monkeypatch.setattr(build, "create_component", lambda type_name, name, *args, **kwargs: Coil(name))
    with pytest.raises(ConfigError) as info:
        build_experiment({"components": {"coil": {"type": "coil", "params": {"L": "2 s"}}}})
    assert str(info.value) == "components.coil.params.L: '2 s' has units of time, not of inductance (H)"
    exp = build_experiment({"components": {"coil": {"type": "coil", "params": {"L": "500 mH"}}}})
    assert exp.system.components["coil"].parameters["L"] == 0.5


def test_units_named_by_another_parameter_are_resolved_later() -> None:
    class Source(Coil):
        PARAMETERS = {"unit": Parameter("unit"), "level": Parameter(float, unit="{unit}", default=0.0, ge=0),
                      "rate": Parameter(float, unit="({unit}) / s", default=0.0)}

    src = Source("s")
    src.set_parameters(level="30 cm", rate="6 m/min")  # kept until the unit is known
    src.set_parameters(unit="m")
    assert value_in_unit(src, "level") == pytest.approx(0.3)
    assert value_in_unit(src, "rate") == pytest.approx(0.1)
    src.set_parameters(level="2 s")
    with pytest.raises(ConfigError, match=r"^level: '2 s' has units of time, not of length \(m\)$"):
        value_in_unit(src, "level")
    src.set_parameters(level="-1 m")
    with pytest.raises(ConfigError, match=r"^level: must be a finite number >= 0 \(in m\), got '-1 m' = -1 m$"):
        value_in_unit(src, "level")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"type": "complex"}, "Parameter type 'complex' is not one of"),
        ({"type": str, "unit": "m"}, "a str Parameter takes no unit or bounds"),
        ({"type": "choice"}, "a choice Parameter needs choices"),
        ({"type": float, "choices": ("a",)}, "a float Parameter takes no choices"),
        ({"type": float, "unit": "furlongs_per_fortnight"}, "Parameter unit: unknown unit"),
    ],
)
def test_bad_declarations_fail_when_the_class_is_written(kwargs: dict, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        Parameter(**kwargs)


def test_dimension_names() -> None:
    assert [dimension_name(u) for u in ("s", "mH", "N*m", "m**4", None)] == [
        "time", "inductance", "energy", "[length] ** 4", "no dimension"]
