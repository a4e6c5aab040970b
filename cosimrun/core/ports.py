"""Port specifications (immutable) and port states (mutable values).

A :class:`PortSpec` declares a port's name, type, direction and unit; the unit
is validated against the shared registry when the spec is built. A
:class:`PortState` holds the current value as a plain Python number in the
port's own unit, so reading a port in the step loop never touches pint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

import numpy as np
import pint

from cosimrun.core.units import (
    IncompatibleUnitsError,
    UnitLike,
    compile_conversion,
    parse_unit,
    unit_str,
    units_compatible,
)
from cosimrun.errors import ComponentContractError, ConfigError


class PortType(StrEnum):
    """Data type carried by a port."""

    REAL = "real"
    INT = "int"
    BOOL = "bool"
    STRING = "string"
    EVENT = "event"


Direction = Literal["in", "out"]
PortValue = float | int | bool | str


def _validate_unit(unit: UnitLike, port_name: str) -> None:
    """Raise :class:`ConfigError` naming the port when *unit* is not in the registry."""
    try:
        parse_unit(unit)
    except ConfigError as exc:
        raise ConfigError(None, f"port {port_name!r}: {exc.message}", suggestion=exc.suggestion) from None


def _coerce_numpy_scalar(value: Any) -> Any:
    """Turn numpy scalars (and 0-d arrays) into Python scalars."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    return value


_DEFAULTS: dict[PortType, PortValue] = {
    PortType.REAL: 0.0,
    PortType.INT: 0,
    PortType.BOOL: False,
    PortType.STRING: "",
    PortType.EVENT: False,
}


@dataclass(frozen=True)
class PortSpec:
    """Immutable declaration of one port of a component."""

    name: str
    type: PortType
    direction: Direction
    unit: UnitLike = None
    description: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise ConfigError(None, f"invalid port name {self.name!r}: a non-empty name without '/'")
        try:
            object.__setattr__(self, "type", PortType(self.type))
        except ValueError:
            raise ConfigError(
                None, f"port {self.name!r}: unknown port type {self.type!r}; "
                f"valid: {', '.join(t.value for t in PortType)}"
            ) from None
        if self.direction not in ("in", "out"):
            raise ConfigError(None, f"port {self.name!r}: direction must be 'in' or 'out', got {self.direction!r}")
        if self.unit is not None and self.type is not PortType.REAL:
            raise ConfigError(None, f"port {self.name!r}: only REAL ports carry a unit (type {self.type.value})")
        _validate_unit(self.unit, self.name)

    @property
    def unit_name(self) -> str | None:
        """The unit as a string (``None`` for unit-less ports)."""
        return unit_str(self.unit)

    @property
    def default(self) -> PortValue:
        """The value a fresh port starts with."""
        return _DEFAULTS[self.type]

    def validate_value(self, value: Any, *, coerce_numpy: bool = True) -> PortValue:
        """Return *value* checked (and coerced) for this port's type.

        REAL ports accept pint quantities, which are converted to the port's unit.
        Raises :class:`~cosimrun.errors.ComponentContractError` (a ``TypeError``) for a value of the wrong type.
        """
        if coerce_numpy:
            value = _coerce_numpy_scalar(value)
        return _VALIDATORS[self.type](self, value)

    def _validate_real(self, value: Any) -> float:
        if type(value) is float:
            return value
        if isinstance(value, pint.Quantity):
            target = self.unit if self.unit is not None else "dimensionless"
            return float(value.to(target).magnitude)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._wrong_type("real", "a number", value)
        return float(value)

    def _validate_int(self, value: Any) -> int:
        if type(value) is int:
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong_type("int", "an integer", value)
        return int(value)

    def _validate_bool(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise self._wrong_type(self.type.value, "a bool", value)

    def _validate_string(self, value: Any) -> str:
        if not isinstance(value, str):
            raise self._wrong_type("string", "a str", value)
        return value

    _validate_event = _validate_bool

    def _wrong_type(self, kind: str, expected: str, value: Any) -> ComponentContractError:
        return ComponentContractError(f"port {self.name!r} ({kind}) expects {expected}, got {type(value).__name__} "
                                      f"{value!r}", port=self.name)

    @staticmethod
    def compatible(spec1: PortSpec, spec2: PortSpec) -> bool:
        """True when *spec1* (source) may drive *spec2* (destination)."""
        if spec1.type != spec2.type:
            return False
        if spec1.type is PortType.REAL:
            return PortSpec._check_unit_compatibility(spec1.unit, spec2.unit)
        return True

    @staticmethod
    def _check_unit_compatibility(unit1: UnitLike, unit2: UnitLike) -> bool:
        return units_compatible(unit1, unit2)


_VALIDATORS = {
    PortType.REAL: PortSpec._validate_real,
    PortType.INT: PortSpec._validate_int,
    PortType.BOOL: PortSpec._validate_bool,
    PortType.STRING: PortSpec._validate_string,
    PortType.EVENT: PortSpec._validate_event,
}


@dataclass(slots=True)
class PortState:
    """Current value of one port, stored as a plain number in the port's unit."""

    spec: PortSpec
    value: PortValue | None = None
    t_last: float | None = None
    derivatives: tuple[float, ...] = ()
    """An input's first, second, ... time derivatives at the start of the coming step, set by the master
    for components that interpolate inputs (see ``CoSimComponent.interpolates_inputs``); empty: held."""
    _validate: Any = field(default=None, repr=False, compare=False)
    _real: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._validate = _VALIDATORS[self.spec.type]
        self._real = self.spec.type is PortType.REAL
        if self.value is None:
            self.value = self.spec.default
        else:
            self.value = self.spec.validate_value(self.value)

    def _get_default_value(self) -> PortValue:
        return self.spec.default

    def set(self, value: Any, t: float | None = None) -> None:
        """Validate and store *value* (quantities are converted to the port's unit)."""
        if type(value) is float and self._real:
            self.value = value
        else:
            self.value = self._validate(self.spec, _coerce_numpy_scalar(value))
        self.t_last = t

    def _convert_real_value(self, value: Any) -> float:
        return self.spec._validate_real(value)

    def get(self, as_unit: str | None = None) -> PortValue | None:
        """Return the value, converted to *as_unit* for REAL ports when given."""
        if as_unit is None:
            return self.value
        return self._get_with_unit_conversion(as_unit)

    def _get_with_unit_conversion(self, target_unit: str) -> float:
        if self.spec.type is not PortType.REAL:
            raise ComponentContractError(f"port {self.spec.name!r} ({self.spec.type.value}) has no unit to convert",
                                         port=self.spec.name)
        try:
            conv = compile_conversion(self.spec.unit, target_unit)
        except IncompatibleUnitsError as exc:
            raise IncompatibleUnitsError(f"port {self.spec.name!r}: {exc}") from None
        except ConfigError as exc:
            raise ConfigError(None, f"port {self.spec.name!r}: {exc.message}", suggestion=exc.suggestion) from None
        return conv.scale * self.value + conv.offset

    def compatible_with(self, other: PortSpec) -> bool:
        """True when this port may be connected to *other*."""
        return PortSpec.compatible(self.spec, other)

    def reset(self) -> None:
        """Return to the type's default value and forget the timestamp."""
        self.value = self.spec.default
        self.t_last = None
        self.derivatives = ()
