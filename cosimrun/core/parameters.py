"""Declared, typed component parameters: the public way for a component to describe and check its parameters.

A component class declares its parameters in the class attribute ``PARAMETERS``::

    from cosimrun.core import OdeComponent
    from cosimrun.parameters import Parameter

    class Coil(OdeComponent):
        PARAMETERS = {
            "L": Parameter(float, unit="H", default=0.5, gt=0, doc="inductance"),
            "R": Parameter(float, unit="ohm", default=1.0, ge=0, doc="winding resistance"),
            "core": Parameter("choice", choices=("air", "iron"), default="air", doc="core material"),
        }

Declared parameters start at their defaults, and every value goes through
:meth:`Parameter.check` in :meth:`~cosimrun.core.component.CoSimComponent.set_parameters`
(so the config builder and library users get the same checks before a run).
A parameter with a ``unit`` takes a plain number in that unit or a quantity
(``"500 mH"``, a pint quantity) that is converted to it when it is set; the
component stores plain floats. An invalid value raises a
:class:`~cosimrun.errors.ConfigError` keyed by the parameter's name, which the
config builder places at ``components.<name>.params.<key>``::

    components.coil.params.L: '2 s' has units of time, not of inductance (H)

A ``unit`` may name other parameters in braces (``"{unit}"``, ``"({unit}) / s"``):
the builtin sources take their magnitudes in the unit given by their ``unit``
parameter. Such a value is kept as given (a number or a quantity) until
:func:`value_in_unit` converts it, since the unit parameter may be set after it.
Subclasses inherit their bases' declarations and may add or redeclare entries.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from cosimrun.errors import ComponentContractError, ConfigError, did_you_mean, suggest

if TYPE_CHECKING:
    import pint

__all__ = [
    "PARAMETER_TYPES",
    "Parameter",
    "ParameterType",
    "declared_parameters",
    "dimension_name",
    "value_in_unit",
]

ParameterType = Literal["float", "int", "bool", "str", "unit", "choice", "path"]

PARAMETER_TYPES: tuple[str, ...] = ("float", "int", "bool", "str", "unit", "choice", "path")
"""The names a :class:`Parameter` ``type`` may take."""

_PYTHON_TYPES: dict[type, str] = {float: "float", int: "int", bool: "bool", str: "str", Path: "path"}

_NUMERIC = ("float", "int")

_UNIT_REFERENCE = re.compile(r"\{(\w+)\}")

_NAMED_DIMENSIONS = (
    "time", "length", "mass", "current", "temperature", "substance", "luminosity", "area", "volume",
    "frequency", "velocity", "acceleration", "force", "energy", "power", "pressure", "momentum", "density",
    "charge", "electric_potential", "resistance", "conductance", "capacitance", "inductance", "magnetic_flux",
    "magnetic_field", "volumetric_flow_rate", "viscosity", "entropy",
)
"""Dimensions named in messages, first match wins (so N*m reads as energy)."""


@dataclass(frozen=True)
class Parameter:
    """One declared parameter: its type, unit, default, bounds, choices and a one-line doc.

    *type* is one of :data:`PARAMETER_TYPES` or the Python type ``float``,
    ``int``, ``bool``, ``str`` or ``pathlib.Path``. ``None`` is a valid value
    exactly when *default* is ``None`` (read it as "not set"); a ``unit``
    parameter always accepts ``None`` (no unit). *unit* (numbers only): plain
    numbers are in it, quantities are converted to it. *gt*, *ge*, *lt*, *le*
    bound a number (in *unit*); *choices* lists the values of a ``choice``
    (matched case-insensitively).
    """

    type: ParameterType | type = "float"
    unit: str | None = None
    default: Any = None
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    choices: tuple[str, ...] = ()
    doc: str = ""

    def __post_init__(self) -> None:
        kind = _PYTHON_TYPES.get(self.type, self.type) if isinstance(self.type, type) else self.type
        if kind not in PARAMETER_TYPES:
            raise ComponentContractError(f"Parameter type {self.type!r} is not one of {', '.join(PARAMETER_TYPES)} "
                                         "(or float, int, bool, str, pathlib.Path)")
        object.__setattr__(self, "type", kind)
        if kind not in _NUMERIC and (self.unit is not None or self.bounds):
            raise ComponentContractError(f"a {kind} Parameter takes no unit or bounds (numbers only)")
        if kind == "choice":
            if not self.choices or not all(isinstance(c, str) for c in self.choices):
                raise ComponentContractError("a choice Parameter needs choices=(...) of strings")
            object.__setattr__(self, "choices", tuple(c.lower() for c in self.choices))
        elif self.choices:
            raise ComponentContractError(f"a {kind} Parameter takes no choices (use type 'choice')")
        if self.unit is not None and not self.unit_references:
            from cosimrun.core.units import parse_unit

            try:
                parse_unit(self.unit)
            except ValueError as exc:
                raise ComponentContractError(f"Parameter unit: {exc}") from None

    # ------------------------------------------------------------------ description
    @property
    def optional(self) -> bool:
        """Whether ``None`` is a valid value."""
        return self.default is None or self.type == "unit"

    @property
    def bounds(self) -> str:
        """The bounds as text, e.g. ``"> 0 and <= 1"`` (``""`` without bounds)."""
        parts = [f"{op} {bound:g}" for op, bound in ((">", self.gt), (">=", self.ge), ("<", self.lt), ("<=", self.le))
                 if bound is not None]
        return " and ".join(parts)

    @property
    def unit_references(self) -> tuple[str, ...]:
        """The parameters *unit* refers to in braces (``"{unit}"`` -> ``("unit",)``)."""
        return tuple(_UNIT_REFERENCE.findall(self.unit or ""))

    def requirement(self, unit: str | None = None) -> str:
        """What a valid value is, e.g. ``"a finite number > 0 (in H)"`` (*unit*: the resolved unit, if known)."""
        unit = unit or self.unit
        notes = []
        if self.type in _NUMERIC:
            text = "a finite number" if self.type == "float" else "an integer"
            if self.bounds:
                text += f" {self.bounds}"
            if unit is not None:
                notes.append(f"in {unit}")
        else:
            text = {
                "bool": "true or false",
                "str": "a non-empty string",
                "path": "a file path",
                "unit": "a unit such as 'm', 'deg' or 'N*m'",
                "choice": f"one of {', '.join(self.choices)}",
            }[self.type]
        if self.optional:
            notes.append("or null")
        return text + (f" ({', '.join(notes)})" if notes else "")

    # ------------------------------------------------------------------ checking
    def check(self, value: Any, name: str | None = None) -> Any:
        """*value* checked and converted (numbers to float/int in *unit*, paths to ``str``).

        Raises :class:`~cosimrun.errors.ConfigError` keyed *name* when the value is invalid.
        """
        try:
            return self._check(value)
        except _Invalid as exc:
            raise ConfigError(name, exc.message, suggestion=exc.suggestion) from None

    def _check(self, value: Any) -> Any:
        if isinstance(value, np.generic):
            value = value.item()
        if value is None and self.optional:
            return None
        if self.type in _NUMERIC:
            return self._number(value)
        if self.type == "bool":
            if not isinstance(value, bool):
                raise _Invalid(f"must be true or false, got {value!r}")
            return value
        if self.type == "choice":
            key = value.strip().lower() if isinstance(value, str) else value
            if key not in self.choices:
                close = did_you_mean(str(value), self.choices)
                raise _Invalid(f"{value!r} is not one of {', '.join(self.choices)}{suggest(str(value), self.choices)}",
                               close[0] if close else None)
            return key
        if self.type == "path" and isinstance(value, os.PathLike):
            value = os.fspath(value)
        if self.type == "unit":
            return _unit(value)
        if not isinstance(value, str) or not value.strip():
            raise _Invalid(f"must be {self.requirement()}, got {value!r}")
        return value

    def _number(self, value: Any) -> Any:
        raw = value
        if isinstance(value, str):
            value = _quantity(value, self.unit)
        if _is_quantity(value):
            if value.unitless:
                value = float(value.to("dimensionless").magnitude)
            elif self.unit_references:
                if not math.isfinite(float(value.magnitude)):
                    raise _Invalid(f"must be finite, got {raw!r}")
                return value  # converted by value_in_unit once the unit parameters are known
            else:
                value = convert(value, self.unit, raw)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            how = " or a quantity such as " + repr(f"1 {self.unit}") if self.unit and not self.unit_references else ""
            raise _Invalid(f"must be {self.requirement()}{how}, got {raw!r}")
        return self.within_bounds(value, raw)

    def within_bounds(self, value: float, raw: Any, unit: str | None = None) -> float | int:
        """*value* (a finite number in *unit*, default: the declared one) as ``float``/``int``, checked
        for integrality and bounds; *raw* is the value as given, for the message."""
        unit = unit or self.unit
        if self.type == "int" and not float(value).is_integer():
            raise _Invalid(f"must be {self.requirement(unit)}, got {raw!r}")
        ok = ((self.gt is None or value > self.gt) and (self.ge is None or value >= self.ge)
              and (self.lt is None or value < self.lt) and (self.le is None or value <= self.le))
        if not ok:
            shown = repr(raw)
            if not isinstance(raw, numbers.Real):
                shown += f" = {value:g}" + (f" {unit}" if unit else "")
            raise _Invalid(f"must be {self.requirement(unit)}, got {shown}")
        return int(value) if self.type == "int" else float(value)

    def resolve_unit(self, parameters: Mapping[str, Any]) -> str | None:
        """*unit* with its ``{name}`` references replaced by those parameters' values (``None``: no unit)."""
        if not self.unit_references:
            return self.unit
        whole = _UNIT_REFERENCE.fullmatch(self.unit or "")
        if whole:
            found = parameters.get(whole.group(1))
            return None if found is None else str(found)
        return _UNIT_REFERENCE.sub(lambda m: "1" if parameters.get(m.group(1)) is None
                                   else f"({parameters[m.group(1)]})", self.unit or "")


class _Invalid(Exception):
    """An invalid value, before the parameter's name is attached."""

    def __init__(self, message: str, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.message, self.suggestion = message, suggestion


def _is_quantity(value: Any) -> bool:
    import pint

    return isinstance(value, pint.Quantity)


def _quantity(text: str, unit: str | None) -> pint.Quantity:
    from cosimrun.core.units import Q_

    try:
        return Q_(text)
    except Exception as exc:  # pint's parser raises assorted exception types
        if unit is None:
            raise _Invalid(f"must be a finite number, got {text!r}") from None
        example = f"'1.5 {unit}'" if "{" not in unit else "'1.5' or '40 deg'"
        raise _Invalid(f"{text!r} is not a number or a quantity such as {example} ({exc})") from None


def _unit(value: Any) -> str:
    import pint

    from cosimrun.core.units import parse_unit, unit_str

    if isinstance(value, pint.Unit):
        return unit_str(value)  # type: ignore[return-value]
    if not isinstance(value, str):
        raise _Invalid(f"must be a unit such as 'm', 'deg' or 'N*m' (or null), got {value!r}")
    try:
        parse_unit(value)
    except ValueError as exc:
        raise _Invalid(str(exc)) from None
    return value


def dimension_name(unit: Any) -> str:
    """A readable name of *unit*'s physical dimension: ``"time"``, ``"inductance"``, ``"[length] ** 4"``."""
    from cosimrun.core.units import parse_unit, ureg

    dims = parse_unit(unit or "dimensionless").dimensionality
    if not dims:
        return "no dimension"
    for name in _NAMED_DIMENSIONS:
        if ureg.get_dimensionality(f"[{name}]") == dims:
            return name.replace("_", " ")
    return str(dims)


def convert(quantity: pint.Quantity, unit: str | None, raw: Any = None) -> float:
    """*quantity* as a float in *unit* (``None``: a plain number); the error names both dimensions."""
    from cosimrun.core.units import compile_conversion, units_compatible

    src = f"{quantity.units}"
    shown = repr(raw) if raw is not None else repr(str(quantity))
    if not units_compatible(src, unit):
        if unit is None:
            raise _Invalid(f"{shown} has units of {dimension_name(src)}; this parameter is a plain number")
        raise _Invalid(f"{shown} has units of {dimension_name(src)}, not of {dimension_name(unit)} ({unit})")
    value = compile_conversion(src, unit)(float(quantity.magnitude))
    if not math.isfinite(value):
        raise _Invalid(f"must be finite, got {shown}")
    return value


@cache
def declared_parameters(cls: type) -> dict[str, Parameter]:
    """The ``PARAMETERS`` of *cls* and its bases merged (a subclass's entries win, bases' order first)."""
    merged: dict[str, Parameter] = {}
    for klass in reversed(cls.__mro__):
        own = klass.__dict__.get("PARAMETERS")
        if not own:
            continue
        for name, decl in own.items():
            if not isinstance(decl, Parameter):
                raise ComponentContractError(f"{cls.__qualname__}.PARAMETERS[{name!r}] is {decl!r}, not a "
                                             "cosimrun.parameters.Parameter", component=cls.__qualname__)
            merged[name] = decl
    return merged


def value_in_unit(component: Any, name: str) -> float | None:
    """Parameter *name* of *component* as a float in its resolved unit (for units like ``"{unit}"``).

    Plain numbers are taken in that unit; quantities are converted. Raises
    :class:`~cosimrun.errors.ConfigError` keyed *name* on a dimension mismatch
    or a value out of bounds. ``None`` stays ``None``.
    """
    decl = declared_parameters(type(component))[name]
    value = component.parameters[name]
    if value is None:
        return None
    unit = decl.resolve_unit(component.parameters)
    try:
        raw = f"{value:~}" if _is_quantity(value) else value
        number = convert(value, unit, raw) if _is_quantity(value) else float(value)
        return decl.within_bounds(number, raw, unit)
    except _Invalid as exc:
        raise ConfigError(name, exc.message) from None
