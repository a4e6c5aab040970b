"""Shared machinery of the builtin components: unit parameters, cross-parameter checks, stateless base.

Parameters are declared with the public :class:`cosimrun.parameters.Parameter`
(``PARAMETERS = {"length": Parameter(float, unit="m", default=1.0, gt=0)}``),
which checks each value as it is set. Checks that involve several parameters
raise a :class:`~cosimrun.errors.ConfigError` (a ``ValueError``) through
:func:`parameter_error`, keyed by none of them. Parameters that set port
units are applied to the port specs right after :meth:`set_parameters`
(allowed only before ``initialize`` or after ``reset``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from cosimrun.core.component import NO_EVENTS, CoSimComponent
from cosimrun.core.ode import OdeComponent
from cosimrun.core.parameters import declared_parameters, value_in_unit
from cosimrun.core.ports import PortSpec, PortState
from cosimrun.core.units import UnitLike, unit_str
from cosimrun.errors import ComponentStateError, ConfigError

TIME_RTOL = 1e-12
"""Relative tolerance for comparing times with breakpoints (one ulp of float noise from ``t + dt``)."""


def time_tol(t: float) -> float:
    """Absolute time tolerance at time *t*."""
    return TIME_RTOL * max(1.0, abs(t))


def where(comp: CoSimComponent) -> str:
    """``component 'name' (ClassName)`` for error messages."""
    return f"component {comp.name!r} ({type(comp).__name__})"


def parameter_error(comp: CoSimComponent, name: str, requirement: str, value: Any) -> ConfigError:
    """``component 'p' (Pendulum): parameter 'length' must be > 0, got -1.0``, without a key: a check
    across parameters names no single one (the config builder places it at the component's ``params``)."""
    return ConfigError(None, f"{where(comp)}: parameter {name!r} {requirement}, got {value!r}")


# ---------------------------------------------------------------------------- mixin
class UnitParameters:
    """Mixin for :class:`CoSimComponent` subclasses: parameters that set port units, cross-parameter checks.

    Subclasses declare ``PARAMETERS`` and may override :meth:`_port_units`
    (port -> unit from the current parameters) and :meth:`check_parameters`
    (checks that involve several parameters, calling ``super()``; run by
    ``initialize`` and by the registry's ``create_component`` when it is given
    parameters).
    """

    def set_parameters(self, **parameters: Any) -> None:
        """Set parameters by name (see :meth:`CoSimComponent.set_parameters`) and update port units.

        A unit change after initialize raises :class:`~cosimrun.errors.ComponentStateError` (a ``RuntimeError``)
        and leaves the parameters as they were.
        """
        before = dict(self.parameters)  # type: ignore[attr-defined]
        super().set_parameters(**parameters)  # type: ignore[misc]
        try:
            self._apply_port_units()
        except ComponentStateError:
            self.parameters.clear()  # type: ignore[attr-defined]
            self.parameters.update(before)  # type: ignore[attr-defined]
            raise

    def check_parameters(self) -> None:
        """Raise a :class:`~cosimrun.errors.ConfigError` when parameters are inconsistent with each other.

        The base converts every parameter whose unit names another parameter
        (``unit="{unit}"``), so a quantity of the wrong dimension fails here.
        """
        for name, declared in declared_parameters(type(self)).items():
            if declared.unit_references:
                value_in_unit(self, name)

    def _port_units(self) -> dict[str, UnitLike]:
        """Hook: ``{port: unit}`` for ports whose unit follows a parameter."""
        return {}

    def _apply_port_units(self) -> None:
        comp: CoSimComponent = self  # type: ignore[assignment]
        for port, unit in self._port_units().items():
            spec = _declared_spec(comp, port)
            if spec is None or unit_str(spec.unit) == unit_str(unit):
                continue
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
        raise ComponentStateError(f"{where(comp)}: the unit of {port!r} can only change before initialize "
                                  "(or after reset)", component=comp.name)
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
class StatelessComponent(UnitParameters, CoSimComponent):
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
            raise ConfigError(None, f"{where(self)} has no state, got {sorted(state)}")
        self.t = float(t)
        if self.is_initialized:
            self._update_output_states(self.t, NO_EVENTS)

    def checkpoint_state(self) -> dict[str, Any]:
        """Time and port values (see :meth:`CoSimComponent.checkpoint_state`)."""
        return self._ports_checkpoint()

    def restore_checkpoint(self, state: Mapping[str, Any]) -> None:
        self._restore_ports_checkpoint(state)

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


def set_output(port: PortState, value: float | np.ndarray, t: float | None) -> None:
    """Write a float to an output port (no validation: the value is computed here); an ensemble's array of
    members' values (:attr:`~cosimrun.core.component.CoSimComponent.vectorizable`) is written as it is."""
    port.value = value if type(value) is np.ndarray else float(value)
    port.t_last = t


class OdeBlock(UnitParameters, OdeComponent):
    """Base of the builtin ODE components: unit parameters, cross-checks at initialize, cached parameters.

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
