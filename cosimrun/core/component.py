"""The component contract: the base class every co-simulation model derives from.

Lifecycle: ``set_parameters`` -> ``initialize(t0)`` -> repeated ``set_inputs`` /
``do_step(t, dt)`` / ``get_outputs`` -> ``reset`` or ``free``. Subclasses fill in
``_initialize_component``, ``_do_step_internal``, ``_update_output_states``,
``get_state`` and ``set_state``; rollback (``snapshot_state``/``restore_state``),
event handling and feedthrough declarations are optional.

What a master may call
----------------------
Masters (and ``System``) use only these public members; nothing else of a
component, and no underscore name:

- ports: ``inputs``/``outputs`` (``PortState.value`` read and written directly),
  ``needs_set_inputs`` (then input values go in through ``set_inputs``);
- stepping: ``do_step(t, dt)``, ``refresh_outputs(t)`` (outputs from the current
  inputs and state, without advancing: direct feedthrough and algebraic loops),
  ``steps_in_parallel`` and ``c_step()`` (a step split around one C call that may run on
  another thread), ``may_discard`` (a step may end
  early with ``StepDiscarded``), ``fixed_step_only`` (every step must have one size),
  ``may_request_stop`` and ``stop_requested`` (the component asks to end the run);
- time: ``max_step``, ``has_time_events``, ``next_time_event(t)`` and ``bound_internal_steps(dt)``;
- rollback: ``supports_rollback``, ``can_always_roll_back``, ``snapshot_state()``,
  ``restore_state(snapshot, t)``;
- state events: ``has_state_events``, ``evaluate_event_indicators()``,
  ``detect_event_crossings(...)``, ``get_internal_event_hints()``,
  ``handle_event(names, t, micro)``;
- mode switching: components that switch between models implement
  :class:`~cosimrun.core.switching.ModeSwitching` (``MultiComponent`` does); a
  master finds them with ``isinstance``.

Recording belongs to the run: inside a :class:`~cosimrun.system.System` a
component never records itself (the system switches ``record_history`` off when
the component is added, and the run's recorder samples its ports). Used on its
own, a component records every output after ``initialize``, ``do_step`` and
``handle_event``, as the reference API describes.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from cosimrun.core.cstep import CStep
from cosimrun.core.events import Event, EventIndicator, InternalEventInfo, crossed
from cosimrun.core.history import ComponentHistory
from cosimrun.core.parameters import Parameter, declared_parameters
from cosimrun.core.ports import PortSpec, PortState, PortType
from cosimrun.errors import (
    ComponentContractError,
    ComponentStateError,
    ConfigError,
    CosimrunError,
    DuplicateNameError,
    MissingNameError,
    UnknownNameError,
)

NO_EVENTS: tuple[str, ...] = ()
"""The ``event_names`` passed to ``_update_output_states`` on ordinary steps."""


@dataclass(frozen=True, slots=True)
class StopRequest:
    """A run that ended early because component *component* asked to stop at *time* (its
    :attr:`CoSimComponent.stop_requested`, the *reason*, e.g. ``asked to terminate (...)``)."""

    time: float
    component: str
    reason: str

    def __str__(self) -> str:
        return f"stopped at t={self.time:.12g} s: component {self.component!r} {self.reason}"


class CoSimComponent(ABC):
    """Abstract base class of all co-simulation components.

    Declare ports in ``__init__`` by filling ``input_specs``/``output_specs``
    (name -> :class:`PortSpec`) and parameters in the class attribute
    ``PARAMETERS`` (:class:`~cosimrun.core.parameters.Parameter`, checked by
    :meth:`set_parameters`) or, unchecked, in ``parameters``; everything
    that depends on parameter values belongs in ``_initialize_component``.
    """

    PARAMETERS: ClassVar[Mapping[str, Parameter]] = {}
    """Declared parameters (merged with the bases'): they start at their defaults and are checked when set."""

    t: float = 0.0
    max_step: float | None = None
    """Largest communication step this component accepts (``None``: any)."""
    interpolates_inputs: ClassVar[bool] = False
    """Whether the component evaluates an input as the polynomial ``value + d1 (s - t) + d2 (s - t)**2 / 2``
    over a step from ``t`` (``PortState.derivatives``). The master then gives it the extrapolated (or, under
    Gauss-Seidel, interpolated) inputs' value and derivatives at the step start; a component that does not
    gets each input's mean over the step, held."""
    may_discard: ClassVar[bool] = False
    """Whether ``do_step`` may end a step early by raising :class:`~cosimrun.errors.StepEndedEarly` (an FMU's
    ``fmi2Discard``): the masters then cut the step there for every component."""
    pending_event: str | None = None
    """An event the component's last step ended on and left for the master (an FMI 3 FMU's event mode): the masters
    record it at the step's end (micro 0, after the sample before it), call :meth:`handle_event` with it and record
    the sample after it (micro 1). ``None`` when there is none; rollback forgets it. Only components that declare
    :attr:`leaves_events` are asked."""
    leaves_events: ClassVar[bool] = False
    """Whether a step may end with a :attr:`pending_event`."""
    stop_requested: str | None = None
    """Why the component asks to end the run at its current time (an FMU's ``terminateSimulation``), else
    ``None``. A step or event handling sets it; the master ends the run normally at the communication point it
    accepts with it (every component is there: a step the component ended early is cut there for all, see
    :attr:`may_discard`), records a :class:`StopRequest` and steps the component no further. Rollback forgets a
    request made after the snapshot. Only components that declare :attr:`may_request_stop` are asked."""
    may_request_stop: ClassVar[bool] = False
    """Whether the component may set :attr:`stop_requested`."""
    fixed_step_only: ClassVar[bool] = False
    """Whether the component must always be stepped by one step size (an FMU without
    ``canHandleVariableCommunicationStepSize``): the masters refuse or fail a run that would cut its steps."""
    fixed_step_reason: ClassVar[str] = "it declares fixed_step_only"
    """Why a :attr:`fixed_step_only` component takes one step size only, in the masters' messages (an FMU's
    ``canHandleVariableCommunicationStepSize=false``)."""
    vectorizable: ClassVar[bool] = False
    """Whether the class may run as an ensemble of members at once (:mod:`cosimrun.ensemble`): its parameters may
    then be arrays of shape ``(M,)``, its inputs and outputs ``(M,)`` arrays, and its model methods (an ODE's
    ``derivatives``, ``compute_outputs``, event indicators; a memoryless component's output update) work on them
    with array operations, giving each member exactly what the scalar call gives. The contract is
    ``docs/how-to/ensembles.md``; a plugin opts in by declaring it. Components that are not (FMUs) are refused."""
    ports_named_by_model: ClassVar[bool] = False
    """Whether the component's ports are named after the variables of a model it wraps (an FMU's: ``der(x)``,
    ``a.b[1]``), kept as the model names them; every other component's port names must be Python identifiers
    (:meth:`~cosimrun.system.system.System.add_component` checks them)."""
    steps_in_parallel: ClassVar[bool] = False
    """Whether the component's step can run concurrently with other components' steps (the masters'
    ``parallel`` setting): it then offers its step split around one C call (:meth:`c_step`), which the
    masters' stepper runs on native threads without the GIL while ``begin`` and ``end`` stay on the main
    thread. The steps of Python code cannot overlap, so only a step whose work is one C call gains. FMU
    components declare it; every other builtin component steps on the main thread."""

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        if not isinstance(name, str) or not name or "." in name or "/" in name:
            raise ConfigError(None, f"invalid component name {name!r}: a non-empty name without '.' or '/'")
        self.name = name
        self.label = label or name
        self.group = group
        self.t = 0.0
        self.input_specs: dict[str, PortSpec] = {}
        self.output_specs: dict[str, PortSpec] = {}
        self.inputs: dict[str, PortState] = {}
        self.outputs: dict[str, PortState] = {}
        self.parameters: dict[str, Any] = {name: p.default for name, p in declared_parameters(type(self)).items()}
        self.direct_feedthrough: dict[str, set[str]] = {}
        self.model_structure: dict[str, dict[str, list[str]]] = {}
        self.event_indicators: dict[str, EventIndicator] = {}
        self.internal_event_hints: list[InternalEventInfo] = []
        self.event_subscriptions: list[Event] = []
        self.event_annotations: dict[str, dict[str, Any]] = {}
        self.event_commutativity: dict[tuple[str, str], bool] = {}
        self.history = ComponentHistory(name)
        self.record_history = True
        self._is_initialized = False
        self._recorders: list[tuple[Callable[..., None], PortState]] = []
        self._step_recorders: list[tuple[PortState, Callable[[float], None], Callable[[Any], None]]] = []
        self._event_ports: list[PortState] = []
        self._detected_feedthrough: dict[str, set[str]] | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        overrides = cls.__dict__
        if "evaluate_outputs" in overrides and "refresh_outputs" not in overrides:
            # a subclass written against the reference customizes evaluate_outputs: masters must go through it
            def refresh_outputs(self: CoSimComponent, t: float) -> None:
                self.evaluate_outputs({}, t)

            cls.refresh_outputs = refresh_outputs  # type: ignore[method-assign]

    # ------------------------------------------------------------------ parameters
    def set_parameters(self, **parameters: Any) -> None:
        """Set parameters by name; unknown names raise ``KeyError``, invalid values ``ValueError``.

        Declared parameters are checked and converted by their :class:`~cosimrun.core.parameters.Parameter`
        (a :class:`~cosimrun.errors.ConfigError`, also a ``ValueError``, keyed by the parameter). A plain
        ``ValueError`` of :meth:`_validate_parameter` (a plugin's) becomes the
        :func:`invalid_parameter` error keyed by the parameter.
        """
        for name in parameters:
            if name not in self.parameters:
                raise UnknownNameError("parameter", name, self.parameters, f"of component {self.name!r}")
        for name, value in parameters.items():
            try:
                self.parameters[name] = self._validate_parameter(name, value)
            except ValueError as exc:
                if isinstance(exc, CosimrunError):
                    raise
                raise invalid_parameter(name, value, str(exc)) from exc

    def get_parameters(self, *names: str) -> dict[str, Any]:
        """A copy of the named parameters (all when no names are given)."""
        if not names:
            return dict(self.parameters)
        for name in names:
            if name not in self.parameters:
                raise UnknownNameError("parameter", name, self.parameters, f"of component {self.name!r}")
        return {n: self.parameters[n] for n in names}

    def _validate_parameter(self, name: str, value: Any) -> Any:
        """Hook: check (and possibly coerce) one parameter value; raise ``ValueError`` if invalid.

        The base class applies the parameter's declaration, if it has one;
        builtin components raise :func:`invalid_parameter`.
        """
        declared = declared_parameters(type(self)).get(name)
        return value if declared is None else declared.check(value, name)

    # ------------------------------------------------------------------ initialization
    def _initialize_ports_from_specs(self) -> None:
        """Create port states from the specs and register outputs for recording."""
        for name, spec in self.input_specs.items():
            if name not in self.inputs:
                self.inputs[name] = PortState(spec)
        for name, spec in self.output_specs.items():
            if name not in self.outputs:
                self.outputs[name] = PortState(spec)
            self.history.add_port(name, spec.unit_name, spec.type)
        self._compile_recorders()

    def _compile_recorders(self) -> None:
        histories = [(self.history.get_port_history(name), port) for name, port in self.outputs.items()]
        self._recorders = [(h.append, port) for h, port in histories]
        self._step_recorders = [(port, *h.appenders()) for h, port in histories]
        self._event_ports = [self.outputs[n] for n in self.event_indicators if n in self.outputs]

    def _initialize_event_ports(self) -> None:
        """Create a boolean EVENT output port for every registered indicator."""
        for name in self.event_indicators:
            self._add_event_port(name)
        self._compile_recorders()

    def _check_event_port_name(self, name: str) -> None:
        spec = self.output_specs.get(name)
        if spec is not None and spec.type is not PortType.EVENT:
            raise DuplicateNameError(f"component {self.name!r}: event {name!r} clashes with output port {name!r}",
                                     kind="event", name=name)

    def _add_event_port(self, name: str) -> None:
        self._check_event_port_name(name)
        spec = self.output_specs.get(name)
        if spec is None:
            spec = PortSpec(name, PortType.EVENT, "out", description=f"true at instants of event {name!r}")
            self.output_specs[name] = spec
        if name not in self.outputs:
            self.outputs[name] = PortState(spec)
        self.history.add_port(name, None, PortType.EVENT)

    def initialize(self, t0: float) -> None:
        """Prepare ports, state and outputs at *t0* and record the first sample (idempotent)."""
        if self._is_initialized:
            return
        self.t = float(t0)
        self._initialize_ports_from_specs()
        self._initialize_event_ports()
        self._initialize_component(self.t)
        self._update_output_states(self.t, NO_EVENTS)
        detected = self._detected_feedthrough is not None and self.direct_feedthrough is self._detected_feedthrough
        if (detected or not self.direct_feedthrough) and self.inputs and self.outputs:
            # Detected (not declared) maps are redone: parameters may have changed since a reset.
            self.direct_feedthrough = self._detected_feedthrough = self._detect_direct_feedthrough()
        self._is_initialized = True
        if self.record_history:
            self._record_outputs(self.t)

    def enter_initialization(self, t0: float) -> None:
        """Start the initialization at *t0*, as far as outputs can be evaluated from inputs (``refresh_outputs``).

        A system calls this for every component, then passes outputs on to inputs until they are consistent
        (solving algebraic loops), then calls :meth:`exit_initialization` for every component: so a component
        whose initialization can take its inputs (an FMU's Initialization Mode) initializes with the consistent
        ones. The default initializes fully (:meth:`initialize`).
        """
        self.initialize(t0)

    def exit_initialization(self, t0: float) -> None:  # noqa: B027 (optional hook)
        """End the initialization begun by :meth:`enter_initialization`, with the inputs the component holds now.
        The default does nothing: :meth:`initialize` has done it all."""

    @property
    def is_initialized(self) -> bool:
        return self._is_initialized

    @abstractmethod
    def _initialize_component(self, t0: float) -> None:
        """Hook: set up internal state from parameters at *t0*."""

    # ------------------------------------------------------------------ stepping
    def set_inputs(self, signals: dict[str, Any], t: float | None = None) -> None:
        """Set input ports by name; unknown names raise ``KeyError``."""
        inputs = self.inputs
        for name, value in signals.items():
            port = inputs.get(name)
            if port is None:
                if name in self.input_specs and not self._is_initialized:
                    raise ComponentStateError(f"component {self.name!r}: call initialize(t0) before setting input "
                                              f"{name!r}", component=self.name)
                raise UnknownNameError("input", name, inputs or self.input_specs, f"of component {self.name!r}")
            port.set(value, t)

    @property
    def needs_set_inputs(self) -> bool:
        """True when the class overrides ``set_inputs``: input values must go in through it, not port writes."""
        return type(self).set_inputs is not CoSimComponent.set_inputs

    def refresh_outputs(self, t: float) -> None:
        """Recompute the outputs from the current inputs and state at *t*, without advancing time."""
        self._update_output_states(t, NO_EVENTS)

    def evaluate_outputs(self, inputs: dict[str, Any], t: float | None = None) -> dict[str, Any]:
        """Outputs for the given inputs at the current time, without advancing time."""
        if inputs:
            self.set_inputs(inputs, t)
        self.refresh_outputs(self.t if t is None else t)
        return self.get_outputs()

    def get_outputs(self) -> dict[str, Any]:
        """Current output values by port name (ports without a value are left out)."""
        return {name: port.value for name, port in self.outputs.items() if port.value is not None}

    def do_step(self, t: float, dt: float) -> None:
        """Advance from *t* to *t + dt*, refresh outputs and record them."""
        if not dt > 0.0:
            raise step_size_error(self.name, t, dt)
        self._do_step_internal(t, dt)
        t = t + dt
        self.t = t
        self._update_output_states(t, NO_EVENTS)
        self._stepped(t)

    def _stepped(self, t: float) -> None:
        """The end of a step at *t*, outputs written: event ports cleared, the step recorded (a component that
        writes ``do_step`` out, or splits it around a C call, ends it here)."""
        if self._event_ports:
            for port in self._event_ports:
                port.value = False
        if self.record_history:
            for port, append_t, append_v in self._step_recorders:
                append_t(t)
                append_v(port.value)

    @abstractmethod
    def _do_step_internal(self, t: float, dt: float) -> None:
        """Hook: advance the internal state from *t* to *t + dt*."""

    @abstractmethod
    def _update_output_states(self, t: float | None = None, event_names: Sequence[str] = NO_EVENTS) -> None:
        """Hook: write output ports from the internal state."""

    def _record_outputs(self, t: float, micro: int = 0) -> None:
        """Append every output's current value to the history."""
        for append, port in self._recorders:
            append(t, port.value, micro)

    def c_step(self) -> CStep | None:
        """The step split around its C call (:mod:`cosimrun.core.cstep`) of a component that declares
        :attr:`steps_in_parallel`, while it is running; ``None`` otherwise (it steps through ``do_step``)."""
        return None

    # ------------------------------------------------------------------ state
    @abstractmethod
    def get_state(self) -> dict[str, Any]:
        """Physical state as ``{name: {'value': v, 'unit': u}}``."""

    @abstractmethod
    def set_state(self, state: dict[str, Any], t: float) -> None:
        """Import a physical state in the format of :meth:`get_state` at time *t*."""

    def snapshot_state(self) -> Any:
        """Opaque snapshot of everything needed to roll back to the current time."""
        raise NotImplementedError(f"component {self.name!r} ({type(self).__name__}) does not support rollback")

    def restore_state(self, snapshot: Any, t: float) -> None:
        """Return to the state captured by :meth:`snapshot_state` at time *t*."""
        raise NotImplementedError(f"component {self.name!r} ({type(self).__name__}) does not support rollback")

    @property
    def supports_rollback(self) -> bool:
        """True when the class overrides both ``snapshot_state`` and ``restore_state``."""
        cls = type(self)
        return (
            cls.snapshot_state is not CoSimComponent.snapshot_state
            and cls.restore_state is not CoSimComponent.restore_state
        )

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_state(self) -> dict[str, Any]:
        """Everything needed to continue the run from the current communication point, in the state form (plain
        values, see :mod:`cosimrun.checkpoint.form`): what :meth:`snapshot_state` keeps, without references to
        objects. A component that does not override it cannot be checkpointed: the run says so in one line when
        a checkpoint is asked for."""
        raise ComponentStateError(self._no_checkpoint(), component=self.name)

    def restore_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Return to *state*, given by :meth:`checkpoint_state` of a component built and initialized as this one."""
        raise ComponentStateError(self._no_checkpoint(), component=self.name)

    @property
    def can_checkpoint(self) -> bool:
        """Whether the component gives its state for checkpoints (overrides :meth:`checkpoint_state`)."""
        return type(self).checkpoint_state is not CoSimComponent.checkpoint_state

    def fixed_after_start(self, name: str) -> str | None:
        """Why parameter *name* cannot take another value in a run forked from a checkpoint (``run.start_from``),
        or ``None`` when it can: a Python component's parameters can (the fork initializes the component with the
        new values, then restores its state)."""
        return None

    def _no_checkpoint(self) -> str:
        return (f"component {self.name!r} ({type(self).__name__}) cannot be checkpointed: it gives no state form "
                "(checkpoint_state)")

    def _ports_checkpoint(self) -> dict[str, Any]:
        """Time and every port's value, time of last write and derivatives: the part of the state every component
        shares."""
        return {
            "t": self.t,
            "inputs": {n: [p.value, p.t_last, p.derivatives] for n, p in self.inputs.items()},
            "outputs": {n: [p.value, p.t_last, p.derivatives] for n, p in self.outputs.items()},
        }

    def _restore_ports_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`_ports_checkpoint` gave."""
        self.t = state["t"]
        for ports, saved in ((self.inputs, state["inputs"]), (self.outputs, state["outputs"])):
            for name, (value, t_last, derivatives) in saved.items():
                port = ports[name]
                port.value, port.t_last, port.derivatives = value, t_last, tuple(derivatives)

    @property
    def can_always_roll_back(self) -> bool:
        """Whether rollback holds for the whole run (a multi-model component needs it in every mode)."""
        return self.supports_rollback

    def bound_internal_steps(self, dt: float | None) -> None:  # noqa: B027 (optional hook)
        """Hook: keep internal steps as long as they are at communication steps of *dt* at most (``None``: as
        configured again). Masters call it around runs under error-controlled steps, whose communication steps
        may be longer than ``run.dt``; a component whose internal step is a fraction of the communication step
        (a fixed number of substeps) bounds it here."""

    # ------------------------------------------------------------------ time events
    def next_time_event(self, t: float) -> float | None:
        """Hook: the next scheduled (time) event strictly after *t*, or ``None``."""
        return None

    @property
    def has_time_events(self) -> bool:
        """True when the class overrides ``next_time_event`` (masters then ask it at every step)."""
        return type(self).next_time_event is not CoSimComponent.next_time_event

    # ------------------------------------------------------------------ history
    def get_history(
        self, port_names: list[str] | None = None, units: dict[str, str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """``{port: {'time', 'values', 'unit'}}`` of the recorded outputs."""
        return self.history.to_dict(port_names, units)

    def get_history_arrays(self, port_names: list[str] | None = None, units: dict[str, str] | None = None):
        """``(time, {port: values})`` of the recorded outputs."""
        return self.history.to_arrays(port_names, units)

    # ------------------------------------------------------------------ state events
    def add_event_indicator(self, name: str, func: Callable[[CoSimComponent], float], direction: int = 0) -> None:
        """Register a zero-crossing indicator; its boolean EVENT output port is named *name*."""
        if not self.supports_rollback:
            raise ComponentStateError(
                f"component {self.name!r} ({type(self).__name__}) cannot host event indicator {name!r}: "
                "it does not support rollback, which event localization needs", component=self.name,
            )
        if name in self.event_indicators:
            raise DuplicateNameError(f"component {self.name!r} already has an event indicator {name!r}",
                                     kind="event indicator", name=name)
        indicator = EventIndicator(name, func, direction)
        self._check_event_port_name(name)
        self.event_indicators[name] = indicator
        if self._is_initialized:
            self._add_event_port(name)
            self._backfill_history(name)
            self._compile_recorders()

    def _backfill_history(self, name: str) -> None:
        """Give a port added after initialize a ``False`` sample at every instant already recorded,
        so all outputs keep one common time axis."""
        hist = self.history.get_port_history(name)
        ref = next((h for n, h in self.history.get_all_histories().items() if n != name and len(h)), None)
        if ref is None or len(hist):
            return
        for t, micro in zip(ref.time.tolist(), ref.micro.tolist(), strict=True):
            hist.append(t, False, micro)

    @property
    def has_state_events(self) -> bool:
        return bool(self.event_indicators)

    def evaluate_event_indicators(self) -> dict[str, float]:
        """Current value of every indicator."""
        return {name: ind.evaluate(self) for name, ind in self.event_indicators.items()}

    def detect_event_crossings(
        self, previous: dict[str, float], current: dict[str, float], sign_tolerance: float = 0.0
    ) -> list[str]:
        """Names of the indicators that crossed zero between *previous* and *current*."""
        return [
            name
            for name, ind in self.event_indicators.items()
            if name in previous
            and name in current
            and crossed(previous[name], current[name], ind.direction, sign_tolerance)
        ]

    def report_internal_event(
        self,
        event_name: str,
        t_before: float,
        t_after: float,
        indicator_before: float | None = None,
        indicator_after: float | None = None,
    ) -> None:
        """Tell the master that *event_name* crossed zero inside ``[t_before, t_after]``."""
        self.internal_event_hints.append(
            InternalEventInfo(event_name, t_before, t_after, indicator_before, indicator_after)
        )

    def get_internal_event_hints(self) -> list[InternalEventInfo]:
        """Return and clear the hints reported since the last call."""
        hints, self.internal_event_hints = self.internal_event_hints, []
        return hints

    # ------------------------------------------------------------------ event subscriptions
    def subscribe_event(self, event: Event) -> None:
        """Receive ``handle_event`` calls when component ``event.source`` emits ``event.name``."""
        if event.time is not None:
            raise ConfigError(None, f"subscription to {event.source}.{event.name} must not carry a time")
        for sub in self.event_subscriptions:
            if sub.name == event.name and sub.source == event.source:
                raise DuplicateNameError(f"component {self.name!r} already subscribes to {event.source}.{event.name}",
                                         kind="event subscription", name=f"{event.source}.{event.name}")
        self.event_subscriptions.append(event)

    @property
    def has_event_subscriptions(self) -> bool:
        return bool(self.event_subscriptions)

    def handle_event(self, event_names: Sequence[str], t: float, micro: int = 1) -> None:
        """Apply events at *t*, refresh outputs and record the post-event sample at micro step *micro*."""
        names = list(event_names)
        self._handle_events_internal(names, t)
        self.t = t
        self._update_output_states(t, names)
        for port in self._event_ports:
            port.value = port.spec.name in names
        if self.record_history:
            self._record_outputs(t, micro)

    def _handle_events_internal(self, event_names: list[str], t: float) -> None:  # noqa: B027 (optional hook)
        """Hook: apply state discontinuities for *event_names* at *t*."""

    # ------------------------------------------------------------------ lifecycle end
    def reset(self) -> None:
        """Forget time, history and port values so the component can be initialized again."""
        self.t = 0.0
        self._is_initialized = False
        self.history.clear()
        for port in (*self.inputs.values(), *self.outputs.values()):
            port.reset()
        self.internal_event_hints.clear()

    def free(self) -> None:  # noqa: B027 (optional hook)
        """Hook: release external resources (files, libraries, FMU instances)."""

    # ------------------------------------------------------------------ feedthrough
    @property
    def reactive_inputs(self) -> set[str]:
        """Inputs that reach at least one output without a time step."""
        return set().union(*self.direct_feedthrough.values()) if self.direct_feedthrough else set()

    @property
    def has_direct_feedthrough(self) -> bool:
        return any(self.direct_feedthrough.values())

    def _detect_direct_feedthrough(self) -> dict[str, set[str]]:
        """Find which outputs change at once when an input is perturbed.

        Each input is perturbed both ways around its current value and outputs are
        re-evaluated with :meth:`evaluate_outputs`; ports (and, where supported,
        the internal state) are restored afterwards, so detection leaves no trace.
        With rollback every trial also starts from the same internal state, so an
        output update that touches state is not mistaken for feedthrough.
        """
        inputs, outputs = self.inputs, self.outputs
        saved = {id(p): (p.value, p.t_last) for p in (*inputs.values(), *outputs.values())}
        rollback = self.supports_rollback
        snapshot = self.snapshot_state() if rollback else None
        result: dict[str, set[str]] = {name: set() for name in outputs}
        try:
            baseline = dict(self.evaluate_outputs({}, self.t))
            for name, port in inputs.items():
                original = port.value
                for trial in _perturbations(port):
                    if rollback:
                        self.restore_state(snapshot, self.t)
                    try:
                        changed = self.evaluate_outputs({name: trial}, self.t)
                    except Exception:
                        changed = None
                    for out in outputs:
                        if changed is None or not _same(changed.get(out), baseline.get(out)):
                            result[out].add(name)
                port.value = original
        finally:
            for p in (*inputs.values(), *outputs.values()):
                p.value, p.t_last = saved[id(p)]
            if rollback:
                self.restore_state(snapshot, self.t)
        return result


def step_size_error(name: str, t: float, dt: float) -> ConfigError:
    """The error of a step of component *name* from *t* by a step size *dt* that is not positive (keyed ``dt``)."""
    return ConfigError("dt", f"component {name!r}: step size must be positive, got dt={dt!r} at t={t!r}")


def check_state_names(state: Any, names: Sequence[str], where: str, component: str) -> None:
    """Refuse a physical state for ``set_state`` of *where*: no mapping, or names other than exactly *names*."""
    if not isinstance(state, Mapping):
        raise ComponentContractError(f"{where}: set_state expects a mapping, got {type(state).__name__}",
                                     component=component)
    for key in state:
        if key not in names:
            raise UnknownNameError("state", key, names, f"of {where}")
    missing = [n for n in names if n not in state]
    if missing:
        raise MissingNameError(f"{where}: set_state is missing state(s) {', '.join(missing)} "
                               f"(expected: {', '.join(names)})")


def invalid_parameter(name: str, value: Any, problem: str) -> ConfigError:
    """``<name>: <value> is invalid: <problem>``, keyed *name*: a parameter value a component's
    :meth:`~CoSimComponent._validate_parameter` refuses (the config builder places the key under the component)."""
    return ConfigError(name, f"{value!r} is invalid: {problem}")


def _perturbations(port: PortState) -> Iterable[Any]:
    value, kind = port.value, port.spec.type
    if kind is PortType.REAL:
        delta = 0.25 * (1.0 + abs(value))
        return (value + delta, value - delta)
    if kind is PortType.INT:
        return (value + 1, value - 1)
    if kind in (PortType.BOOL, PortType.EVENT):
        return (not value,)
    return (value + "_",)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b
