"""ModelExchangeFMU: an FMI 2.0 or 3.0 model-exchange FMU integrated by cosimrun's own integrators.

The class joins what both FMU components share (:class:`~cosimrun.components.fmu.base.FMUBase`:
settings, ``path``, ports, life cycle, delegated to :class:`~cosimrun.fmi.instance.FMUInstance`)
with :class:`~cosimrun.core.ode.OdeComponent`, whose integrators advance the FMU's continuous
states through :meth:`ModelExchangeFMU.derivatives`; the FMI calls are those of the instance's
:class:`~cosimrun.fmi.exchange.Exchange` (:mod:`~cosimrun.fmi.me`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from cosimrun.components._base import time_tol
from cosimrun.components.fmu.base import FMUBase
from cosimrun.core.component import NO_EVENTS
from cosimrun.core.crashsite import NAN
from cosimrun.core.ode import INTEGRATOR_DEFAULTS, ContinuousComponent, OdeComponent
from cosimrun.core.ports import PortSpec, PortType
from cosimrun.errors import ConfigError, FMUError
from cosimrun.fmi.exchange import Exchange, integrated
from cosimrun.fmi.fmi2 import Instance
from cosimrun.fmi.me import ContinuousTimeCalls, EventOutcome
from cosimrun.fmi.ports import ValuePorts
from cosimrun.fmi.step import stepped_after_stop

_log = logging.getLogger("cosimrun.fmu")

INDICATOR_PREFIX = "z"
"""FMI 2.0 event indicators have no names: indicator ``i`` (1-based) is the state event ``z<i>`` (FMI 3.0 ones
are named by their variables)."""


@dataclass(frozen=True, slots=True)
class _Extra:
    """What a snapshot holds beyond the continuous state: the FMU state, the next time event and the discrete
    inputs last set in the FMU."""

    fmu: Any
    t_next: float | None
    discrete: list[Any]


class ModelExchangeFMU(FMUBase, OdeComponent):
    """An FMI 2.0 or 3.0 model-exchange FMU (``path`` names the .fmu), integrated by cosimrun (``integrator``).

    Parameters, ports, units, start values and aliases are those of the
    co-simulation FMU component (:class:`~cosimrun.components.fmu.FMUComponent`);
    ``integrator``, ``substeps``, ``rtol``, ``atol`` and ``max_substep`` choose
    and tune the integrator as for :class:`~cosimrun.core.ode.OdeComponent`
    (``rk4``, the scipy methods, ``cvode``). The physical state is the FMU's
    continuous states, in ``ModelStructure`` order. Real inputs (FMI 3.0:
    scalar ``Float64`` ones) reach the integrators, as polynomials over the step
    where the master extrapolates them; other inputs are held over a step.

    **Events.** The FMU's event indicators are state events, ``z1 ... zN`` in
    FMI 2.0 and named by their variables in FMI 3.0 (direction 0: any sign
    change, as FMI has it): the integrators report
    crossings as internal event hints, the hybrid master locates them by
    rollback, other masters handle them at communication points. Each event,
    a time event (``nextEventTime``: the masters end a step there, see
    :meth:`next_time_event`) and a step event (the completed integrator step,
    called at the end of every step unless the FMU declares it not needed,
    asking for one) is handled by the event iteration: enter event mode, new
    discrete states (``fmi2NewDiscreteStates``, ``fmi3UpdateDiscreteStates``)
    until none are needed, enter continuous-time mode, and the continuous
    states read back when the FMU changed them.

    **Inputs** are set in the modes FMI allows: continuous Real inputs in
    continuous-time mode, discrete ones (any other type, and Reals declared
    ``discrete``) in event mode only. A discrete input that changed since it
    was last set is an event at that instant (the step's start, or where
    outputs are read): enter event mode, set it, update the discrete states,
    back to continuous-time mode.

    **Each event is handled once.** The event iteration settles the FMU's
    discrete states; an indicator it moves across zero (the Reference-FMUs'
    ball leaves the floor at ``h = DBL_MIN``) is the event's own effect, not a
    new event: at the instant of an event the indicators after the iteration
    are the reference for further crossings (:meth:`detect_event_crossings`).

    **Rollback** needs ``canGetAndSetFMUstate``: a snapshot holds the FMU state
    besides the continuous states. An FMU without it cannot roll back; its
    event indicators are then compared at the end of every step and an event
    found there is handled at that instant (up to one step late; a warning
    says so once).
    """

    FIRST_PARAMETERS: ClassVar[tuple[str, ...]] = ("path",)
    """Parameters a config builder should apply before the others (they define the rest)."""

    INTERFACE: ClassVar[str] = "me"

    interpolates_inputs: ClassVar[bool] = True  # type: ignore[misc]
    """Real inputs may vary within a step: the integrators evaluate their polynomial."""

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self._ex: Exchange | None = None
        """The model-exchange calls of the current instance (``None`` without one)."""
        self._calls: ContinuousTimeCalls | None = None
        """Those of the integrator (``self._ex.calls``)."""
        self._indicator_names_located: list[str] = []
        """The names of the FMU's indicators as state events (none when it cannot roll back to locate them)."""
        self._settled: tuple[float, dict[str, float]] | None = None
        """The time and the FMU's indicators right after its last event iteration (until the next step)."""
        self._n_indicators = 0
        self._z_start: np.ndarray | None = None
        self._warned_unlocated = False
        self._site: memoryview | None = None
        """Where the time of the step in progress is kept for a crash in the FMU (:mod:`cosimrun.core.crashsite`)."""

    @property
    def _t_next(self) -> float | None:
        """The FMU's next time event (``nextEventTime`` of its last event iteration)."""
        return self._ex.next_event_time if self._ex is not None else None

    @_t_next.setter
    def _t_next(self, value: float | None) -> None:
        if self._ex is not None:
            self._ex.next_event_time = value

    # ------------------------------------------------------------------ parameters
    def set_parameters(self, **parameters: Any) -> None:
        """Set FMU parameters, the FMU component's own settings and the integrator's (``path`` first)."""
        solver = {k: parameters.pop(k) for k in list(parameters) if k in INTEGRATOR_DEFAULTS}
        super().set_parameters(**parameters)
        for name, value in solver.items():
            self.parameters[name] = self._validate_parameter(name, value)
        self._compile_integrator()

    def _set_path(self, value: Any) -> None:
        solver = {k: self.parameters[k] for k in INTEGRATOR_DEFAULTS if k in self.parameters}
        super()._set_path(value)
        self.parameters.update(solver)

    def _validate_own(self, name: str, value: Any) -> Any:
        if name == "states" and value is not None:
            raise ConfigError(name, f"{self._where()}: parameter 'states' is for co-simulation FMUs; the physical "
                                    "state of a model-exchange FMU is its continuous states")
        return super()._validate_own(name, value)

    # ------------------------------------------------------------------ ports, states and events
    def _rebuild(self) -> None:
        """The FMU component's ports, then the continuous states and one state event per event indicator."""
        super()._rebuild()
        assert self.fmu is not None and self.fmu.ports is not None
        model, ports = self.fmu.model, self.fmu.ports
        md = model.description
        if self.is_fmi3:  # the elements of the states in ModelStructure order
            states = list(model.states)
        else:  # ModelStructure/Derivatives order (the order of the state vector), not ModelVariables order
            states = [model.variables[d.variable.derivative.name] for d in md.derivatives]
        self._state_vars = ports.named(states)
        self._state_specs = [PortSpec(n, PortType.REAL, "out", v.unit, v.description) for n, v in self._state_vars]
        self._state_index = {n: i for i, (n, _) in enumerate(self._state_vars)}
        self._input_names = [members[0][0] for members in ports.slots(self.input_specs)
                             if integrated(members[0][1])]
        self._state_events.clear()
        self._n_indicators = int(md.numberOfEventIndicators or 0)
        self._indicator_names_located = []
        if not self.supports_rollback:
            return
        self._indicator_names_located = self._indicator_names()
        for i, name in enumerate(self._indicator_names_located):
            self.add_state_event(name, self._indicator_function(i))

    def _indicator_names(self) -> list[str]:
        """``z1 ... zN`` (FMI 2.0 indicators have no names); FMI 3.0: the indicator variables' names, ``z<i>``
        where such a name is also a port or a state."""
        n = self._n_indicators
        names = [f"{INDICATOR_PREFIX}{i + 1}" for i in range(n)]
        if self.is_fmi3:
            assert self.model is not None
            taken = {*self.input_specs, *self.output_specs, *self._state_index}
            for i, unknown in enumerate(self.model.description.eventIndicators[:n]):
                name = getattr(unknown.variable, "name", None)
                if name and name not in taken and "/" not in name and "." not in name:
                    names[i] = name
        return names

    def _indicator_function(self, i: int) -> Any:
        def indicator(t: float, x: np.ndarray, u: np.ndarray) -> float:
            assert self._calls is not None
            return float(self._calls.indicators(t, x, u)[i])

        return indicator

    def _initial_state(self) -> np.ndarray:
        """The continuous states: the FMU's once it is instantiated, else their start values."""
        if self._calls is not None:
            return self._calls.states(self.t)
        start = self.fmu.values.start_values if self.fmu is not None else {}
        return np.array([start.get(v.name, v.start) or 0.0 for _, v in self._state_vars], dtype=float)

    # ------------------------------------------------------------------ life cycle
    def _initialize_component(self, t0: float) -> None:
        FMUBase._initialize_component(self, t0)
        ContinuousComponent._initialize_component(self, t0)

    def _bind(self, inst: Instance, dll: Any, ports: ValuePorts) -> Exchange:
        """The model-exchange calls of a new instance (:class:`~cosimrun.fmi.exchange.Exchange`): the real inputs
        the integrator sees, the other inputs and the outputs."""
        fmu = self.fmu
        assert fmu is not None
        real_vrs = [self._port_vars[p].vr for p in self._input_names]
        self._ex = ex = Exchange(inst, dll, ports, [self.inputs[p] for p in self._input_names], real_vrs,
                                 len(self._state_vars), self._n_indicators, fmi3=fmu.fmi3, log=fmu.log, now=self._now,
                                 requests=fmu.requests)
        self._calls = ex.calls
        return ex

    def _unbind(self) -> None:
        self._ex = self._calls = None
        self._settled = None

    # ------------------------------------------------------------------ the model for the integrators
    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``dx/dt`` from the FMU: time, continuous states and real inputs set, then the derivatives read."""
        calls = self._calls
        if calls is None:
            raise self._not_running()
        return calls.derivatives(t, x, u)

    def _not_running(self) -> FMUError:
        return FMUError(f"{self._where()}: the FMU is not instantiated; call initialize(t0) first "
                        "(after reset or free, too)", component=self.name, time=self.t)

    def record_native_steps(self, slot: memoryview | None) -> None:
        """Keep the time of each step in *slot* while it runs (:mod:`cosimrun.core.crashsite`): the FMU's C code
        is called throughout the integration."""
        self._site = slot

    def _do_step_internal(self, t: float, dt: float) -> None:
        """Integrate from *t* to ``t + dt`` (see :meth:`_integrate_step`), its time kept for a crash meanwhile."""
        site = self._site
        if site is None:
            self._integrate_step(t, dt)
            return
        site[0] = t
        try:
            self._integrate_step(t, dt)
        finally:
            site[0] = NAN

    def _integrate_step(self, t: float, dt: float) -> None:
        """Integrate from *t* to ``t + dt``, then complete the step in the FMU and handle its step and time events."""
        calls, ex = self._calls, self._ex
        if calls is None or ex is None:
            raise self._not_running()
        if self.stop_requested is not None:
            assert self.fmu is not None
            raise stepped_after_stop(self.fmu.log, self.fmu.requests, t)
        self._settled = None
        ex.alias_push()
        if ex.discrete_changed():
            self._event(t)
        ex.push_held()
        unlocated = self._n_indicators > 0 and not self.supports_rollback
        if unlocated:
            self._z_start = calls.indicators(t, self._x, self._gather_inputs()).copy()
        super()._do_step_internal(t, dt)
        t_end = t + dt
        calls.set_continuous(t_end, self._x, self._gather_inputs())
        assert self.fmu is not None
        step_event = self.fmu.interface.needs_completed_integrator_step and calls.completed_step(t_end)
        t_next = self._t_next
        time_event = t_next is not None and t_end >= t_next - time_tol(t_next)
        state_event = unlocated and self._indicator_changed(calls.indicators(t_end, self._x, self._u), t_end)
        if step_event or time_event or state_event:
            self._event(t_end)

    def _indicator_changed(self, z_end: np.ndarray, t: float) -> bool:
        """Whether an event indicator of an FMU that cannot roll back changed sign over the step (warned once)."""
        z0 = self._z_start
        assert z0 is not None
        changed = bool(np.any((z0 > 0) != (z_end > 0)))
        if changed and not self._warned_unlocated:
            self._warned_unlocated = True
            _log.warning("%s: its event indicators are handled at the end of the step in which they change sign "
                         "(first at t=%.12g), up to one step late: it cannot roll back (canGetAndSetFMUstate is "
                         "false) to locate them", self._where(), t)
        return changed

    def _event(self, t: float) -> None:
        """The event iteration at *t* with the FMU at the component's state and inputs (the discrete ones set in
        event mode)."""
        assert self._ex is not None
        self._after_event(self._ex.event(t, self._x, self._gather_inputs()), t)

    def detect_event_crossings(self, previous: dict[str, float], current: dict[str, float],
                               sign_tolerance: float = 0.0) -> list[str]:
        """Crossings between *previous* and *current*; at the instant of an event handed to the component
        (:meth:`handle_event`) the FMU's indicators are compared from their values right after its event iteration
        (what it moved across zero is that event's effect). Any step forgets that instant."""
        settled = self._settled
        if settled is not None and settled[0] == self.t:
            previous = {**previous, **{k: v for k, v in settled[1].items() if k in previous}}
        return super().detect_event_crossings(previous, current, sign_tolerance)

    def _after_event(self, outcome: EventOutcome, t: float) -> None:
        assert self._calls is not None
        if outcome.states_changed and len(self._x):
            np.copyto(self._x, self._calls.states(t))
        self._t_next = outcome.next_event_time
        self._integrator.forget()

    def _handle_events_internal(self, event_names: list[str], t: float) -> None:
        """Any event at *t* (the FMU's state events, events it subscribes to) runs the FMU's event iteration; the
        indicators after it are kept for :meth:`detect_event_crossings`."""
        self._event(t)
        if self._indicator_names_located:
            assert self._calls is not None
            z = self._calls.indicators(t, self._x, self._gather_inputs())
            self._settled = (t, dict(zip(self._indicator_names_located, z.tolist(), strict=True)))

    def next_time_event(self, t: float) -> float | None:
        """The FMU's next time event (``nextEventTime`` of its last event iteration) strictly after *t*."""
        t_next = self._t_next
        return t_next if t_next is not None and t < t_next - time_tol(t_next) else None

    def _update_output_states(self, t: float | None = None, event_names: Sequence[str] = NO_EVENTS) -> None:
        """Read every output from the FMU at time *t* with the component's states and inputs."""
        calls, ex = self._calls, self._ex
        if calls is None or ex is None:
            return
        t = self.t if t is None else t
        ex.alias_push()
        if ex.discrete_changed():
            self._event(t)
        else:
            calls.set_continuous(t, self._x, self._gather_inputs())
            ex.push_held()
        ex.pull_all()

    def _after_set_state(self, t: float) -> None:
        assert self._calls is not None
        self._calls.set_continuous(t, self._x, self._gather_inputs())

    # ------------------------------------------------------------------ rollback and physical state
    snapshot_state = ContinuousComponent.snapshot_state
    restore_state = ContinuousComponent.restore_state
    get_state = ContinuousComponent.get_state

    def _snapshot_extra(self) -> Any:
        fmu_state = FMUBase.snapshot_state(self)  # refused first for an FMU that cannot roll back
        assert self._ex is not None
        return _Extra(fmu_state, self._t_next, self._ex.discrete_set)

    def _restore_extra(self, extra: Any) -> None:
        FMUBase.restore_state(self, extra.fmu, self.t)
        assert self._ex is not None
        self._ex.next_event_time = extra.t_next
        self._ex.discrete_set = extra.discrete
        self._settled = None
        assert self._calls is not None
        self._calls.set_continuous(self.t, self._x, self._gather_inputs())

    def set_state(self, state: Mapping[str, Any], t: float) -> None:
        """Set the continuous states (``{name: {'value', 'unit'}}``) at *t*; before ``initialize`` they become
        start values."""
        if not self.is_initialized:
            FMUBase.set_state(self, state, t)
            return
        ContinuousComponent.set_state(self, state, t)

    def reset(self) -> None:
        """Forget time and history; the FMU instance is freed and re-created by the next initialize."""
        super().reset()
