"""Multi-model components: one set of ports, several interchangeable models.

A :class:`MultiComponent` wraps models ("modes") that expose the same ports and
delegates everything to the active one. A mode selector (optionally debounced
by a :class:`~cosimrun.core.switching.Hysteresis` dwell time) asks for switches;
on a switch the physical state of the outgoing model is carried over to the
incoming one, which also receives the latest inputs.
:class:`~cosimrun.core.regions.SwitchRegions` maps a scalar output onto ordered
regions with a hysteresis band per boundary; each boundary doubles as an event
indicator. Masters drive switching through the
:class:`~cosimrun.core.switching.ModeSwitching` protocol, which this class
implements. Boundary events passed to ``handle_event`` always switch (subject
to the dwell time) because events are only handled at accepted instants.

The module is one class of some 600 lines on purpose: it forwards the whole
component contract to the active model. What does not need the component's
state lives beside it: the unified ports and feedthrough of the modes
(:mod:`~cosimrun.core.mode_ports`) and the region a value is in
(:class:`~cosimrun.core.regions.RegionTracker`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cosimrun.core.component import NO_EVENTS, CoSimComponent
from cosimrun.core.events import EventIndicator, InternalEventInfo, crossed
from cosimrun.core.mode_ports import common_feedthrough, unify_ports
from cosimrun.core.ports import PortState, PortType
from cosimrun.core.regions import RegionTracker, SwitchRegions
from cosimrun.core.switching import Hysteresis, ModeKey, ModeSwitch, ModeSwitching, StateAdapter
from cosimrun.core.units import UnitConversion
from cosimrun.errors import (
    ComponentContractError,
    ComponentStateError,
    ConfigError,
    DuplicateNameError,
    UnknownNameError,
)

__all__ = ["Hysteresis", "ModeSwitch", "ModeSwitching", "MultiComponent", "StateAdapter", "SwitchRegions"]

@dataclass(frozen=True, slots=True)
class _MultiSnapshot:
    """Rollback data of a MultiComponent: the active model's snapshot plus switching bookkeeping."""

    mode: str
    model: Any
    region: int | None
    last_switch_time: float | None
    n_switches: int
    history_lengths: dict[str, dict[str, int]]


class MultiComponent(CoSimComponent, ModeSwitching):
    """A component wrapping interchangeable models ("modes") behind one set of ports.

    All models must expose the same ports; the MultiComponent adopts the specs of
    the initial mode and converts values from and to models that use other but
    compatible units. Inputs, outputs, state, rollback, events and feedthrough
    are delegated to the active model. Used on its own, the sub-models record
    their own histories too, but the MultiComponent's history (the unified
    ports) is the one to read; in a system nothing records itself (see
    ``record_history``). An inactive model keeps the time at which it was
    deactivated; the incoming model of a switch is brought to the switch time.

    Switching: ``mode_selector(t)`` proposes a mode from cached outputs (or
    :meth:`set_switch_regions` installs one); ``hysteresis`` enforces a dwell
    time; ``state_adapters[mode]`` or :meth:`_adapt_state` translate states.
    Switches happen in :meth:`apply_mode_switch`, called by :meth:`do_step`
    before stepping unless switches are held (:meth:`hold_mode_switches`, for
    a master's trial steps; that master then calls :meth:`apply_mode_switch` at
    accepted points), and at boundary events of switch regions handled through
    :meth:`handle_event`.
    Every switch appends ``{'time', 'from_mode', 'to_mode'}`` to ``sync_events``
    (plus ``'retrieved'`` and ``'now'`` states when ``record_switch_state``).
    """

    def __init__(
        self,
        name: str,
        models: Mapping[ModeKey, CoSimComponent],
        initial_mode: ModeKey,
        group: str | None = None,
    ) -> None:
        self.models: dict[ModeKey, CoSimComponent] = {}
        super().__init__(name, group=group)
        if not isinstance(models, Mapping) or not models:
            raise ConfigError(None, f"MultiComponent {name!r}: models must be a non-empty mapping of mode name to "
                                    "component")
        seen: dict[int, str] = {}
        for mode, model in models.items():
            if not isinstance(mode, str) or not mode:
                raise ConfigError(None, f"MultiComponent {name!r}: mode names must be non-empty strings, got {mode!r}")
            if not isinstance(model, CoSimComponent):
                raise ComponentContractError(
                    f"MultiComponent {name!r}: mode {mode!r} must be a CoSimComponent, got {type(model).__name__}",
                    component=name,
                )
            if id(model) in seen:
                raise ConfigError(None, f"MultiComponent {name!r}: modes {seen[id(model)]!r} and {mode!r} share one "
                                        "instance")
            seen[id(model)] = mode
        if initial_mode not in models:
            raise UnknownNameError("initial mode", initial_mode, models, f"of MultiComponent {name!r}")
        self.models = dict(models)
        self.initial_mode: ModeKey = initial_mode
        self.active_mode: ModeKey = initial_mode
        self.active_comp: CoSimComponent = self.models[initial_mode]
        self.mode_selector: Callable[[float], ModeKey] | None = None
        self.hysteresis: Hysteresis | None = None
        self.state_adapters: dict[ModeKey, StateAdapter] = {}
        self.sync_events: list[dict[str, Any]] = []
        self.record_switch_state = False
        self._allow_mode_switching = True
        self._latest_inputs: tuple[dict[str, Any], float | None] | None = None
        self._prev_state: dict[str, Any] | None = None
        self._curr_state: dict[str, Any] | None = None
        self._regions: RegionTracker | None = None
        self._boundary_events: dict[str, tuple[str, int]] = {}
        self._event_port_names: set[str] = set()
        self._event_micro = 1
        self._max_step_cap: float | None = None
        self._in_conv: dict[ModeKey, dict[str, UnitConversion]] = {}
        self._out_conv: dict[ModeKey, dict[str, UnitConversion]] = {}
        self._unify_ports()

    # ------------------------------------------------------------------ ports
    def _unify_ports(self) -> None:
        """Adopt the initial mode's port specs, checked against every other model (:func:`unify_ports`)."""
        ports = unify_ports(self.name, self.models, self.active_mode)
        self.input_specs, self.output_specs = ports.inputs, ports.outputs
        self._in_conv, self._out_conv = ports.to_model, ports.from_model

    def _add_event_port(self, name: str) -> None:
        super()._add_event_port(name)
        self._event_port_names.add(name)

    def _mirror_event_ports(self) -> None:
        """Give this component an EVENT port for every indicator of every model."""
        added = False
        for model in self.models.values():
            for name in model.event_indicators:
                if name not in self._event_port_names:
                    self._add_event_port(name)
                    added = True
        if added:
            self._compile_recorders()

    # ------------------------------------------------------------------ initialization
    def _initialize_component(self, t0: float) -> None:
        """Initialize every model at *t0* (any may become active later).

        Input values this component holds already (initial values a system
        assigns before initialization) are given to every model first.
        """
        values = {name: port.value for name, port in self.inputs.items()}
        for mode, model in self.models.items():
            if not model.is_initialized:
                for name, value in self._to_model_inputs(mode, values).items():
                    model.inputs[name] = PortState(model.input_specs[name], value)
            model.initialize(t0)
        self._mirror_event_ports()
        if self._regions is not None:
            self._regions.classify(self.active_mode)

    # ------------------------------------------------------------------ inputs and outputs
    def set_inputs(self, signals: dict[str, Any], t: float | None = None) -> None:
        """Set inputs, forward them to the active model and cache them for replay on a switch."""
        super().set_inputs(signals, t)
        values = {name: self.inputs[name].value for name in signals}
        cached = self._latest_inputs[0] if self._latest_inputs is not None else {}
        self._latest_inputs = ({**cached, **values}, t)
        self._forward_inputs(self.active_mode, self.active_comp, values, t)

    def _forward_inputs(self, mode: ModeKey, model: CoSimComponent, values: dict[str, Any], t: float | None) -> None:
        """Set *values* of this component's inputs on *model* (of *mode*), with the inputs' derivatives over the
        coming step when *model* interpolates inputs (in its units)."""
        model.set_inputs(self._to_model_inputs(mode, values), t)
        if model.interpolates_inputs:
            conv = self._in_conv[mode]
            own, theirs = self.inputs, model.inputs
            for name in values:
                derivatives = own[name].derivatives
                c = conv.get(name)
                theirs[name].derivatives = derivatives if c is None else tuple(c.scale * d for d in derivatives)

    @property
    def interpolates_inputs(self) -> bool:  # type: ignore[override]
        """Whether every model interpolates inputs: the input polynomials then reach the active one."""
        return all(model.interpolates_inputs for model in self.models.values())

    def record_native_steps(self, slot: memoryview | None) -> None:
        """Hand the crash record's slot (:mod:`cosimrun.core.crashsite`) to every model that steps in C: only the
        active one steps, under this component's name."""
        for model in self.models.values():
            record = getattr(model, "record_native_steps", None)
            if record is not None:
                record(slot)

    def _to_model_inputs(self, mode: ModeKey, values: dict[str, Any]) -> dict[str, Any]:
        conv = self._in_conv[mode]
        if not conv:
            return values
        return {n: (conv[n](v) if n in conv else v) for n, v in values.items()}

    def _update_output_states(self, t: float | None = None, event_names: Sequence[str] = NO_EVENTS) -> None:
        """Copy the active model's outputs (converted to this component's units); set event ports."""
        src = self.active_comp.outputs
        conv = self._out_conv[self.active_mode]
        events = self._event_port_names
        for name, port in self.outputs.items():
            if name in events:
                port.value = name in event_names
            else:
                s = src.get(name)
                if s is None:
                    continue
                c = conv.get(name)
                port.value = s.value if c is None else c(s.value)
            port.t_last = t

    def refresh_outputs(self, t: float) -> None:
        """Refresh the active model's outputs from its inputs, then this component's."""
        self.active_comp.refresh_outputs(t)
        self._update_output_states(t, NO_EVENTS)

    def _active_output(self, name: str) -> float:
        """The active model's current output *name* in this component's unit."""
        value = self.active_comp.outputs[name].value
        c = self._out_conv[self.active_mode].get(name)
        return value if c is None else c(value)

    # ------------------------------------------------------------------ stepping and switching
    def _do_step_internal(self, t: float, dt: float) -> None:
        """Switch first if the selector asks for it (unless switches are held), then step the active model.

        Holding switches (:meth:`hold_mode_switches`) is meant for a master's
        trial steps: a switch would invalidate its rollback snapshot. That
        master calls :meth:`apply_mode_switch` itself on accepted points.
        """
        if self._allow_mode_switching:
            self.apply_mode_switch(t)
        self.active_comp.do_step(t, dt)

    def apply_mode_switch(self, t: float) -> bool:
        """Switch at *t* if the selector wants another mode and the dwell window allows; True if switched.

        Works while switches are held: this is the explicit entry point for a
        master on accepted communication points. Outputs are refreshed from the
        incoming model (no extra history sample is recorded); evaluate event
        indicators after calling this.
        """
        if not self._is_initialized:
            raise ComponentStateError(f"MultiComponent {self.name!r}: call initialize(t0) before switching modes",
                                      component=self.name)
        target = self._select_target_mode(t)
        if target == self.active_mode:
            return False
        self._switch_mode(target, t)
        self._update_output_states(t, NO_EVENTS)
        return True

    def hold_mode_switches(self, hold: bool) -> None:
        """Stop (or allow again) switches inside :meth:`do_step` (see :class:`ModeSwitching`)."""
        self._allow_mode_switching = not hold

    def mode_switches(self) -> list[ModeSwitch]:
        """The switches logged in ``sync_events``, as :class:`ModeSwitch` records."""
        return [
            ModeSwitch(float(r["time"]), self.name, str(r["from_mode"]), str(r["to_mode"])) for r in self.sync_events
        ]

    def _select_target_mode(self, t: float) -> ModeKey:
        """The mode wanted at *t*: the selector's proposal, or the active mode when there is
        no selector or the dwell window is open. (Held switches are checked by
        :meth:`_do_step_internal`, so that :meth:`apply_mode_switch` works while they are held.)"""
        if self.mode_selector is None:
            return self.active_mode
        if self.hysteresis is not None and self.hysteresis.in_dwell_window(t):
            return self.active_mode
        return self.mode_selector(t)

    def _switch_mode(self, new_mode: ModeKey, t: float, *, region: int | None = None) -> None:
        """Make *new_mode* active at *t*: transfer state, log the switch, notify the hysteresis."""
        if new_mode not in self.models:
            raise UnknownNameError("mode", new_mode, self.models, f"of MultiComponent {self.name!r}")
        if new_mode == self.active_mode:
            return
        if not self._is_initialized:
            raise ComponentStateError(f"MultiComponent {self.name!r}: call initialize(t0) before switching modes",
                                      component=self.name)
        from_mode = self.active_mode
        retrieved = self._perform_state_transfer(self.models[new_mode], new_mode, t)
        if self._regions is not None:
            self._regions.region = region if region is not None else self._regions.after_switch(self.active_mode)
        self._capture_switch_event(t, from_mode, new_mode, retrieved)
        if self.hysteresis is not None:
            self.hysteresis.record_switch(t)

    def _perform_state_transfer(self, new_comp: CoSimComponent, new_mode: ModeKey, t: float) -> dict[str, Any]:
        """Move the physical state from the active model to *new_comp* and make it active.

        Replays the latest inputs onto *new_comp*, adapts the state
        (``state_adapters[new_mode]`` if present, else :meth:`_adapt_state`),
        sets it at *t*, brings *new_comp* to time *t* with fresh outputs (and a
        history sample). Returns the state as retrieved, before adaptation.
        """
        retrieved = self.active_comp.get_state()
        if self._latest_inputs is not None:
            signals, t_in = self._latest_inputs
            self._forward_inputs(new_mode, new_comp, dict(signals), t_in)
        adapted = self._adapt(retrieved, new_mode, new_comp)
        new_comp.set_state(adapted, t)
        new_comp.t = t
        new_comp.refresh_outputs(t)
        if new_comp.record_history:
            new_comp._record_outputs(t)
        self._prev_state, self._curr_state = retrieved, adapted
        self.active_comp, self.active_mode = new_comp, new_mode
        return retrieved

    def _adapt(self, state: dict[str, Any], mode: ModeKey, comp: CoSimComponent) -> dict[str, Any]:
        adapter = self.state_adapters.get(mode)
        if adapter is not None:
            return adapter.adapt_state(state, comp)
        return self._adapt_state(state, mode)

    def _adapt_state(self, state: dict[str, Any], target_mode: ModeKey) -> dict[str, Any]:
        """Translate *state* (from ``get_state`` of the active model) for *target_mode*.

        The base implementation returns *state* unchanged, which suits models
        sharing one state format. Override it (or register ``state_adapters``)
        when models name or represent their states differently.
        """
        return state

    def _capture_switch_event(self, t: float, from_mode: ModeKey, to_mode: ModeKey, retrieved: dict[str, Any]) -> None:
        """Append ``{'time', 'from_mode', 'to_mode'}`` to ``sync_events``; with
        ``record_switch_state`` also the source state (``'retrieved'``) and the
        incoming model's state after the transfer (``'now'``, one extra ``get_state``)."""
        record: dict[str, Any] = {"time": float(t), "from_mode": from_mode, "to_mode": to_mode}
        if self.record_switch_state:
            record["retrieved"] = copy.deepcopy(retrieved)
            record["now"] = self.active_comp.get_state()
        self.sync_events.append(record)

    # ------------------------------------------------------------------ switch regions
    @property
    def switch_regions(self) -> SwitchRegions | None:
        """The attached :class:`SwitchRegions`, if any."""
        return self._regions.regions if self._regions is not None else None

    def set_switch_regions(self, regions: SwitchRegions | None) -> None:
        """Drive mode selection by *regions* of a scalar output (``None`` detaches them).

        The regions become the ``mode_selector`` (the dwell time still applies on
        top). When every model supports rollback, each boundary ``i`` also
        registers two event indicators (direction +1) on this component:
        ``f"{port}_up{i}"`` = value - upper_i while in region ``i`` and
        ``f"{port}_down{i}"`` = lower_i - value while in region ``i + 1``, both a
        constant -1 otherwise. They therefore cross zero only when the value
        leaves the current region; handling such an event switches at its instant.
        Without rollback the regions act as a selector only, switching at the
        next communication point. Must be called before :meth:`initialize`.
        """
        if self._is_initialized:
            raise ComponentStateError(
                f"MultiComponent {self.name!r}: set switch regions before initialize (or after reset)",
                component=self.name,
            )
        if regions is not None and not isinstance(regions, SwitchRegions):
            raise ComponentContractError(f"MultiComponent {self.name!r}: expected SwitchRegions, got "
                                         f"{type(regions).__name__}", component=self.name)
        if regions is not None:
            self._validate_regions(regions)
        for name in self._boundary_events:
            self.event_indicators.pop(name, None)
            self.output_specs.pop(name, None)
            self.outputs.pop(name, None)
            self.history._port_histories.pop(name, None)
            self._event_port_names.discard(name)
        self._boundary_events = {}
        if self._regions is not None and self.mode_selector == self._region_selector:
            self.mode_selector = None
        self._regions = None
        if regions is None:
            return
        self._regions = RegionTracker(regions, lambda: regions.value(self._active_output(regions.port)))
        self.mode_selector = self._region_selector
        if all(model.supports_rollback for model in self.models.values()):
            self._boundary_events = regions.indicator_names()
            for name, (kind, i) in self._boundary_events.items():
                self.event_indicators[name] = EventIndicator(name, _boundary_function(kind, i), direction=1)

    def _validate_regions(self, regions: SwitchRegions) -> None:
        where = f"MultiComponent {self.name!r}"
        plain = {n: s for n, s in self.output_specs.items() if s.type is not PortType.EVENT}
        spec = plain.get(regions.port)
        if spec is None:
            raise UnknownNameError("output port", regions.port, plain, f"for switch regions of {where}")
        if spec.type not in (PortType.REAL, PortType.INT):
            raise ConfigError(
                None, f"{where}: switch regions need a numeric output, port {regions.port!r} is {spec.type.value}"
            )
        for mode in regions.modes:
            if mode not in self.models:
                raise UnknownNameError("mode", mode, self.models, f"in switch regions of {where}")
        taken = set(self.output_specs) | set(self.event_indicators)
        for model in self.models.values():
            taken |= set(model.event_indicators) | set(model.output_specs)
        taken -= set(self._boundary_events)
        for name in regions.indicator_names():
            if name in taken:
                raise DuplicateNameError(
                    f"{where}: switch-region indicator {name!r} clashes with an existing port or indicator",
                    kind="event indicator", name=name,
                )

    def _region_selector(self, t: float) -> ModeKey:
        """Mode selector of the switch regions (reads the active model's cached output)."""
        assert self._regions is not None
        return self._regions.select(self.active_mode)

    def _boundary_indicator(self, kind: str, boundary: int) -> float:
        """Value of a boundary indicator (see :meth:`set_switch_regions`)."""
        assert self._regions is not None
        return self._regions.indicator(kind, boundary, self.active_mode)

    def _switch_on_boundary(self, event_names: list[str], t: float) -> None:
        """Cross the boundary named by a handled region event, honoring the dwell window."""
        regions = self._regions
        assert regions is not None
        target = regions.crossed([self._boundary_events[name] for name in event_names], self.active_mode)
        if target is None:
            return
        mode = regions.regions.modes[target]
        if mode == self.active_mode:
            regions.region = target
        elif self.hysteresis is None or not self.hysteresis.in_dwell_window(t):
            self._switch_mode(mode, t, region=target)

    # ------------------------------------------------------------------ state and rollback
    def get_state(self) -> dict[str, Any]:
        """The active model's state, in its own format."""
        return self.active_comp.get_state()

    def set_state(self, state: dict[str, Any], t: float) -> None:
        """Set *state* on the active model, adapted for it like on a switch."""
        self.active_comp.set_state(self._adapt(state, self.active_mode, self.active_comp), t)

    @property  # type: ignore[override]
    def ports_named_by_model(self) -> bool:
        """Whether a mode wraps a model whose variables name its ports (an FMU): the modes share the ports."""
        return any(model.ports_named_by_model for model in self.models.values())

    @property
    def supports_rollback(self) -> bool:
        """Whether the active model supports rollback."""
        return self.active_comp.supports_rollback

    @property
    def can_always_roll_back(self) -> bool:
        """Whether every model supports rollback, so that it holds whichever mode is active."""
        return all(model.supports_rollback for model in self.models.values())

    @property
    def record_history(self) -> bool:
        """Whether this component and its models record themselves (off inside a system)."""
        return self._record_history

    @record_history.setter
    def record_history(self, on: bool) -> None:
        self._record_history = on
        for model in self.models.values():
            model.record_history = on

    def snapshot_state(self) -> Any:
        """Snapshot of the active model plus the switching bookkeeping; records the mode."""
        return _MultiSnapshot(
            mode=self.active_mode,
            model=self.active_comp.snapshot_state(),
            region=self._regions.region if self._regions is not None else None,
            last_switch_time=self.hysteresis.last_switch_time if self.hysteresis is not None else None,
            n_switches=len(self.sync_events),
            history_lengths={
                mode: {n: len(h) for n, h in model.history.get_all_histories().items()}
                for mode, model in self.models.items()
            }
            if self.record_history
            else {},
        )

    def restore_state(self, snapshot: Any, t: float) -> None:
        """Return to *snapshot*; ``ValueError`` if it was taken in another mode.

        Also forgets switches logged since, and sub-model history samples
        recorded since (the master truncates this component's own history).
        """
        if not isinstance(snapshot, _MultiSnapshot):
            raise TypeError(f"MultiComponent {self.name!r}: not a snapshot of a MultiComponent: {snapshot!r}")
        if snapshot.mode != self.active_mode:
            raise ValueError(
                f"MultiComponent {self.name!r}: snapshot was taken in mode {snapshot.mode!r} but the active "
                f"mode is {self.active_mode!r}; hold mode switches (hold_mode_switches(True)) "
                "between snapshot and restore"
            )
        comp = self.active_comp
        comp.restore_state(snapshot.model, t)
        comp.t = t
        for mode, lengths in snapshot.history_lengths.items():
            histories = self.models[mode].history.get_all_histories()
            for name, n in lengths.items():
                if name in histories:
                    histories[name].truncate(n)
        if self._regions is not None:
            self._regions.region = snapshot.region
        if self.hysteresis is not None and snapshot.last_switch_time is not None:
            self.hysteresis.last_switch_time = snapshot.last_switch_time
        del self.sync_events[snapshot.n_switches :]
        self.t = t
        self.refresh_outputs(t)

    def checkpoint_state(self) -> dict[str, Any]:
        """The active mode, every model's state (an inactive model keeps its own time and state), the switch
        log, the region, the dwell timer and the latest inputs replayed on a switch, as plain values."""
        state = self._ports_checkpoint()
        latest = self._latest_inputs
        state.update(
            mode=self.active_mode,
            models={mode: model.checkpoint_state() for mode, model in self.models.items()},
            region=self._regions.region if self._regions is not None else None,
            last_switch_time=self.hysteresis.last_switch_time if self.hysteresis is not None else None,
            switches=[dict(record) for record in self.sync_events],
            latest_inputs=None if latest is None else [dict(latest[0]), latest[1]],
            event_micro=self._event_micro,
        )
        return state

    def restore_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Return to *state* (see :meth:`checkpoint_state`), in the mode it was taken in."""
        mode = state["mode"]
        if mode not in self.models:
            raise UnknownNameError("mode", mode, self.models, f"of MultiComponent {self.name!r}")
        for name, model_state in state["models"].items():
            self.models[name].restore_checkpoint(model_state)
        self.active_mode, self.active_comp = mode, self.models[mode]
        if self._regions is not None:
            self._regions.region = state["region"]
        if self.hysteresis is not None:
            self.hysteresis.last_switch_time = state["last_switch_time"]
        self.sync_events[:] = [dict(record) for record in state["switches"]]
        latest = state["latest_inputs"]
        self._latest_inputs = None if latest is None else (dict(latest[0]), latest[1])
        self._event_micro = state["event_micro"]
        self._restore_ports_checkpoint(state)

    @property
    def can_checkpoint(self) -> bool:
        """Whether every model gives its state for checkpoints."""
        return all(model.can_checkpoint for model in self.models.values())

    # ------------------------------------------------------------------ time
    def next_time_event(self, t: float) -> float | None:
        """The active model's next time event, or the end of the dwell window if a switch waits for it."""
        candidates = []
        event = self.active_comp.next_time_event(t)
        if event is not None:
            candidates.append(event)
        h = self.hysteresis
        if (
            h is not None
            and self.mode_selector is not None
            and self._is_initialized
            and h.in_dwell_window(t)
            and self.mode_selector(t) != self.active_mode
        ):
            candidates.append(h.window_end)
        return min(candidates) if candidates else None

    @property
    def max_step(self) -> float | None:
        """The active model's ``max_step``, capped by a value assigned to this component."""
        limits = [v for v in (self._max_step_cap, self.active_comp.max_step) if v is not None]
        return min(limits) if limits else None

    @max_step.setter
    def max_step(self, value: float | None) -> None:
        self._max_step_cap = value

    def bound_internal_steps(self, dt: float | None) -> None:
        """Bound every model's internal steps (see :meth:`CoSimComponent.bound_internal_steps`): a model that
        becomes active later steps as the active one would."""
        for model in self.models.values():
            model.bound_internal_steps(dt)

    # ------------------------------------------------------------------ events
    def add_event_indicator(self, name: str, func: Callable[[CoSimComponent], float], direction: int = 0) -> None:
        """Register an indicator on every model that supports rollback.

        *func* receives the sub-model, so it should use the shared port interface.
        This component gets a matching EVENT port. ``RuntimeError`` if no model
        supports rollback.
        """
        hosts = [m for m in self.models.values() if m.supports_rollback]
        if not hosts:
            raise ComponentStateError(
                f"MultiComponent {self.name!r} cannot host event indicator {name!r}: none of its models "
                "supports rollback, which event localization needs", component=self.name,
            )
        if name in self.event_indicators or any(name in m.event_indicators for m in hosts):
            raise DuplicateNameError(f"MultiComponent {self.name!r} already has an event indicator {name!r}",
                                     kind="event indicator", name=name)
        self._check_event_port_name(name)
        for model in hosts:
            model.add_event_indicator(name, func, direction)
        if self._is_initialized:
            self._add_event_port(name)
            self._backfill_history(name)
            self._compile_recorders()

    @property
    def has_state_events(self) -> bool:
        """True if the active model or the switch-region boundaries have indicators."""
        return self.active_comp.has_state_events or bool(self.event_indicators)

    def evaluate_event_indicators(self) -> dict[str, float]:
        """The active model's indicators plus this component's boundary indicators."""
        values = dict(self.active_comp.evaluate_event_indicators()) if self.active_comp.has_state_events else {}
        for name, ind in self.event_indicators.items():
            values[name] = ind.evaluate(self)
        return values

    def detect_event_crossings(
        self, previous: dict[str, float], current: dict[str, float], sign_tolerance: float = 0.0
    ) -> list[str]:
        """Crossings of the active model's indicators and of the boundary indicators."""
        names = []
        if self.active_comp.has_state_events:
            names.extend(self.active_comp.detect_event_crossings(previous, current, sign_tolerance))
        for name, ind in self.event_indicators.items():
            if (
                name in previous
                and name in current
                and crossed(previous[name], current[name], ind.direction, sign_tolerance)
            ):
                names.append(name)
        return names

    def get_internal_event_hints(self) -> list[InternalEventInfo]:
        """Hints of the active model (and of this component), cleared on reading."""
        return self.active_comp.get_internal_event_hints() + super().get_internal_event_hints()

    def handle_event(self, event_names: Sequence[str], t: float, micro: int = 1) -> None:
        """Apply events at *t* (see :meth:`_handle_events_internal`) and record the post-event sample."""
        self._event_micro = micro
        super().handle_event(event_names, t, micro)

    def _handle_events_internal(self, event_names: list[str], t: float) -> None:
        """Delegate events to the active model; boundary events of switch regions switch mode at *t*.

        Boundary events switch even while switches are held (events are
        handled at accepted instants only) but never inside the dwell window.
        """
        own = [n for n in event_names if n in self._boundary_events]
        others = [n for n in event_names if n not in self._boundary_events]
        if others:
            self.active_comp.handle_event(others, t, self._event_micro)
        if own:
            self._switch_on_boundary(own, t)

    # ------------------------------------------------------------------ feedthrough
    def _detect_direct_feedthrough(self) -> dict[str, set[str]]:
        """The models' common feedthrough map (:func:`common_feedthrough`: a ``ConfigError`` if they disagree)."""
        outputs = [n for n in self.outputs if n not in self._event_port_names]
        reference = common_feedthrough(self.name, self.models, self.initial_mode, outputs, set(self.inputs))
        return {o: set(reference.get(o, ())) for o in self.outputs}

    # ------------------------------------------------------------------ lifecycle end
    def reset(self) -> None:
        """Reset this component and every model; return to the initial mode and forget switches."""
        super().reset()
        for model in self.models.values():
            model.reset()
        self.active_mode = self.initial_mode
        self.active_comp = self.models[self.initial_mode]
        self._latest_inputs = None
        self._prev_state = self._curr_state = None
        self.sync_events.clear()
        if self._regions is not None:
            self._regions.region = None
        if self.hysteresis is not None:
            self.hysteresis.reset()

    def free(self) -> None:
        """Free every model."""
        for model in self.models.values():
            model.free()


def _boundary_function(kind: str, boundary: int) -> Callable[[CoSimComponent], float]:
    def indicator(comp: Any) -> float:
        return comp._boundary_indicator(kind, boundary)

    return indicator
