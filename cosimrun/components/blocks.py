"""Block-diagram blocks: gain, sum, saturation (memoryless, direct feedthrough), integrator, first-order lag.

The memoryless blocks declare their direct feedthrough explicitly; the
integrator and the lag are :class:`~cosimrun.core.ode.OdeComponent` models
whose output is a state (no feedthrough), with rollback and the ``integrator``
parameters of every ODE component.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cosimrun.components._base import (
    Number,
    OdeBlock,
    StatelessComponent,
    Unit,
    parameter_error,
    set_output,
)
from cosimrun.core.component import NO_EVENTS
from cosimrun.core.ports import PortSpec, PortType
from cosimrun.core.units import UnitLike, parse_unit, unit_str


def _real(name: str, direction: str, description: str) -> PortSpec:
    return PortSpec(name, PortType.REAL, direction, None, description)  # type: ignore[arg-type]


class Gain(StatelessComponent):
    """Gain ``y = k * u`` (direct feedthrough u -> y)."""

    RULES = {"k": Number(), "input_unit": Unit(), "output_unit": Unit()}

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.input_specs["u"] = _real("u", "in", "input")
        self.output_specs["y"] = _real("y", "out", "k * u")
        self.parameters.update(k=1.0, input_unit=None, output_unit=None)
        self.direct_feedthrough = {"y": {"u"}}

    def _port_units(self) -> dict[str, UnitLike]:
        p = self.parameters
        out = p["output_unit"] if p["output_unit"] is not None else p["input_unit"]
        return {"u": p["input_unit"], "y": out}

    def _update_output_states(self, t: float | None = None, event_names: Any = NO_EVENTS) -> None:
        set_output(self.outputs["y"], self.parameters["k"] * self.inputs["u"].value, self.t if t is None else t)


class Sum(StatelessComponent):
    """Signed sum ``y = s1*u1 + s2*u2 + ...`` with signs like ``"+-"`` (direct feedthrough)."""

    RULES = {"unit": Unit()}

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.output_specs["y"] = _real("y", "out", "signed sum of the inputs")
        self.parameters.update(signs="++", unit=None)
        self._declare_inputs("++")

    def _validate_parameter(self, name: str, value: Any) -> Any:
        if name == "signs":
            if isinstance(value, Sequence) and not isinstance(value, str) and value \
                    and all(v in (1, -1, "+", "-") for v in value):
                value = "".join("+" if v in (1, "+") else "-" for v in value)
            if not isinstance(value, str) or not value or set(value) - {"+", "-"}:
                raise parameter_error(self, name, "must be a non-empty string of '+' and '-' (one per input, "
                                      "e.g. '+-')", value)
            if value != self.parameters.get("signs") and self.is_initialized:
                raise RuntimeError(f"component {self.name!r} (Sum): 'signs' changes the inputs; set it before "
                                   "initialize (or after reset)")
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

    RULES = {"lower": Number(), "upper": Number(), "unit": Unit()}

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.input_specs["u"] = _real("u", "in", "input")
        self.output_specs["y"] = _real("y", "out", "u limited to [lower, upper]")
        self.parameters.update(lower=-1.0, upper=1.0, unit=None)
        self.direct_feedthrough = {"y": {"u"}}

    def _port_units(self) -> dict[str, UnitLike]:
        return {"u": self.parameters["unit"], "y": self.parameters["unit"]}

    def check_parameters(self) -> None:
        p = self.parameters
        if not p["lower"] <= p["upper"]:
            raise parameter_error(self, "lower", f"must be <= upper = {p['upper']!r}", p["lower"])

    def _update_output_states(self, t: float | None = None, event_names: Any = NO_EVENTS) -> None:
        p = self.parameters
        y = min(max(self.inputs["u"].value, p["lower"]), p["upper"])
        set_output(self.outputs["y"], y, self.t if t is None else t)


def _times_second(unit: UnitLike) -> str | None:
    """The unit of the time integral of a signal in *unit* (``None`` stays ``None``)."""
    if unit is None:
        return None
    return unit_str(parse_unit(f"({unit}) * s"))


class Integrator(OdeBlock):
    """Integrator ``dy/dt = k * u`` (state ``y``, initial value ``y0``; no feedthrough).

    ``output_unit`` defaults to ``input_unit`` times seconds (unit-less stays unit-less).
    """

    RULES = {"k": Number(), "input_unit": Unit(), "output_unit": Unit()}

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.parameters.update(k=1.0, input_unit=None, output_unit=None)
        self.add_state("y", None, 0.0, "integral of k * u")
        self.add_input("u", None, 0.0, "integrand")

    def _port_units(self) -> dict[str, UnitLike]:
        p = self.parameters
        out = p["output_unit"] if p["output_unit"] is not None else _times_second(p["input_unit"])
        return {"u": p["input_unit"], "y": out}

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return self.parameters["k"] * u


class FirstOrderLag(OdeBlock):
    """First-order lag ``T * dy/dt = k * u - y`` (state ``y``, initial value ``y0``; no feedthrough)."""

    RULES = {"k": Number(), "time_constant": Number(gt=0), "unit": Unit()}

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.parameters.update(k=1.0, time_constant=1.0, unit=None)
        self.add_state("y", None, 0.0, "lagged output")
        self.add_input("u", None, 0.0, "input")

    def _port_units(self) -> dict[str, UnitLike]:
        return {"u": self.parameters["unit"], "y": self.parameters["unit"]}

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        p = self.parameters
        return (p["k"] * u - x) / p["time_constant"]
