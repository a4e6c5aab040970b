"""Block-diagram blocks: gain, sum, saturation (memoryless, direct feedthrough), integrator, first-order lag.

The memoryless blocks declare their direct feedthrough explicitly; the
integrator and the lag are :class:`~cosimrun.core.ode.OdeComponent` models
whose output is a state (no feedthrough), with rollback and the ``integrator``
parameters of every ODE component. Every block is vectorizable (its numeric
parameters may differ between an ensemble's members).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cosimrun.components._base import OdeBlock, StatelessComponent, parameter_error, set_output
from cosimrun.core.component import NO_EVENTS, invalid_parameter
from cosimrun.core.parameters import Parameter
from cosimrun.core.ports import PortSpec, PortType
from cosimrun.core.units import UnitLike, parse_unit, unit_str
from cosimrun.errors import ComponentStateError

INPUT_UNIT = Parameter("unit", doc="unit of the input (null: a plain number)")
OUTPUT_UNIT = Parameter("unit", doc="unit of the output (null: see the description)")
UNIT = Parameter("unit", doc="unit of the input and output ports (null: plain numbers)")


def clip(value: Any, lower: Any, upper: Any) -> Any:
    """``min(max(value, lower), upper)``, elementwise for an ensemble's arrays (the same values)."""
    if isinstance(value, np.ndarray) or isinstance(lower, np.ndarray) or isinstance(upper, np.ndarray):
        return np.minimum(np.maximum(value, lower), upper)
    return min(max(value, lower), upper)


def _real(name: str, direction: str, description: str) -> PortSpec:
    return PortSpec(name, PortType.REAL, direction, None, description)  # type: ignore[arg-type]


class Gain(StatelessComponent):
    """Gain ``y = k * u`` (direct feedthrough u -> y)."""

    vectorizable = True

    PARAMETERS = {
        "k": Parameter(float, default=1.0, doc="gain"),
        "input_unit": INPUT_UNIT,
        "output_unit": Parameter("unit", doc="unit of y (null: input_unit)"),
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.input_specs["u"] = _real("u", "in", "input")
        self.output_specs["y"] = _real("y", "out", "k * u")
        self.direct_feedthrough = {"y": {"u"}}

    def _port_units(self) -> dict[str, UnitLike]:
        p = self.parameters
        out = p["output_unit"] if p["output_unit"] is not None else p["input_unit"]
        return {"u": p["input_unit"], "y": out}

    def _update_output_states(self, t: float | None = None, event_names: Any = NO_EVENTS) -> None:
        set_output(self.outputs["y"], self.parameters["k"] * self.inputs["u"].value, self.t if t is None else t)


class Sum(StatelessComponent):
    """Signed sum ``y = s1*u1 + s2*u2 + ...`` with signs like ``"+-"`` (direct feedthrough)."""

    vectorizable = True

    PARAMETERS = {
        "signs": Parameter(str, default="++", doc="one sign per input u1, u2, ...: a string like '+-' or a list"),
        "unit": UNIT,
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.output_specs["y"] = _real("y", "out", "signed sum of the inputs")
        self._declare_inputs("++")

    def _validate_parameter(self, name: str, value: Any) -> Any:
        if name == "signs":
            if isinstance(value, Sequence) and not isinstance(value, str) and value \
                    and all(v in (1, -1, "+", "-") for v in value):
                value = "".join("+" if v in (1, "+") else "-" for v in value)
            if not isinstance(value, str) or not value or set(value) - {"+", "-"}:
                raise invalid_parameter(name, value, str(parameter_error(
                    self, name, "must be a non-empty string of '+' and '-' (one per input, e.g. '+-')", value)))
            if value != self.parameters.get("signs") and self.is_initialized:
                raise ComponentStateError(f"component {self.name!r} (Sum): 'signs' changes the inputs; set it "
                                          "before initialize (or after reset)", component=self.name)
            self._declare_inputs(value)
            return value
        return super()._validate_parameter(name, value)

    def _declare_inputs(self, signs: str) -> None:
        unit = self.parameters.get("unit")
        names = [f"u{i + 1}" for i in range(len(signs))]
        for old in [n for n in self.input_specs if n not in names]:
            del self.input_specs[old]
            self.inputs.pop(old, None)
        for n, s in zip(names, signs, strict=True):
            if n not in self.input_specs:
                self.input_specs[n] = PortSpec(n, PortType.REAL, "in", unit, f"summand with sign {s}")
        self.direct_feedthrough = {"y": set(names)}
        self._signs = [1.0 if s == "+" else -1.0 for s in signs]

    def _port_units(self) -> dict[str, UnitLike]:
        unit = self.parameters["unit"]
        return {"y": unit, **{n: unit for n in self.input_specs}}

    def _setup(self) -> None:
        self._ports = [self.inputs[f"u{i + 1}"] for i in range(len(self._signs))]

    def _update_output_states(self, t: float | None = None, event_names: Any = NO_EVENTS) -> None:
        y = 0.0
        for s, port in zip(self._signs, self._ports, strict=True):
            y += s * port.value
        set_output(self.outputs["y"], y, self.t if t is None else t)


class Saturation(StatelessComponent):
    """Saturation ``y = min(max(u, lower), upper)`` (direct feedthrough u -> y)."""

    vectorizable = True

    PARAMETERS = {
        "lower": Parameter(float, default=-1.0, doc="lower limit (<= upper), in the port unit"),
        "upper": Parameter(float, default=1.0, doc="upper limit, in the port unit"),
        "unit": UNIT,
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.input_specs["u"] = _real("u", "in", "input")
        self.output_specs["y"] = _real("y", "out", "u limited to [lower, upper]")
        self.direct_feedthrough = {"y": {"u"}}

    def _port_units(self) -> dict[str, UnitLike]:
        return {"u": self.parameters["unit"], "y": self.parameters["unit"]}

    def check_parameters(self) -> None:
        super().check_parameters()
        p = self.parameters
        if not p["lower"] <= p["upper"]:
            raise parameter_error(self, "lower", f"must be <= upper = {p['upper']!r}", p["lower"])

    def _update_output_states(self, t: float | None = None, event_names: Any = NO_EVENTS) -> None:
        p = self.parameters
        y = clip(self.inputs["u"].value, p["lower"], p["upper"])
        set_output(self.outputs["y"], y, self.t if t is None else t)


def _constant(value: float) -> np.ndarray:
    """*value* as a 0-d float array, for the derivatives' arithmetic on state arrays: numpy combines it with an
    array faster than a Python float (no scalar conversion per operation), with the same result."""
    return np.array(value, dtype=float)


def _times_second(unit: UnitLike) -> str | None:
    """The unit of the time integral of a signal in *unit* (``None`` stays ``None``)."""
    if unit is None:
        return None
    return unit_str(parse_unit(f"({unit}) * s"))


class Integrator(OdeBlock):
    """Integrator ``dy/dt = k * u`` (state ``y``, initial value ``y0``; no feedthrough).

    ``output_unit`` defaults to ``input_unit`` times seconds (unit-less stays unit-less).
    """

    vectorizable = True

    PARAMETERS = {
        "k": Parameter(float, default=1.0, doc="gain"),
        "input_unit": INPUT_UNIT,
        "output_unit": Parameter("unit", doc="unit of y (null: input_unit * s)"),
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.add_state("y", None, 0.0, "integral of k * u")
        self.add_input("u", None, 0.0, "integrand")
        self._refresh()

    def _port_units(self) -> dict[str, UnitLike]:
        p = self.parameters
        out = p["output_unit"] if p["output_unit"] is not None else _times_second(p["input_unit"])
        return {"u": p["input_unit"], "y": out}

    def _refresh(self) -> None:
        self._k = _constant(self.parameters["k"])

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return self._k * u


class FirstOrderLag(OdeBlock):
    """First-order lag ``T * dy/dt = k * u - y`` (state ``y``, initial value ``y0``; no feedthrough)."""

    vectorizable = True

    PARAMETERS = {
        "k": Parameter(float, default=1.0, doc="static gain"),
        "time_constant": Parameter(float, unit="s", default=1.0, gt=0, doc="time constant T"),
        "unit": UNIT,
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.add_state("y", None, 0.0, "lagged output")
        self.add_input("u", None, 0.0, "input")
        self._refresh()

    def _port_units(self) -> dict[str, UnitLike]:
        return {"u": self.parameters["unit"], "y": self.parameters["unit"]}

    def _refresh(self) -> None:
        p = self.parameters
        self._k, self._time_constant = _constant(p["k"]), _constant(p["time_constant"])

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return (self._k * u - x) / self._time_constant
