"""What both FMU components share: their own settings, ``path`` (which loads the model) and the delegation to
:class:`~cosimrun.fmi.instance.FMUInstance`.

:class:`FMUBase` is the one class both components derive from
(co-simulation :class:`~cosimrun.components.fmu.FMUComponent`, model exchange
:class:`~cosimrun.components.fmu.me.ModelExchangeFMU`); it keeps the
component contract (parameters, ports, rollback, physical state) and hands
everything FMU-specific to the component's ``FMUInstance`` (one per FMU file,
made when ``path`` is set). A subclass says how an instance runs
(:meth:`FMUBase._bind`: a stepper or model-exchange calls).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pint

from cosimrun.components.fmu.build import resolve_example
from cosimrun.core.component import CoSimComponent, check_state_names
from cosimrun.core.ports import PortState
from cosimrun.core.units import Q_
from cosimrun.errors import ComponentStateError, ConfigError, FMUError, UnknownNameError
from cosimrun.fmi.description import read_fmu
from cosimrun.fmi.fmi2 import Instance
from cosimrun.fmi.instance import FMUInstance, choose_interface
from cosimrun.fmi.model import FMUInterface, FMUModel, FMUVariable
from cosimrun.fmi.parameters import by_name_first, convert
from cosimrun.fmi.ports import ValuePorts, event_indicator

_log = logging.getLogger("cosimrun.fmu")

OWN_DEFAULTS: dict[str, Any] = {
    "path": None,
    "aliases": {},
    "start": {},
    "events": {},
    "states": None,
    "tolerance": None,
    "logging": False,
    "private_copy": False,
    "interface": None,
}
"""The component's own parameters (everything else comes from the FMU)."""

STRUCTURAL = ("aliases", "events", "states")
"""Own parameters that change the ports, the state or the event indicators."""

INTERFACES = ("cs", "me")
"""Values of the ``interface`` parameter: co-simulation, model exchange (``null``: co-simulation if offered)."""


class FMUBase(CoSimComponent):
    """An FMU as a component: own settings and ``path`` here, the FMU itself in :attr:`fmu`."""

    INTERFACE: ClassVar[str] = "cs"
    """The FMI interface this class runs (``cs`` or ``me``)."""
    FIRST_PARAMETERS: ClassVar[tuple[str, ...]] = ("path",)
    """Parameters a config builder should apply before the others (they define the rest)."""
    may_request_stop = True
    """An FMU may ask to terminate the simulation (:attr:`stop_requested`)."""
    ports_named_by_model = True
    """Ports carry the FMU's variable names (``der(x)``, ``a.b[1]``), which need not be identifiers."""

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.parameters.update({k: (dict(v) if isinstance(v, dict) else v) for k, v in OWN_DEFAULTS.items()})
        self.fmu: FMUInstance | None = None
        """The FMU (``None`` before ``path`` is set)."""
        self._pending: dict[str, Any] = {}
        """FMU parameters set before ``path``: checked when it arrives."""
        self._port_vars: dict[str, FMUVariable] = {}
        """Port name -> the FMU input or output variable behind it."""
        self._state_vars: list[tuple[str, FMUVariable]] = []
        """The physical state: (name, variable) in ``get_state`` order."""
        self._hold_initialization = False
        """Whether the next instance stays in Initialization Mode (see :meth:`enter_initialization`)."""

    # ------------------------------------------------------------------ what the component is
    @property
    def model(self) -> FMUModel | None:
        """The model description of the FMU (``None`` before ``path`` is set)."""
        return self.fmu.model if self.fmu is not None else None

    @property
    def fmu_label(self) -> str:
        """The FMU file name (or ``no FMU`` before ``path`` is set)."""
        return self.fmu.model.label if self.fmu is not None else "no FMU"

    @property
    def is_fmi3(self) -> bool:
        """True for an FMI 3.0 FMU (the FMI calls differ by version; the logic around them does not)."""
        return self.fmu is not None and self.fmu.fmi3

    @property
    def supports_rollback(self) -> bool:
        """True when the FMU's interface declares ``canGetAndSetFMUstate``."""
        return self.fmu is not None and self.fmu.interface.can_rollback

    @property
    def state_names(self) -> tuple[str, ...]:
        """Names of the physical state (``get_state`` keys)."""
        return tuple(name for name, _ in self._state_vars)

    @property  # type: ignore[override]
    def pending_event(self) -> str | None:
        """An event the FMU's last step left for the master (see :attr:`CoSimComponent.pending_event`)."""
        return self.fmu.requests.pending_event if self.fmu is not None else None

    @property  # type: ignore[override]
    def stop_requested(self) -> str | None:
        """The FMU's request to end the run (see :attr:`CoSimComponent.stop_requested`)."""
        return self.fmu.requests.stop_requested if self.fmu is not None else None

    def _where(self) -> str:
        return f"FMU component {self.name!r} ({self.fmu_label})"

    def _now(self) -> float:
        return self.t

    # ------------------------------------------------------------------ parameters
    def set_parameters(self, **parameters: Any) -> None:
        """Set parameters by name; ``path`` is applied first, so it may come in any position.

        Names other than the component's own are FMU parameters; before ``path``
        is known they are kept and checked when it is set.
        """
        if "path" in parameters:
            self._set_path(parameters.pop("path"))
        if self.fmu is None:
            for name, value in parameters.items():
                self._set_one(name, value)
            return
        items = [item for name, value in by_name_first(parameters) for item in self._elements(name, value)]
        for name, key, value in items:
            self._set_element(name, key, value)

    def _elements(self, key: str, value: Any, where: str = "") -> Any:
        """The variables *key*: *value* sets among the parameters (see
        :meth:`~cosimrun.fmi.parameters.ParameterValues.elements`)."""
        assert self.fmu is not None
        return self.fmu.values.elements(key, value, self.parameters, "parameter", where or f"of {self._where()}")

    def _set_element(self, name: str, key: str, value: Any) -> None:
        """:meth:`_set_one`; an invalid value of an element named by a dotted *key* is a ``ConfigError`` there."""
        if key == name:
            self._set_one(name, value)
            return
        try:
            self._set_one(name, value)
        except ConfigError as exc:
            if exc.key != name:
                raise
            raise ConfigError(key, f"{value!r} is invalid: {exc.message}") from None
        except ValueError as exc:
            raise ConfigError(key, f"{value!r} is invalid: {exc}") from None

    def _set_one(self, name: str, value: Any) -> None:
        if name in OWN_DEFAULTS:
            self._check_structural_change(name)
            self.parameters[name] = self._validate_own(name, value)
            fmu = self.fmu
            if name == "private_copy":
                if fmu is not None:
                    fmu.unload()  # the next initialize loads the library from the chosen copy
            elif fmu is not None and name in STRUCTURAL:
                self._rebuild()
            elif name == "start" and fmu is not None:
                self._apply_start(self.parameters["start"])
            elif name == "interface" and fmu is not None:
                self._choose_interface(fmu.model)
            return
        if self.fmu is None:
            self._pending[name] = value
            return
        var = self.fmu.model.variables.get(name)
        if var is None or name not in self.parameters:
            raise UnknownNameError("parameter", name, self.parameters, f"of {self._where()}")
        converted = convert(var, value, f"{self._where()}: parameter {name!r}", name)
        if self._is_initialized and self.fmu.handle is not None:
            if var.variability != "tunable":
                raise ConfigError(name, f"{self._where()}: parameter {name!r} is {var.variability}; it can only "
                                        "change before initialize (or after reset); tunable parameters can change "
                                        "during a run")
            self.fmu.set_values([(var, converted)], self.t, self.parameters)
        self.parameters[name] = converted
        self.fmu.values.fmu_values[name] = converted

    def _check_structural_change(self, name: str) -> None:
        if self._is_initialized and name in ("path", *STRUCTURAL, "start", "tolerance", "private_copy", "interface"):
            raise ConfigError(name, f"{self._where()}: parameter {name!r} can only change before initialize (or "
                                    "after reset)")

    def _validate_own(self, name: str, value: Any) -> Any:
        where = self._where()
        if name in ("aliases", "start", "events"):
            if value is None:
                return {}
            if not isinstance(value, Mapping):
                raise ConfigError(name, f"{where}: parameter {name!r} must be a mapping, got {value!r}")
            return {str(k): v for k, v in value.items()}
        if name == "states":
            if value is None:
                return None
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise ConfigError(name, f"{where}: parameter 'states' must be a list of variable names, got {value!r}")
            return [str(v) for v in value]
        if name == "tolerance":
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(name, f"{where}: parameter 'tolerance' must be a number > 0 (or null), "
                                        f"got {value!r}")
            return float(value)
        if name == "interface":
            if value is not None and value not in INTERFACES:
                raise ConfigError(name, f"{where}: parameter 'interface' must be cs (co-simulation) or me (model "
                                        f"exchange), got {value!r}")
            return value
        if name in ("logging", "private_copy"):
            if not isinstance(value, (bool, np.bool_)):
                raise ConfigError(name, f"{where}: parameter {name!r} must be true or false, got {value!r}")
            return bool(value)
        return value

    def _set_path(self, value: Any) -> None:
        """Load the model description; the FMU's parameters replace those of a previous FMU.

        An unusable file is a ``ValueError`` naming the component and ``path``
        (the config builder adds the value it was given).
        """
        self._check_structural_change("path")
        if value is None:
            if self.fmu is not None:
                self.fmu.unload()
            self.fmu = None
            self.parameters["path"] = None
            return
        if not isinstance(value, (str, os.PathLike)):
            raise ConfigError("path", f"{self._where()}: parameter 'path' must name an FMU file, got {value!r}")
        text = os.fspath(value)
        try:
            file = resolve_example(text[len("example:"):]) if text.startswith("example:") else Path(text)
            model = read_fmu(file)
            interface = self._choose_interface(model)
        except (ValueError, FMUError) as exc:
            # A plain ValueError on purpose: the config builder then reports the value given (``'x.fmu' is
            # invalid: ...``), which a keyed ConfigError would leave out.
            raise ValueError(f"component {self.name!r}: parameter 'path': {exc}") from None
        previous_fmu = self.fmu
        if previous_fmu is not None and model is previous_fmu.model:
            fmu = previous_fmu
        else:
            if previous_fmu is not None:
                previous_fmu.unload()
            fmu = FMUInstance(self.name, model, interface, self._now)
            if previous_fmu is not None:
                fmu.values.fmu_values = {k: v for k, v in previous_fmu.values.fmu_values.items()
                                         if k in model.variables}
        own = {k: self.parameters[k] for k in OWN_DEFAULTS}
        previous = {k: v for k, v in self.parameters.items() if k not in OWN_DEFAULTS}
        self.fmu = fmu
        self.parameters = {**own, "path": text}
        for var in model.parameters:
            if var.name in OWN_DEFAULTS:
                _log.warning("%s: FMU parameter %r is shadowed by the component setting of that name; set it "
                             "through 'start: {%s: ...}'", self._where(), var.name, var.name)
                continue
            self.parameters[var.name] = var.start
        fmu_values = fmu.values.fmu_values
        for name, previous_value in previous.items():
            if name in self.parameters and name in fmu_values:
                self.parameters[name] = previous_value
        self._rebuild()
        self._apply_start(self.parameters["start"])
        pending, self._pending = self._pending, {}
        items = [item for name, value in by_name_first(pending)
                 for item in self._elements(name, value, where=f"of {self._where()} (set before 'path')")]
        for name, key, value in items:
            self._set_element(name, key, value)

    def _choose_interface(self, model: FMUModel) -> FMUInterface:
        """The interface of *model* this class runs (see :func:`~cosimrun.fmi.instance.choose_interface`)."""
        return choose_interface(model, self.INTERFACE, self.parameters["interface"], self._where(),
                                type(self).__name__)

    def _apply_start(self, start: Mapping[str, Any]) -> None:
        assert self.fmu is not None
        self.fmu.values.apply_start(start, self._port_vars, self._where())

    # ------------------------------------------------------------------ ports, state and events
    def _rebuild(self) -> None:
        """Declare ports, feedthrough, states and event indicators from the model and the settings."""
        assert self.fmu is not None
        ports = self.fmu.rebuild_ports(self.parameters["aliases"], self.parameters["states"])
        self.input_specs, self.output_specs = ports.input_specs, ports.output_specs
        self.inputs, self.outputs = {}, {}
        self._port_vars = ports.port_vars
        self.direct_feedthrough = ports.feedthrough
        self._detected_feedthrough = None
        self._state_vars = ports.state_vars
        self.event_indicators.clear()
        for name, spec in self.parameters["events"].items():
            self._add_event(str(name), spec)

    def _add_event(self, name: str, spec: Any) -> None:
        """The indicator ``(|y| if abs else y) - level`` of the ``events`` entry *name*."""
        port, direction, level, use_abs = event_indicator(self._where(), name, spec, self.output_specs)
        if not self.supports_rollback:
            raise ConfigError("events", self._no_event_source(name))

        def indicator(comp: CoSimComponent, port: str = port) -> float:
            value = float(comp.outputs[port].value)
            return (abs(value) if use_abs else value) - level

        super().add_event_indicator(name, indicator, direction)

    def _no_event_source(self, event: str) -> str:
        return (
            f"{self._where()} cannot be an event source (event {event!r}): its modelDescription.xml declares "
            "canGetAndSetFMUstate=\"false\", so cosimrun cannot roll it back to locate an event instant. "
            "It still runs as a passive component under the hybrid master; to use it as an event source, "
            "export the FMU with FMU-state support (for pythonfmu: --handle-state)"
        )

    def add_event_indicator(self, name: str, func: Callable[[CoSimComponent], float], direction: int = 0) -> None:
        """Register an indicator; refused with an explanation when the FMU cannot roll back."""
        if not self.supports_rollback:
            raise FMUError(self._no_event_source(name), component=self.name)
        super().add_event_indicator(name, func, direction)

    def _initialize_ports_from_specs(self) -> None:
        """Inputs start at their start values (the ``start`` setting, else the model's)."""
        start = self.fmu.values.start_values if self.fmu is not None else {}
        for name, spec in self.input_specs.items():
            if name not in self.inputs:
                var = self._port_vars[name]
                self.inputs[name] = PortState(spec, start.get(var.name, var.start))
        super()._initialize_ports_from_specs()

    # ------------------------------------------------------------------ life cycle
    def _initialize_component(self, t0: float) -> None:
        if self.fmu is None:
            raise ConfigError("path", f"component {self.name!r} (type fmu): parameter 'path' is not set; "
                                      "name an FMU file (params: {path: model.fmu})")
        self._start_instance(t0)

    def _start_instance(self, t0: float, states: Mapping[str, float] | None = None) -> None:
        """Instantiate the FMU at *t0* with the parameters, start values, *states* and inputs (see
        :meth:`FMUInstance.start <cosimrun.fmi.instance.FMUInstance.start>`), bound by :meth:`_bind`."""
        fmu = self.fmu
        assert fmu is not None
        self._unbind()
        params = self.parameters
        fmu.start(t0, fmu.values.instance_values(states), self.inputs, self.outputs, self._bind,
                  tolerance=params["tolerance"], logging=params["logging"], private=params["private_copy"],
                  hold=self._hold_initialization)

    def _bind(self, inst: Instance, dll: Any, ports: ValuePorts) -> Any:
        """The runtime of a new instance *inst* (see :data:`~cosimrun.fmi.instance.Bind`)."""
        raise NotImplementedError

    def _unbind(self) -> None:
        """Forget the runtime of the instance about to be freed."""

    def _free_instance(self) -> None:
        self._unbind()
        if self.fmu is not None:
            self.fmu.free_instance()

    # ------------------------------------------------------------------ rollback
    def snapshot_state(self) -> Any:
        """Capture the FMU state (``fmi2GetFMUstate``), the time and the port values."""
        if not self.supports_rollback:
            raise NotImplementedError(f"{self._where()} does not support rollback (canGetAndSetFMUstate is false)")
        assert self.fmu is not None
        return self.fmu.snapshot(self.t)

    def restore_state(self, snapshot: Any, t: float) -> None:
        """Return exactly to *snapshot* (``fmi2SetFMUstate``); ports get their values of that time."""
        if self.fmu is None:
            raise ConfigError(None, f"{self._where()}: not a snapshot of an FMU component: {snapshot!r}")
        self.t = self.fmu.restore(snapshot, t)

    # ------------------------------------------------------------------ checkpoints
    @property
    def can_checkpoint(self) -> bool:
        """Whether the FMU's state can be saved: a co-simulation FMU that can get and serialize it
        (``canGetAndSetFMUstate`` and ``canSerializeFMUstate``)."""
        fmu = self.fmu
        return (fmu is not None and fmu.interface.kind == "cs" and fmu.interface.can_rollback
                and fmu.interface.can_serialize)

    def fixed_after_start(self, name: str) -> str | None:
        """Only tunable FMU parameters take another value in a forked run (set into the restored FMU state)."""
        if name in OWN_DEFAULTS:
            return "it is a setting of the FMU component, fixed once it started"
        var = self.fmu.model.variables.get(name) if self.fmu is not None else None
        if var is not None and var.variability != "tunable":
            return f"it is a {var.variability} FMU parameter (only tunable ones can change after the start)"
        return None

    def _no_checkpoint(self) -> str:
        interface = self.fmu.interface if self.fmu is not None else None
        if interface is not None and interface.kind != "cs":
            why = "a model-exchange FMU's state is not checkpointed (run it as co-simulation)"
        elif interface is not None and not interface.can_rollback:
            why = "its FMU cannot get its state (canGetAndSetFMUstate is false)"
        else:
            why = "its FMU cannot serialize its state (canSerializeFMUstate is false)"
        return f"{self._where()} cannot be checkpointed: {why}"

    def checkpoint_state(self) -> dict[str, Any]:
        """Time, ports and the FMU state as bytes (``fmi2GetFMUstate`` then ``fmi2SerializeFMUstate``; the FMI 3
        functions for an FMI 3 FMU)."""
        if not self.can_checkpoint:
            raise ComponentStateError(self._no_checkpoint(), component=self.name)
        snapshot = self.snapshot_state()
        try:
            data = snapshot.instance.serialize(snapshot.state)
        except FMUError as exc:
            raise FMUError(f"{self._where()}: {exc} at t={self.t:.12g}", component=self.name, time=self.t) from None
        state = self._ports_checkpoint()
        state["fmu_state"] = np.frombuffer(data, dtype=np.uint8).copy()
        return state

    def restore_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Return to *state*: the FMU state deserialized and set (``fmi2DeSerializeFMUstate``,
        ``fmi2SetFMUstate``), then time and ports."""
        if not self.can_checkpoint:
            raise ComponentStateError(self._no_checkpoint(), component=self.name)
        fmu = self.fmu
        assert fmu is not None
        inst = fmu.handle
        if inst is None:
            raise ComponentStateError(f"{self._where()}: call initialize(t0) before restoring a checkpoint",
                                      component=self.name)
        data = np.asarray(state["fmu_state"], dtype=np.uint8).tobytes()
        try:
            handle = inst.deserialize(data)
        except FMUError as exc:
            raise FMUError(f"{self._where()}: {exc}", component=self.name) from None
        try:
            fname = "fmi3SetFMUState" if fmu.fmi3 else "fmi2SetFMUstate"
            status = inst.f[fname](inst.c, handle)
            if status > 1:
                raise FMUError(f"{self._where()}: {fname} returned {status} restoring a checkpoint",
                               component=self.name)
        finally:
            inst.free_state(handle)
        self._restore_ports_checkpoint(state)

    # ------------------------------------------------------------------ physical state
    def get_state(self) -> dict[str, Any]:
        """``{state: {'value', 'unit'}}`` of the state variables (read from the FMU once initialized)."""
        names = [name for name, _ in self._state_vars]
        variables = [v for _, v in self._state_vars]
        fmu = self.fmu
        if fmu is not None and fmu.handle is not None:
            values = fmu.get_values(variables)
        else:
            start = fmu.values.start_values if fmu is not None else {}
            values = [start.get(v.name, v.start) for v in variables]
        return {n: {"value": None if x is None else float(x), "unit": v.unit}
                for n, v, x in zip(names, variables, values, strict=True)}

    def set_state(self, state: Mapping[str, Any], t: float) -> None:
        """Set every state variable (``{name: {'value', 'unit'}}``, numbers or quantities) at time *t*.

        Once initialized this re-instantiates the FMU at *t* with the states as
        start values (FMI 2.0 lets a co-simulation master set them only before
        initialization); snapshots taken before cannot be restored afterwards.
        """
        check_state_names(state, [name for name, _ in self._state_vars], self._where(), self.name)
        values: dict[str, float] = {}
        for name, var in self._state_vars:
            entry = state[name]
            if isinstance(entry, Mapping):
                if "value" not in entry:
                    raise ConfigError(name, f"{self._where()}: state {name!r} entry has no 'value'")
                value, unit = entry["value"], entry.get("unit")
                if unit is not None and not isinstance(value, (str, pint.Quantity)):
                    value = Q_(float(value), unit)
                entry = value
            values[var.name] = convert(var, entry, f"{self._where()}: state {name!r}", name)
        assert self.fmu is not None
        if not self._is_initialized:  # they become start values, like the 'start' setting
            self.fmu.values.start_values.update(values)
            return
        self._start_instance(t, values)
        self.t = float(t)
        self._read_outputs()

    def _read_outputs(self) -> None:
        """Read every output from the FMU now, between steps."""
        self._update_output_states(self.t)

    # ------------------------------------------------------------------ end of life
    def reset(self) -> None:
        """Forget time and history; the FMU instance is freed and re-created by the next initialize."""
        super().reset()
        self._free_instance()
        start = self.fmu.values.start_values if self.fmu is not None else {}
        for name, port in self.inputs.items():
            var = self._port_vars.get(name)
            if var is not None and var.start is not None:
                port.value = start.get(var.name, var.start)

    def free(self) -> None:
        """Terminate and free the FMU instance, unload its library and release the extracted files.

        Histories stay readable; the component can be initialized again later.
        """
        self._unbind()
        if self.fmu is not None:
            self.fmu.unload()
        self._is_initialized = False
