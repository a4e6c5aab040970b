"""Components with continuous states: declarations, parameters, rollback, events, the model hooks; OdeComponent.

:class:`ContinuousComponent` holds what every model with continuous states
shares, whatever its equations: states, inputs and outputs with units, the
tolerance and initial-state parameters, rollback, physical state, state events
and the pre/post-integrate hooks. Integration is delegated to an
:class:`~cosimrun.core.ode.base.Integrator`. :class:`OdeComponent` is the one
for ``dx/dt = derivatives(t, x, u)``, with the integrator that the
``integrator`` parameter names in :data:`~cosimrun.core.ode.registry.INTEGRATORS`;
:class:`~cosimrun.core.dae.DaeComponent` is the one for residuals.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pint

from cosimrun.core.component import NO_EVENTS, CoSimComponent, check_state_names, invalid_parameter
from cosimrun.core.ode.base import INTEGRATOR_DEFAULTS, Integrator, StateEvent, StateFunction, StateUpdate
from cosimrun.core.ode.registry import INTEGRATORS
from cosimrun.core.ports import PortSpec, PortState, PortType
from cosimrun.core.units import Q_, UnitLike, compile_conversion
from cosimrun.errors import (
    ComponentStateError,
    ConfigError,
    DuplicateNameError,
    MissingNameError,
    ModelOutputError,
    UnknownNameError,
    suggest,
)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    owner: int
    t: float
    x: np.ndarray
    inputs: tuple[tuple[PortState, Any, float | None], ...]
    outputs: tuple[tuple[PortState, Any, float | None], ...]
    memory: Any
    extra: Any


class ContinuousComponent(CoSimComponent):
    """Base class of models with continuous states advanced by an :class:`Integrator`.

    Declare in ``__init__`` with :meth:`add_state`, :meth:`add_input`,
    :meth:`add_output` and :meth:`add_state_event`; update ``self.parameters``
    (do not replace the dict: it already holds the solver parameters and
    the initial-state parameters ``f"{state}0"``). For explicit outputs
    implement :meth:`compute_outputs`. A subclass says which solver parameters
    it has (:meth:`_solver_defaults`) and which integrator it uses
    (:meth:`_integrator_for`), and defines the model equations that integrator calls.

    Direct feedthrough: state outputs never depend on inputs. For explicit
    outputs, declare it with ``add_output(..., feedthrough=...)``; outputs left
    undeclared are found by the base class's perturbation test
    (``_detect_direct_feedthrough``), which can miss a dependence that vanishes
    at the initial point (e.g. ``y = x * u`` with ``x0 = 0``).

    Events: :meth:`add_state_event` registers an event indicator ``g(t, x, u)``;
    the integrator reports crossings inside a macro step through
    :meth:`report_internal_event` and the registered ``update`` is applied by
    ``handle_event``. Subclasses may also override ``_handle_events_internal``
    (call ``super()`` to keep the updates) and modify :attr:`x` in place.
    Other discrete state kept in attributes must be saved for rollback by
    overriding :meth:`_snapshot_extra` and :meth:`_restore_extra`.

    Inputs: an input whose port carries derivatives (``PortState.derivatives``,
    set by the master) is the polynomial ``value + d1 (s - t) + d2 (s - t)**2 / 2``
    over the step from ``t``; the integrator evaluates it at its own times
    (:attr:`input_at`), so the coupling keeps the extrapolation's order.
    """

    interpolates_inputs: ClassVar[bool] = True

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.input_at: Callable[[float], np.ndarray] | None = None
        """The inputs as a function of time over the current step, when any varies (else ``None``: held)."""
        self.parameters.update(self._solver_defaults())
        self._state_specs: list[PortSpec] = []
        self._state_index: dict[str, int] = {}
        self._state_outputs: list[str] = []
        self._initial_params: dict[str, int] = {}
        self._initial_defaults: dict[str, float] = {}
        self._initial_fixed: dict[int, float] = {}
        self._input_names: list[str] = []
        self._input_defaults: dict[str, float] = {}
        self._output_names: list[str] = []
        self._declared_feedthrough: dict[str, set[str] | bool | None] = {}
        self._state_events: dict[str, StateEvent] = {}
        self._x = np.zeros(0)
        self._u = np.zeros(0)
        self._in_ports: list[PortState] = []
        self._state_ports: list[tuple[PortState, int]] = []
        self._alg_ports: list[PortState] = []
        self._has_pre = False
        self._has_post = False
        self._integrator: Integrator = self._configured_integrator(None)

    # ------------------------------------------------------------------ declaration
    def add_state(
        self,
        name: str,
        unit: UnitLike = None,
        initial: float = 0.0,
        description: str | None = None,
        output: bool = True,
        parameter: bool = True,
    ) -> int:
        """Declare a continuous state; returns its index in ``x``.

        The initial value becomes parameter ``f"{name}0"`` (with ``parameter=False``
        it stays *initial*, for a state whose initial value the subclass derives
        from other parameters in :meth:`_initial_state`); with ``output=True``
        the state is also an output port *name*.
        """
        self._check_declarable(name)
        spec = PortSpec(name, PortType.REAL, "out", unit, description)
        param = f"{name}0"
        if parameter and param in self.parameters:
            raise DuplicateNameError(f"component {self.name!r}: initial-state parameter {param!r} of state {name!r} "
                                     "clashes with an existing parameter", kind="parameter", name=param)
        index = len(self._state_specs)
        self._state_specs.append(spec)
        self._state_index[name] = index
        if output:
            self.output_specs[name] = spec
            self._state_outputs.append(name)
        if not parameter:
            self._initial_fixed[index] = self._to_state_unit(initial, spec, "initial value")
            return index
        self._initial_params[param] = index
        value = self._validate_parameter(param, initial)
        self.parameters[param] = value
        self._initial_defaults[param] = value
        return index

    def add_input(self, name: str, unit: UnitLike = None, default: float = 0.0, description: str | None = None) -> int:
        """Declare a real input port; returns its index in ``u``."""
        self._check_declarable(name)
        spec = PortSpec(name, PortType.REAL, "in", unit, description)
        port = PortState(spec, default)
        self.input_specs[name] = spec
        self.inputs[name] = port
        self._input_defaults[name] = port.value
        self._input_names.append(name)
        return len(self._input_names) - 1

    def add_output(
        self,
        name: str,
        unit: UnitLike = None,
        description: str | None = None,
        feedthrough: bool | Iterable[str] | None = None,
    ) -> int:
        """Declare an explicit output computed by :meth:`compute_outputs`; returns its index.

        *feedthrough*: ``True`` (depends on every input), ``False`` (on none), a
        collection of input names, or ``None`` to let the perturbation test decide.
        """
        self._check_declarable(name)
        spec = PortSpec(name, PortType.REAL, "out", unit, description)
        if feedthrough is not None and not isinstance(feedthrough, bool):
            feedthrough = set(feedthrough)
            for inp in feedthrough:
                if inp not in self._input_names:
                    raise UnknownNameError("input", inp, self._input_names,
                                           f"in feedthrough of output {name!r} of component {self.name!r}")
        self.output_specs[name] = spec
        self._output_names.append(name)
        self._declared_feedthrough[name] = feedthrough
        return len(self._output_names) - 1

    def add_state_event(
        self,
        name: str,
        func: StateFunction,
        direction: int = 0,
        update: StateUpdate | None = None,
    ) -> None:
        """Register the event indicator *name* = ``func(t, x, u)`` (boolean EVENT port *name*).

        While integrating, a crossing (``crossed`` with *direction*) is reported
        as an internal event hint with the tightest bracket the integrator has.
        ``update(t, x, u)`` returns the state right after the event; it runs
        in ``handle_event``.
        """
        if name in self._state_index or name in self.input_specs or name in self._output_names:
            raise DuplicateNameError(f"component {self.name!r}: event {name!r} clashes with a state or port of that "
                                     "name", kind="event", name=name)
        event = StateEvent(name, func, direction, update)
        self.add_event_indicator(name, lambda comp: func(comp.t, comp._x, comp._gather_inputs()), direction)
        self._state_events[name] = event

    def _check_declarable(self, name: str) -> None:
        if self.is_initialized:
            raise ComponentStateError(f"component {self.name!r}: declare {name!r} before initialize()",
                                      component=self.name)
        if name in self._state_index or name in self.input_specs or name in self.output_specs:
            raise DuplicateNameError(f"component {self.name!r}: a state or port named {name!r} already exists",
                                     kind="state or port", name=name)

    @property
    def state_names(self) -> tuple[str, ...]:
        """State names in ``x`` order."""
        return tuple(s.name for s in self._state_specs)

    @property
    def input_names(self) -> tuple[str, ...]:
        """Input names in ``u`` order."""
        return tuple(self._input_names)

    @property
    def output_names(self) -> tuple[str, ...]:
        """Explicit output names in :meth:`compute_outputs` order."""
        return tuple(self._output_names)

    @property
    def state_events(self) -> Mapping[str, StateEvent]:
        """The registered state events by name."""
        return self._state_events

    @property
    def x(self) -> np.ndarray:
        """The live state vector (before ``initialize``: a copy of the initial-state parameters)."""
        return self._x if self.is_initialized else self._initial_state()

    # ------------------------------------------------------------------ model hooks
    def compute_outputs(self, t: float, x: np.ndarray, u: np.ndarray) -> Sequence[float]:
        """Values of the explicit outputs in declaration order (a scalar if there is one)."""
        if self._output_names:
            raise NotImplementedError(f"component {self.name!r} declares outputs {self._output_names} "
                                      "but does not implement compute_outputs(t, x, u)")
        return ()

    def pre_integrate(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray | None:
        """Called once per macro step before integrating; a returned array overrides the state."""
        return None

    def post_integrate(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray | None:
        """Called once per macro step after integrating (*t* is the step end); may override the state."""
        return None

    def _snapshot_extra(self) -> Any:
        """Hook: discrete state of a subclass to keep in snapshots (copy mutable objects)."""
        return None

    def _restore_extra(self, extra: Any) -> None:
        """Hook: restore what :meth:`_snapshot_extra` returned."""

    def _after_set_state(self, t: float) -> None:
        """Hook: called after :meth:`set_state` replaced ``x`` at time *t*."""

    # ------------------------------------------------------------------ parameters
    def _validate_parameter(self, name: str, value: Any) -> Any:
        if name == "rtol":
            return self._positive(name, value)
        if name == "atol":
            if isinstance(value, (list, tuple, np.ndarray)):
                arr = np.array([self._positive(name, v) for v in value], dtype=float)
                if arr.shape != (len(self._state_specs),):
                    raise invalid_parameter(name, value, f"component {self.name!r}: atol needs one value per state "
                                                         f"({len(self._state_specs)}), got {len(arr)}")
                return arr
            return self._positive(name, value)
        if name == "max_substep":
            return None if value is None else self._positive(name, value)
        index = self._initial_params.get(name)
        if index is not None:
            try:
                return self._to_state_unit(value, self._state_specs[index], f"parameter {name!r}")
            except ConfigError as exc:
                raise invalid_parameter(name, value, exc.message) from None
        return super()._validate_parameter(name, value)

    def _positive(self, name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not value > 0 \
                or not math.isfinite(value):
            raise invalid_parameter(name, value, f"component {self.name!r}: {name} must be a finite number > 0, "
                                                 f"got {value!r}")
        return float(value)

    def _to_state_unit(self, value: Any, spec: PortSpec, what: str, unit: Any = ...) -> float:
        """*value* (number, pint quantity or string like ``"30 deg"``) converted to the state's unit.

        *unit* is the unit of a plain number (left out: the state's own unit).
        """
        try:
            if isinstance(value, str):
                text = value
                try:
                    value = Q_(text)
                except Exception as exc:  # pint's parser raises assorted exception types
                    raise ConfigError(None, f"cannot parse {text!r} as a quantity") from exc
                if value.unitless:
                    value = value.magnitude
            if isinstance(value, pint.Quantity):
                unit, value = f"{value.units}", value.magnitude
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise ConfigError(None, f"expected a number, got {type(value).__name__} {value!r}")
            value = float(value)
            if unit is not ...:
                target = spec.unit if spec.unit is not None or unit is None else "dimensionless"
                value = compile_conversion(unit, target)(value)
        except (TypeError, ValueError, pint.PintError) as exc:
            raise ConfigError(None, f"component {self.name!r}: {what} for state {spec.name!r} "
                                    f"[{spec.unit_name or 'no unit'}]: {exc}") from None
        if not math.isfinite(value):
            raise ConfigError(None, f"component {self.name!r}: {what} for state {spec.name!r} must be finite, "
                                    f"got {value!r}")
        return value

    def set_parameters(self, **parameters: Any) -> None:
        super().set_parameters(**parameters)
        self._compile_integrator()

    @abstractmethod
    def _solver_defaults(self) -> Mapping[str, Any]:
        """The solver parameters (``rtol``, ``atol``, ``max_substep`` and any others) with their defaults."""

    @abstractmethod
    def _integrator_for(self, settings: Mapping[str, Any], current: Integrator | None) -> Integrator:
        """The integrator for the solver *settings*: *current* (``None`` at construction) when it fits."""

    def _configured_integrator(self, current: Integrator | None) -> Integrator:
        settings = {name: self.parameters.get(name, default) for name, default in self._solver_defaults().items()}
        integrator = self._integrator_for(settings, current)
        integrator.configure(settings)
        return integrator

    def _compile_integrator(self) -> None:
        """Configure the integrator the parameters choose; a change of method starts without memory."""
        self._integrator = self._configured_integrator(self._integrator)

    def _initial_state(self) -> np.ndarray:
        """The state at ``initialize``: the initial-state parameters (fixed values for states without one).

        A subclass whose initial state follows from other parameters overrides it.
        """
        params, fixed = self.parameters, self._initial_fixed
        return np.array([fixed[i] if i in fixed else params[f"{s.name}0"] for i, s in enumerate(self._state_specs)],
                        dtype=float)

    # ------------------------------------------------------------------ lifecycle
    def _initialize_component(self, t0: float) -> None:
        params = self.parameters
        for name, default in (*self._solver_defaults().items(), *self._initial_defaults.items()):
            params[name] = self._validate_parameter(name, params.get(name, default))
        self._compile_integrator()
        self._x = self._initial_state()
        self._in_ports = [self.inputs[n] for n in self._input_names]
        self._u = np.array([p.value for p in self._in_ports], dtype=float)
        self._state_ports = [(self.outputs[n], self._state_index[n]) for n in self._state_outputs]
        self._alg_ports = [self.outputs[n] for n in self._output_names]
        self._integrator.start(len(self._state_specs))
        cls = type(self)
        self._has_pre = cls.pre_integrate is not ContinuousComponent.pre_integrate
        self._has_post = cls.post_integrate is not ContinuousComponent.post_integrate

    def reset(self) -> None:
        """Forget time and history; inputs return to their declared defaults."""
        super().reset()
        for name, value in self._input_defaults.items():
            self.inputs[name].value = value

    def _gather_inputs(self) -> np.ndarray:
        u = self._u
        for i, port in enumerate(self._in_ports):
            u[i] = port.value
        return u

    def _update_output_states(self, t: float | None = None, event_names: Sequence[str] = NO_EVENTS) -> None:
        t = self.t if t is None else t
        x = self._x
        if self._state_ports:
            values = x.tolist()
            for port, i in self._state_ports:
                port.value = values[i]
                port.t_last = t
        ports = self._alg_ports
        if ports:
            ys = self.compute_outputs(t, x, self._gather_inputs())
            if np.ndim(ys) == 0:
                ys = (ys,)
            if len(ys) != len(ports):
                raise ModelOutputError(f"component {self.name!r}: compute_outputs returned {len(ys)} values "
                                       f"for {len(ports)} outputs {self._output_names}", component=self.name,
                                       time=t, function="compute_outputs", expected=(len(ports),), got=(len(ys),))
            for port, y in zip(ports, ys, strict=True):
                port.value = float(y)
                port.t_last = t

    def _detect_direct_feedthrough(self) -> dict[str, set[str]]:
        declared = self._declared_feedthrough
        if any(declared[o] is None for o in self._output_names):
            result = super()._detect_direct_feedthrough()
        else:
            result = {name: set() for name in self.outputs}
        everything = set(self._input_names)
        for out, dep in declared.items():
            if dep is not None:
                result[out] = everything.copy() if dep is True else set() if dep is False else set(dep)
        for name in self._state_outputs:
            result[name] = set()
        return result

    # ------------------------------------------------------------------ stepping
    def _input_polynomial(self, t: float, u: np.ndarray) -> Callable[[float], np.ndarray] | None:
        """The inputs over a step from *t* as a function of time, when a port carries derivatives."""
        orders = [p.derivatives for p in self._in_ports]
        if not any(orders):
            return None
        n = max(len(d) for d in orders)
        d = np.zeros((n, len(u)))
        for i, derivs in enumerate(orders):
            d[: len(derivs), i] = derivs
        u0 = u.copy()
        d1, d2 = d[0], (0.5 * d[1] if n > 1 else None)

        def input_at(s: float) -> np.ndarray:
            tau = s - t
            return u0 + tau * d1 if d2 is None else u0 + tau * (d1 + tau * d2)

        return input_at

    def _do_step_internal(self, t: float, dt: float) -> None:
        u = self._gather_inputs()
        x = self._x
        self.input_at = self._input_polynomial(t, u)
        if self._has_pre:
            self._override(self.pre_integrate(t, x, u), "pre_integrate")
        if len(x):
            self._integrator.integrate(t, dt, x, u)
        self.input_at = None
        if self._has_post:
            self._override(self.post_integrate(t + dt, x, u), "post_integrate")

    def _override(self, value: Any, what: str) -> None:
        if value is None:
            return
        arr = np.asarray(value, dtype=float)
        if arr.shape != self._x.shape:
            raise ModelOutputError(f"component {self.name!r}: {what} returned shape {arr.shape}, "
                                   f"expected {self._x.shape} (states {list(self.state_names)})", component=self.name,
                                   time=self.t, function=what, expected=self._x.shape, got=arr.shape)
        np.copyto(self._x, arr)

    # ------------------------------------------------------------------ events
    def _handle_events_internal(self, event_names: list[str], t: float) -> None:
        """Apply the ``update`` of every named state event, in the given order."""
        events = self._state_events
        for name in event_names:
            event = events.get(name)
            if event is not None and event.update is not None:
                self._override(event.update(t, self._x, self._gather_inputs()), f"update of event {name!r}")
                self._integrator.forget()

    # ------------------------------------------------------------------ rollback
    def snapshot_state(self) -> Any:
        """Opaque copy of time, state, port values, integrator memory and subclass extras."""
        return _Snapshot(
            id(self),
            self.t,
            self._x.copy(),
            tuple((p, p.value, p.t_last) for p in self.inputs.values()),
            tuple((p, p.value, p.t_last) for p in self.outputs.values()),
            self._integrator.memory,
            self._snapshot_extra(),
        )

    def restore_state(self, snapshot: Any, t: float) -> None:
        """Return exactly to *snapshot* (taken at time *t*)."""
        if not isinstance(snapshot, _Snapshot) or snapshot.owner != id(self):
            raise ValueError(f"component {self.name!r}: snapshot does not belong to this component")
        if snapshot.x.shape != self._x.shape:
            raise ValueError(f"component {self.name!r}: snapshot has {snapshot.x.shape[0]} states, "
                             f"component has {self._x.shape[0]}")
        if abs(t - snapshot.t) > 1e-9 * max(1.0, abs(t)):
            raise ValueError(f"component {self.name!r}: snapshot was taken at t={snapshot.t!r}, not t={t!r}")
        np.copyto(self._x, snapshot.x)
        self.t = snapshot.t
        for port, value, t_last in (*snapshot.inputs, *snapshot.outputs):
            port.value, port.t_last = value, t_last
        self._integrator.memory = snapshot.memory
        self._restore_extra(snapshot.extra)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_state(self) -> dict[str, Any]:
        """Time, ports, the state vector, the integrator's memory and the subclass's extras (its
        :meth:`_snapshot_extra`), as plain values."""
        state = self._ports_checkpoint()
        state.update(x=self._x.copy(), memory=self._integrator.memory, extra=self._snapshot_extra())
        return state

    def restore_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Return to *state* (see :meth:`checkpoint_state`)."""
        x = np.asarray(state["x"], dtype=float)
        if x.shape != self._x.shape:
            raise ValueError(f"component {self.name!r}: checkpoint has {x.shape[0]} states, "
                             f"component has {self._x.shape[0]}")
        self._restore_ports_checkpoint(state)
        np.copyto(self._x, x)
        self._integrator.memory = state["memory"]
        self._restore_extra(state["extra"])

    # ------------------------------------------------------------------ physical state
    def get_state(self) -> dict[str, Any]:
        """``{state: {'value': float, 'unit': str | None}}`` in declaration order."""
        return self._physical_state(self._state_specs, self.x.tolist())

    def set_state(self, state: Mapping[str, Any], t: float) -> None:
        """Set every state from ``{name: {'value': v, 'unit': u}}`` (unit optional) at time *t*.

        Values may also be plain numbers (in the state's unit) or pint quantities.
        Before ``initialize`` the values become the initial-state parameters.
        """
        values = self._state_values(state, self._state_specs)
        if not self.is_initialized:
            for index, (spec, value) in enumerate(zip(self._state_specs, values, strict=True)):
                if index in self._initial_fixed:
                    self._initial_fixed[index] = value
                else:
                    self.parameters[f"{spec.name}0"] = value
            return
        self._jump(values, t)

    @staticmethod
    def _physical_state(specs: Sequence[PortSpec], values: Sequence[float]) -> dict[str, Any]:
        """*values* as a physical state ``{name: {'value', 'unit'}}`` of the quantities *specs* declare."""
        return {s.name: {"value": float(v), "unit": s.unit_name} for s, v in zip(specs, values, strict=True)}

    def _state_values(self, state: Mapping[str, Any], specs: Sequence[PortSpec]) -> list[float]:
        """The values of a physical *state* for the quantities *specs* declare, each in its spec's unit.

        Every quantity must be given, and nothing else; an entry is ``{'value': v, 'unit': u}``
        (unit optional), a plain number in the spec's unit or a pint quantity.
        """
        check_state_names(state, [s.name for s in specs], f"component {self.name!r}", self.name)
        values = []
        for spec in specs:
            entry = state[spec.name]
            if isinstance(entry, Mapping):
                if "value" not in entry:
                    raise MissingNameError(f"component {self.name!r}: state {spec.name!r} entry has no 'value'")
                values.append(self._to_state_unit(entry["value"], spec, "set_state value", entry.get("unit", ...)))
            else:
                values.append(self._to_state_unit(entry, spec, "set_state value"))
        return values

    def _jump(self, x: Sequence[float] | np.ndarray, t: float) -> None:
        """Make *x* the state at time *t* (after ``initialize``): the integrator forgets, outputs follow."""
        self._x[:] = x
        self.t = float(t)
        self._integrator.forget()
        self._after_set_state(self.t)
        self._update_output_states(self.t, NO_EVENTS)


class OdeComponent(ContinuousComponent):
    """Base class for models given as ``dx/dt = derivatives(t, x, u)``.

    Declared like every :class:`ContinuousComponent` (states, inputs, outputs,
    state events); implement :meth:`derivatives`. The integrator is chosen by
    the parameter ``integrator`` (see :data:`~cosimrun.core.ode.registry.INTEGRATORS`),
    with ``substeps``, ``rtol``, ``atol`` and ``max_substep``.
    """

    @abstractmethod
    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``dx/dt`` at time *t*; must not modify *x* or *u*."""

    def _solver_defaults(self) -> Mapping[str, Any]:
        return INTEGRATOR_DEFAULTS

    def bound_internal_steps(self, dt: float | None) -> None:
        """Under error-controlled steps, keep the fixed-step integrator's substep length, not its count: ``rk4``
        takes substeps no longer than ``dt / substeps`` (and ``max_substep``), so a communication step longer
        than *dt* is integrated as accurately as steps of *dt*; a shorter one keeps its ``substeps`` substeps.
        The adaptive integrators bound their own steps by ``rtol`` and ``atol``. ``None``: as configured."""
        self._compile_integrator()
        if dt is not None and self.parameters["integrator"] == "rk4":
            integrator = self._integrator
            integrator.max_substep = min(integrator.max_substep, dt / self.parameters["substeps"] * (1.0 + 1e-9))

    def _integrator_for(self, settings: Mapping[str, Any], current: Integrator | None) -> Integrator:
        method = settings["integrator"]
        return current if current is not None and current.name == method else INTEGRATORS[method](self, method)

    def _validate_parameter(self, name: str, value: Any) -> Any:
        if name == "integrator":
            key = str(value).strip().lower() if isinstance(value, str) else value
            if key not in INTEGRATORS:
                hint = suggest(str(value), INTEGRATORS)
                raise invalid_parameter(name, value, f"component {self.name!r}: unknown integrator {value!r}{hint}"
                                                     f" (valid: {', '.join(INTEGRATORS)})")
            return key
        if name == "substeps":
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer)) \
                    or not (math.isfinite(value) and value >= 1 and value == int(value)):
                raise invalid_parameter(name, value, f"component {self.name!r}: substeps must be an integer >= 1, "
                                                     f"got {value!r}")
            return int(value)
        return super()._validate_parameter(name, value)
