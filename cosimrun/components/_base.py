"""Shared machinery of the builtin components: parameter rules, unit parameters, stateless base.

Parameters are checked by declarative rules (``RULES = {"length": Number(gt=0)}``);
an invalid value raises ``ValueError`` naming the component, the parameter, the
value and what would have been valid. Parameters that set port units are
applied to the port specs right after :meth:`set_parameters` (allowed only
before ``initialize`` or after ``reset``).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pint

from cosimrun.core.component import NO_EVENTS, CoSimComponent
from cosimrun.core.ode import OdeComponent
from cosimrun.core.ports import PortSpec, PortState
from cosimrun.core.units import Q_, UnitLike, parse_unit, unit_str
from cosimrun.errors import suggest

TIME_RTOL = 1e-12
"""Relative tolerance for comparing times with breakpoints (one ulp of float noise from ``t + dt``)."""


def time_tol(t: float) -> float:
    """Absolute time tolerance at time *t*."""
    return TIME_RTOL * max(1.0, abs(t))


def where(comp: CoSimComponent) -> str:
    """``component 'name' (ClassName)`` for error messages."""
    return f"component {comp.name!r} ({type(comp).__name__})"


def parameter_error(comp: CoSimComponent, name: str, requirement: str, value: Any) -> ValueError:
    """``component 'p' (Pendulum): parameter 'length' must be > 0, got -1.0``."""
    return ValueError(f"{where(comp)}: parameter {name!r} {requirement}, got {value!r}")


# ---------------------------------------------------------------------------- rules
class Rule:
    """Checks (and coerces) one parameter value."""

    def check(self, comp: CoSimComponent, name: str, value: Any) -> Any:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Number(Rule):
    """A finite real number within optional bounds; ``optional`` also accepts ``None``."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    optional: bool = False
    integer: bool = False

    def requirement(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        parts = [f"{op} {bound:g}" for op, bound in ((">", self.gt), (">=", self.ge), ("<", self.lt), ("<=", self.le))
                 if bound is not None]
        text = f"must be {kind}" + (f" {' and '.join(parts)}" if parts else "")
        return text + (" (or null)" if self.optional else "")

    def check(self, comp: CoSimComponent, name: str, value: Any) -> float | int | None:
        if value is None and self.optional:
            return None
        if isinstance(value, np.generic):
            value = value.item()
        ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
        if ok and self.integer:
            ok = float(value).is_integer()
        if ok:
            ok = ((self.gt is None or value > self.gt) and (self.ge is None or value >= self.ge)
                  and (self.lt is None or value < self.lt) and (self.le is None or value <= self.le))
        if not ok:
            raise parameter_error(comp, name, self.requirement(), value)
        return int(value) if self.integer else float(value)


@dataclasses.dataclass(frozen=True)
class Choice(Rule):
    """One of a fixed set of strings (case-insensitive)."""

    options: tuple[str, ...]

    def check(self, comp: CoSimComponent, name: str, value: Any) -> str:
        key = value.strip().lower() if isinstance(value, str) else value
        if key not in self.options:
            hint = suggest(str(value), self.options)
            raise parameter_error(comp, name, f"must be one of {', '.join(self.options)}{hint}", value)
        return key


@dataclasses.dataclass(frozen=True)
class Flag(Rule):
    """``True`` or ``False``."""

    def check(self, comp: CoSimComponent, name: str, value: Any) -> bool:
        if isinstance(value, np.bool_):
            value = bool(value)
        if not isinstance(value, bool):
            raise parameter_error(comp, name, "must be true or false", value)
        return value


@dataclasses.dataclass(frozen=True)
class Text(Rule):
    """A non-empty string (or ``None`` when optional)."""

    optional: bool = False

    def check(self, comp: CoSimComponent, name: str, value: Any) -> str | None:
        if value is None and self.optional:
            return None
        if hasattr(value, "__fspath__"):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            raise parameter_error(comp, name, "must be a non-empty string" + (" (or null)" if self.optional else ""),
                                  value)
        return value


@dataclasses.dataclass(frozen=True)
class Unit(Rule):
    """A unit string known to the shared registry, or ``None`` for a unit-less port."""

    def check(self, comp: CoSimComponent, name: str, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, pint.Unit):
            return unit_str(value)
        if not isinstance(value, str):
            raise parameter_error(comp, name, "must be a unit string such as 'm', 'deg' or 'N*m' (or null)", value)
        try:
            parse_unit(value)
        except ValueError as exc:
            raise parameter_error(comp, name, f"must be a known unit ({exc})", value) from None
        return value


@dataclasses.dataclass(frozen=True)
class Magnitude(Rule):
    """A number in the unit of the related port, or a quantity (``"40 deg"``) converted at initialize."""

    def check(self, comp: CoSimComponent, name: str, value: Any) -> Any:
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, str):
            try:
                q = Q_(value)
            except Exception as exc:  # pint raises several unrelated types
                raise parameter_error(comp, name, f"must be a number or a quantity like '40 deg' ({exc})",
                                      value) from None
            value = q if not q.unitless else q.magnitude
        if isinstance(value, pint.Quantity):
            if not math.isfinite(float(value.magnitude)):
                raise parameter_error(comp, name, "must be finite", value)
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise parameter_error(comp, name, "must be a finite number or a quantity like '40 deg'", value)
        return float(value)


def magnitude(comp: CoSimComponent, name: str, value: Any, unit: UnitLike) -> float:
    """*value* (number or quantity) as a plain float in *unit*; ``ValueError`` on a dimension mismatch."""
    if not isinstance(value, pint.Quantity):
        return float(value)
    try:
        return float(value.to(unit if unit is not None else "dimensionless").magnitude)
    except pint.DimensionalityError:
        raise parameter_error(comp, name, f"must be convertible to the port unit {unit or 'dimensionless'!r}",
                              str(value)) from None


# ---------------------------------------------------------------------------- mixin
class RuledParameters:
    """Mixin for :class:`CoSimComponent` subclasses: rule-checked parameters and unit parameters.

    Subclasses set ``RULES`` and may override :meth:`_port_units` (port -> unit
    from the current parameters) and :meth:`check_parameters` (checks that
    involve several parameters; run by ``initialize`` and by the registry's
    ``create_component`` when it is given parameters).
    """

    RULES: ClassVar[Mapping[str, Rule]] = {}

    def _validate_parameter(self, name: str, value: Any) -> Any:
        rule = self.RULES.get(name)
        if rule is not None:
            return rule.check(self, name, value)  # type: ignore[arg-type]
        return super()._validate_parameter(name, value)  # type: ignore[misc]

    def set_parameters(self, **parameters: Any) -> None:
        """Set parameters by name (see :meth:`CoSimComponent.set_parameters`) and update port units.

        A unit change after initialize raises ``RuntimeError`` and leaves the parameters as they were.
        """
        before = dict(self.parameters)  # type: ignore[attr-defined]
        super().set_parameters(**parameters)  # type: ignore[misc]
        try:
            self._apply_port_units()
        except RuntimeError:
            self.parameters.clear()  # type: ignore[attr-defined]
            self.parameters.update(before)  # type: ignore[attr-defined]
            raise

    def check_parameters(self) -> None:
        """Hook: raise ``ValueError`` when parameters are inconsistent with each other."""

    def _port_units(self) -> dict[str, UnitLike]:
        """Hook: ``{port: unit}`` for ports whose unit follows a parameter."""
        return {}

    def _apply_port_units(self) -> None:
        comp: CoSimComponent = self  # type: ignore[assignment]
        for port, unit in self._port_units().items():
            spec = _declared_spec(comp, port)
            if spec is None or unit_str(spec.unit) == unit_str(unit):
                continue
            if comp.is_initialized:
                raise RuntimeError(f"{where(comp)}: the unit of {port!r} can only change before initialize "
                                   "(or after reset)")
            set_port_unit(comp, port, unit)


def _declared_spec(comp: CoSimComponent, port: str) -> PortSpec | None:
    spec = comp.input_specs.get(port) or comp.output_specs.get(port)
    if spec is None and isinstance(comp, OdeComponent) and port in comp._state_index:
        spec = comp._state_specs[comp._state_index[port]]
    return spec


def set_port_unit(comp: CoSimComponent, port: str, unit: UnitLike) -> None:
    """Re-declare port (or ODE state) *port* of an uninitialized *comp* with another unit.

    For :class:`OdeComponent` states this reaches into the ODE helper's private
    spec list (core has no public way to re-declare a state's unit).
    """
    if comp.is_initialized:
        raise RuntimeError(f"{where(comp)}: the unit of {port!r} can only change before initialize (or after reset)")
    if port in comp.input_specs:
        new = dataclasses.replace(comp.input_specs[port], unit=unit)
        comp.input_specs[port] = new
        if port in comp.inputs:
            comp.inputs[port] = PortState(new, comp.inputs[port].value)
        return
    new = None
    if port in comp.output_specs:
        new = dataclasses.replace(comp.output_specs[port], unit=unit)
        comp.output_specs[port] = new
        comp.outputs.pop(port, None)
        comp.history._port_histories.pop(port, None)
    if isinstance(comp, OdeComponent) and port in comp._state_index:
        i = comp._state_index[port]
        comp._state_specs[i] = new or dataclasses.replace(comp._state_specs[i], unit=unit)


# ---------------------------------------------------------------------------- stateless base
class StatelessComponent(RuledParameters, CoSimComponent):
    """Base of memoryless components (sources and algebraic blocks): outputs are functions of t and inputs.

    Rollback is trivial (time and port values), so these components also take
    part in event localization under the hybrid master.
    """

    def _initialize_component(self, t0: float) -> None:
        self.check_parameters()
        self._setup()

    def _setup(self) -> None:
        """Hook: precompute from parameters at initialize."""

    def _do_step_internal(self, t: float, dt: float) -> None:
        pass

    def get_state(self) -> dict[str, Any]:
        """No physical state: ``{}``."""
        return {}

    def set_state(self, state: dict[str, Any], t: float) -> None:
        """Accepts only the empty state; moves to time *t*."""
        if state:
            raise ValueError(f"{where(self)} has no state, got {sorted(state)}")
        self.t = float(t)
        if self.is_initialized:
            self._update_output_states(self.t, NO_EVENTS)

    def snapshot_state(self) -> Any:
        """Time and port values."""
        ports = (*self.inputs.values(), *self.outputs.values())
        return self.t, tuple((p, p.value, p.t_last) for p in ports)

    def restore_state(self, snapshot: Any, t: float) -> None:
        """Return to *snapshot* (taken at *t*)."""
        t_snap, ports = snapshot
        for port, value, t_last in ports:
            port.value, port.t_last = value, t_last
        self.t = t_snap


def set_output(port: PortState, value: float, t: float | None) -> None:
    """Write a float to an output port (no validation: the value is computed here)."""
    port.value = float(value)
    port.t_last = t


class OdeBlock(RuledParameters, OdeComponent):
    """Base of the builtin ODE components: parameter rules, cross-checks at initialize, cached parameters.

    Subclasses override :meth:`_refresh` to precompute constants from
    parameters; it runs after every :meth:`set_parameters` and at initialize.
    """

    def set_parameters(self, **parameters: Any) -> None:
        super().set_parameters(**parameters)
        self._refresh()

    def _initialize_component(self, t0: float) -> None:
        self.check_parameters()
        self._refresh()
        super()._initialize_component(t0)

    def _refresh(self) -> None:
        """Hook: cache values derived from parameters (must not raise for consistent parameters)."""
