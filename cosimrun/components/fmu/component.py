"""FMUComponent: an FMI 2.0 co-simulation FMU as a cosimrun component, and its compiled step path.

The component takes its ports, parameters, feedthrough and state from the
model description (:mod:`~cosimrun.components.fmu.description`), shares the
extracted files (:mod:`~cosimrun.components.fmu.extraction`) and calls the
FMU's library through ctypes (:mod:`~cosimrun.components.fmu.fmi2`). A step
is one compiled function around the three FMI calls (:meth:`FMUComponent._bind`
with the pushers and pullers at the end of this module).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pint

from cosimrun.components.fmu.build import resolve_example
from cosimrun.components.fmu.description import FMUModel, FMUVariable, read_fmu
from cosimrun.components.fmu.errors import FMUError, status_name
from cosimrun.components.fmu.extraction import Extraction, acquire_extraction, release_extraction
from cosimrun.components.fmu.fmi2 import (
    C_TYPES,
    FMI2_COSIMULATION,
    FMI2_LAST_SUCCESSFUL_TIME,
    GETTERS,
    SETTERS,
    Instance,
    Snapshot,
    callbacks,
    fast_functions,
    from_c,
    raw_functions,
    register_log_sink,
)
from cosimrun.core.component import NO_EVENTS, CoSimComponent
from cosimrun.core.ports import PortSpec, PortState, PortType
from cosimrun.core.units import Q_, compile_conversion
from cosimrun.errors import unknown_name

_log = logging.getLogger("cosimrun.fmu")

_OWN_DEFAULTS: dict[str, Any] = {
    "path": None,
    "aliases": {},
    "start": {},
    "events": {},
    "states": None,
    "tolerance": None,
    "logging": False,
}
"""The component's own parameters (everything else comes from the FMU)."""

_STRUCTURAL = ("aliases", "events", "states")


class FMUComponent(CoSimComponent):
    """An FMI 2.0 co-simulation FMU (``path`` names the .fmu; its parameters become component parameters).

    Own parameters: ``path`` (the FMU file; ``example:NAME`` builds a shipped
    example), ``aliases`` (FMU variable -> port name), ``start`` (start values of
    variables by name), ``events`` (event name -> ``{port, direction, level,
    abs}``: indicator ``(|y| if abs else y) - level`` on an output), ``states``
    (variables that form the physical state; default: those with a
    ``derivative``), ``tolerance`` (passed to ``fmi2SetupExperiment``) and
    ``logging`` (FMU debug logging). See :mod:`cosimrun.components.fmu`.
    """

    FIRST_PARAMETERS: ClassVar[tuple[str, ...]] = ("path",)
    """Parameters a config builder should apply before the others (they define the rest)."""

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.parameters.update({k: (dict(v) if isinstance(v, dict) else v) for k, v in _OWN_DEFAULTS.items()})
        self.model: FMUModel | None = None
        self._pending: dict[str, Any] = {}
        self._fmu_values: dict[str, Any] = {}
        """FMU parameters set by the user: variable name -> value in the FMU's unit."""
        self._port_vars: dict[str, FMUVariable] = {}
        self._var_ports: dict[str, str] = {}
        self._state_vars: list[tuple[str, FMUVariable]] = []
        self._start_values: dict[str, Any] = {}
        """Values of the 'start' setting: variable name -> value in the FMU's unit."""
        self._slave: Any = None
        self._functions: dict[str, Any] = {}
        self._extraction: Extraction | None = None
        self._instance: Instance | None = None
        self._messages: deque[str] = deque(maxlen=20)
        self._env = register_log_sink(self._messages)
        self._cb: Any = None
        self._push_all: Callable[[], None] = _nothing
        self._pull_all: Callable[[], None] = _nothing
        self._push_on_read = False
        self._fast_step: Callable[[float, float], None] = self._not_running

    # ------------------------------------------------------------------ descriptions
    @property
    def fmu_label(self) -> str:
        """The FMU file name (or ``no FMU`` before ``path`` is set)."""
        return self.model.label if self.model is not None else "no FMU"

    def _where(self) -> str:
        return f"FMU component {self.name!r} ({self.fmu_label})"

    def _log_tail(self) -> str:
        if not self._messages:
            return ""
        return "; FMU log: " + " | ".join(list(self._messages)[-5:])

    # ------------------------------------------------------------------ parameters
    def set_parameters(self, **parameters: Any) -> None:
        """Set parameters by name; ``path`` is applied first, so it may come in any position.

        Names other than the component's own are FMU parameters; before ``path``
        is known they are kept and checked when it is set.
        """
        if "path" in parameters:
            self._set_path(parameters.pop("path"))
        if self.model is not None:
            for name in parameters:
                if name not in self.parameters:
                    raise KeyError(self._unknown(name))
        for name, value in parameters.items():
            self._set_one(name, value)

    def _unknown(self, name: str, note: str = "") -> str:
        return unknown_name("parameter", name, self.parameters, f"of {self._where()}{note}")

    def _set_one(self, name: str, value: Any) -> None:
        if name in _OWN_DEFAULTS:
            self._check_structural_change(name)
            self.parameters[name] = self._validate_own(name, value)
            if self.model is not None and name in _STRUCTURAL:
                self._rebuild()
            elif name == "start" and self.model is not None:
                self._apply_start(self.parameters["start"])
            return
        if self.model is None:
            self._pending[name] = value
            return
        var = self.model.variables.get(name)
        if var is None or name not in self.parameters:
            raise KeyError(self._unknown(name))
        converted = self._convert(var, value, f"parameter {name!r}")
        if self._is_initialized and self._instance is not None:
            if var.variability != "tunable":
                raise ValueError(
                    f"{self._where()}: parameter {name!r} is {var.variability}; it can only change before "
                    "initialize (or after reset); tunable parameters can change during a run"
                )
            self._set_values([(var, converted)])
        self.parameters[name] = converted
        self._fmu_values[name] = converted

    def _check_structural_change(self, name: str) -> None:
        if self._is_initialized and name in ("path", *_STRUCTURAL, "start", "tolerance"):
            raise ValueError(f"{self._where()}: parameter {name!r} can only change before initialize (or after reset)")

    def _validate_own(self, name: str, value: Any) -> Any:
        where = self._where()
        if name in ("aliases", "start", "events"):
            if value is None:
                return {}
            if not isinstance(value, Mapping):
                raise ValueError(f"{where}: parameter {name!r} must be a mapping, got {value!r}")
            return {str(k): v for k, v in value.items()}
        if name == "states":
            if value is None:
                return None
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise ValueError(f"{where}: parameter 'states' must be a list of variable names, got {value!r}")
            return [str(v) for v in value]
        if name == "tolerance":
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{where}: parameter 'tolerance' must be a number > 0 (or null), got {value!r}")
            return float(value)
        if name == "logging":
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{where}: parameter 'logging' must be true or false, got {value!r}")
            return bool(value)
        return value

    def _set_path(self, value: Any) -> None:
        self._check_structural_change("path")
        if value is None:
            self._unload()
            self.model = None
            self.parameters["path"] = None
            return
        if not isinstance(value, (str, os.PathLike)):
            raise ValueError(f"{self._where()}: parameter 'path' must name an FMU file, got {value!r}")
        text = os.fspath(value)
        try:
            file = resolve_example(text[len("example:"):]) if text.startswith("example:") else Path(text)
            model = read_fmu(file)
        except (ValueError, FMUError) as exc:
            raise ValueError(f"component {self.name!r}: parameter 'path': {exc}") from None
        if self.model is not None and model is not self.model:
            self._unload()
        own = {k: self.parameters[k] for k in _OWN_DEFAULTS}
        previous = {k: v for k, v in self.parameters.items() if k not in _OWN_DEFAULTS}
        self.model = model
        self.parameters = {**own, "path": text}
        for var in model.parameters:
            if var.name in _OWN_DEFAULTS:
                _log.warning("%s: FMU parameter %r is shadowed by the component setting of that name; set it "
                             "through 'start: {%s: ...}'", self._where(), var.name, var.name)
                continue
            self.parameters[var.name] = var.start
        self._fmu_values = {k: v for k, v in self._fmu_values.items() if k in model.variables}
        for name, value in previous.items():
            if name in self.parameters and name in self._fmu_values:
                self.parameters[name] = value
        self._rebuild()
        self._apply_start(self.parameters["start"])
        pending, self._pending = self._pending, {}
        for name, value in pending.items():
            if name not in self.parameters:
                raise KeyError(self._unknown(name, " (set before 'path')"))
            self._set_one(name, value)

    def _apply_start(self, start: Mapping[str, Any]) -> None:
        assert self.model is not None
        variables = self.model.variables
        values = {}
        for key, value in start.items():
            var = variables.get(key)
            if var is None and key in self._port_vars:
                var = self._port_vars[key]
            if var is None:
                raise KeyError(unknown_name("variable", key, variables, f"in 'start' of {self._where()}"))
            if not var.settable_start:
                raise ValueError(
                    f"{self._where()}: the start value of {var.name!r} cannot be set "
                    f"(causality {var.causality}, variability {var.variability}, initial {var.initial})"
                )
            values[var.name] = self._convert(var, value, f"start value of {var.name!r}")
        self._start_values = values

    # ------------------------------------------------------------------ value conversion
    def _convert(self, var: FMUVariable, value: Any, what: str) -> Any:
        """*value* checked for *var*'s type and range; quantities are converted to its unit."""
        where = f"{self._where()}: {what}"
        if isinstance(value, np.generic):
            value = value.item()
        if var.type == "Real":
            try:
                if isinstance(value, str):
                    value = Q_(value)
                if isinstance(value, pint.Quantity):
                    magnitude = float(value.magnitude)
                    value = magnitude if value.unitless else compile_conversion(f"{value.units}", var.unit)(magnitude)
            except (pint.PintError, ValueError, TypeError, AttributeError) as exc:
                raise ValueError(f"{where} [{var.unit or 'no unit'}]: {exc}") from None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{where} must be a finite number (or a quantity like '2 m'), got {value!r}")
            value = float(value)
        elif var.type in ("Integer", "Enumeration"):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{where} must be an integer, got {value!r}")
        elif var.type == "Boolean":
            if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
                value = bool(value)
            if not isinstance(value, bool):
                raise ValueError(f"{where} must be true or false, got {value!r}")
        elif not isinstance(value, str):
            raise ValueError(f"{where} must be a string, got {value!r}")
        if var.minimum is not None and value < var.minimum:
            raise ValueError(f"{where} must be >= {var.minimum:g} (the FMU's min), got {value!r}")
        if var.maximum is not None and value > var.maximum:
            raise ValueError(f"{where} must be <= {var.maximum:g} (the FMU's max), got {value!r}")
        return value

    # ------------------------------------------------------------------ ports from the model description
    def _rebuild(self) -> None:
        """Declare ports, feedthrough, states and event indicators from the model and the settings."""
        model = self.model
        assert model is not None
        where = self._where()
        aliases: dict[str, str] = {}
        port_vars = {v.name: v for v in (*model.inputs, *model.outputs)}
        for var_name, port in self.parameters["aliases"].items():
            if var_name not in port_vars:
                raise KeyError(unknown_name("input or output", var_name, port_vars, f"in 'aliases' of {where}"))
            aliases[var_name] = str(port)
        in_specs: dict[str, PortSpec] = {}
        out_specs: dict[str, PortSpec] = {}
        by_port: dict[str, FMUVariable] = {}
        for var in (*model.inputs, *model.outputs):
            port = aliases.get(var.name, var.name)
            if port in by_port:
                raise ValueError(f"{where}: variables {by_port[port].name!r} and {var.name!r} would both be port "
                                 f"{port!r}; give one of them another name in 'aliases'")
            if not port or "/" in port:
                raise ValueError(f"{where}: FMU variable {var.name!r} cannot be a port name (no '/' allowed); "
                                 f"rename it with aliases: {{{var.name!r}: new_name}}")
            if var.unit_problem is not None:
                _log.warning("%s: %s; port %r has no unit (give it one with the component's 'units' setting)",
                             where, var.unit_problem, port)
            direction = "in" if var.causality == "input" else "out"
            spec = PortSpec(port, var.port_type, direction, var.unit, var.description)
            (in_specs if direction == "in" else out_specs)[port] = spec
            by_port[port] = var
        self.input_specs, self.output_specs = in_specs, out_specs
        self.inputs, self.outputs = {}, {}
        self._port_vars = by_port
        self._var_ports = {v.name: p for p, v in by_port.items()}
        ports = self._var_ports
        self.direct_feedthrough = {
            ports[out.name]: {ports[i] for i in model.feedthrough.get(out.name, ())} for out in model.outputs
        }
        self._detected_feedthrough = None
        if self.parameters["states"] is not None:
            states = []
            for key in self.parameters["states"]:
                var = model.variables.get(key) or by_port.get(key)
                if var is None:
                    raise KeyError(unknown_name("variable", key, model.variables, f"in 'states' of {where}"))
                if var.type != "Real":
                    raise ValueError(f"{where}: state {key!r} must be a Real variable, not {var.type}")
                states.append(var)
        else:
            states = model.states
        self._state_vars = [(ports.get(v.name, v.name), v) for v in states]
        self.event_indicators.clear()
        for name, spec in self.parameters["events"].items():
            self._add_event(str(name), spec)

    def _add_event(self, name: str, spec: Any) -> None:
        where = f"{self._where()}: event {name!r}"
        if isinstance(spec, str):
            spec = {"port": spec}
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where}: write {{port: NAME, direction: -1|0|1, level: 0.0, abs: false}}, got {spec!r}")
        extra = set(spec) - {"port", "direction", "level", "abs"}
        if extra or "port" not in spec:
            raise ValueError(f"{where}: keys are port (required), direction, level and abs; got {sorted(spec)}")
        port = str(spec["port"])
        out = self.output_specs.get(port)
        if out is None:
            raise KeyError(unknown_name("output", port, self.output_specs, f"for {where}"))
        if out.type is PortType.STRING:
            raise ValueError(f"{where}: output {port!r} is a string; an event indicator needs a number")
        direction = spec.get("direction", 0)
        if direction not in (-1, 0, 1) or isinstance(direction, bool):
            raise ValueError(f"{where}: direction must be -1 (falling), 0 (both) or 1 (rising), got {direction!r}")
        level = spec.get("level", 0.0)
        if isinstance(level, bool) or not isinstance(level, (int, float)):
            raise ValueError(f"{where}: level must be a number, got {level!r}")
        use_abs = spec.get("abs", False)
        if not isinstance(use_abs, bool):
            raise ValueError(f"{where}: abs must be true or false, got {use_abs!r}")
        if not self.supports_rollback:
            raise ValueError(self._no_event_source(name))
        level = float(level)

        def indicator(comp: CoSimComponent, port: str = port) -> float:
            value = float(comp.outputs[port].value)
            return (abs(value) if use_abs else value) - level

        super().add_event_indicator(name, indicator, int(direction))

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
            raise RuntimeError(self._no_event_source(name))
        super().add_event_indicator(name, func, direction)

    # ------------------------------------------------------------------ rollback support
    @property
    def supports_rollback(self) -> bool:
        """True when the FMU declares ``canGetAndSetFMUstate``."""
        return self.model is not None and self.model.can_rollback

    @property
    def state_names(self) -> tuple[str, ...]:
        """Names of the physical state (``get_state`` keys)."""
        return tuple(name for name, _ in self._state_vars)

    # ------------------------------------------------------------------ FMU lifecycle
    def _initialize_ports_from_specs(self) -> None:
        for name, spec in self.input_specs.items():
            if name not in self.inputs:
                var = self._port_vars[name]
                self.inputs[name] = PortState(spec, self._start_values.get(var.name, var.start))
        super()._initialize_ports_from_specs()

    def _load(self) -> None:
        """Extract the FMU (shared) and load its library once for this component."""
        if self._slave is not None:
            return
        from fmpy.fmi2 import FMU2Slave

        model = self.model
        assert model is not None
        self._extraction = acquire_extraction(model.path, private=model.only_once_per_process)
        try:
            self._slave = FMU2Slave(guid=model.guid, unzipDirectory=str(self._extraction.directory),
                                    modelIdentifier=model.identifier, instanceName=self.name)
            self._functions = raw_functions(self._slave.dll)
        except Exception as exc:
            release_extraction(self._extraction)
            self._extraction = None
            raise FMUError(f"{self._where()}: cannot load the FMU's shared library: {exc}") from exc

    def _unload(self) -> None:
        """Free the instance, unload the library and release the extraction."""
        self._free_instance()
        if self._slave is not None:
            with contextlib.suppress(Exception):
                self._slave.freeLibrary()
            self._slave = None
            self._functions = {}
        if self._extraction is not None:
            release_extraction(self._extraction)
            self._extraction = None

    def _free_instance(self) -> None:
        inst, self._instance = self._instance, None
        self._push_all = self._pull_all = _nothing
        self._fast_step = self._not_running
        if inst is None:
            return
        inst.alive = False
        with contextlib.suppress(Exception):
            inst.f["fmi2Terminate"](inst.c)
        with contextlib.suppress(Exception):
            inst.f["fmi2FreeInstance"](inst.c)

    def _call(self, name: str, *args: Any) -> None:
        inst = self._instance
        assert inst is not None
        status = inst.f[name](inst.c, *args)
        if status > 1:
            raise FMUError(f"{self._where()}: {name} returned {status_name(status)} at t={self.t:.12g}"
                           f"{self._log_tail()}")

    def _start_instance(self, t0: float, states: Mapping[str, float] | None = None) -> None:
        """Instantiate at *t0*, set parameters, start values and inputs, and leave initialization mode."""
        model = self.model
        assert model is not None
        self._load()
        self._free_instance()
        if self._cb is None:
            self._cb = callbacks(self._env)
        functions = self._functions
        resources = (self._extraction.directory / "resources").as_uri()  # type: ignore[union-attr]
        handle = functions["fmi2Instantiate"](
            self.name.encode(), FMI2_COSIMULATION, model.guid.encode(), resources.encode(),
            ctypes.addressof(self._cb), 0, 1 if self.parameters["logging"] else 0,
        )
        if not handle:
            raise FMUError(f"{self._where()}: fmi2Instantiate failed{self._log_tail()}")
        self._instance = Instance(functions, handle)
        tol = self.parameters["tolerance"]
        self._call("fmi2SetupExperiment", 1 if tol is not None else 0, tol or 0.0, float(t0), 0, 0.0)
        values: dict[str, tuple[FMUVariable, Any]] = {}
        for name, value in self._start_values.items():
            values[name] = (model.variables[name], value)
        for name, value in self._fmu_values.items():
            values[name] = (model.variables[name], value)
        for name, value in (states or {}).items():
            values[name] = (model.variables[name], value)
        self._set_values(list(values.values()))
        self._call("fmi2EnterInitializationMode")
        self._bind()
        self._push_all()
        self._call("fmi2ExitInitializationMode")

    def _set_values(self, items: list[tuple[FMUVariable, Any]]) -> None:
        """Set variables through ``fmi2Set*``, grouped by type."""
        inst = self._instance
        assert inst is not None
        for type_name in ("Real", "Integer", "Boolean", "String"):
            chosen = [(v, x) for v, x in items if v.type == type_name or (type_name == "Integer"
                                                                            and v.type == "Enumeration")]
            if not chosen:
                continue
            n = len(chosen)
            vr = (ctypes.c_uint * n)(*(v.vr for v, _ in chosen))
            raw = [x.encode() if type_name == "String" else x for _, x in chosen]
            buf = (C_TYPES[type_name] * n)(*raw)
            status = inst.f[SETTERS[type_name]](inst.c, vr, n, buf)
            if status > 1:
                names = ", ".join(v.name for v, _ in chosen)
                raise FMUError(f"{self._where()}: {SETTERS[type_name]} of {names} returned "
                               f"{status_name(status)}{self._log_tail()}")

    def _get_values(self, variables: Sequence[FMUVariable]) -> list[Any]:
        inst = self._instance
        assert inst is not None
        out = []
        for var in variables:
            vr = (ctypes.c_uint * 1)(var.vr)
            buf = (C_TYPES[var.type] * 1)()
            status = inst.f[GETTERS[var.type]](inst.c, vr, 1, buf)
            if status > 1:
                raise FMUError(f"{self._where()}: {GETTERS[var.type]} of {var.name} returned "
                               f"{status_name(status)}{self._log_tail()}")
            out.append(from_c(var.type, buf[0]))
        return out

    def _bind(self) -> None:
        """Compile the per-step input push and output pull.

        They call the FMU through function pointers without ctypes argument
        conversion (``argtypes``) on pre-built arguments of the exact C types:
        the value references, the sizes and the value buffers are allocated once
        here, so a step costs three foreign calls and no allocation besides the
        two ``c_double`` times.
        """
        inst = self._instance
        assert inst is not None
        fast = fast_functions(self._slave.dll)
        c = inst.c
        ins = [(self.inputs[p], v) for p, v in self._port_vars.items() if p in self.input_specs]
        outs = [(self.outputs[p], v) for p, v in self._port_vars.items() if p in self.output_specs]
        pushers: list[Callable[[], None]] = []
        pullers: list[Callable[[], None]] = []
        for kinds in (("Real",), ("Integer", "Enumeration"), ("Boolean",), ("String",)):
            group = _group(ins, kinds)
            if group is not None:
                pushers.append(_make_pusher(fast[SETTERS[kinds[0]]], c, *group, kinds[0], self._call_failed))
            group = _group(outs, kinds)
            if group is not None:
                pullers.append(_make_puller(fast[GETTERS[kinds[0]]], c, *group, kinds[0], self._call_failed))
        self._push_all = push_all = _chain(pushers)
        self._pull_all = pull_all = _chain(pullers)
        self._push_on_read = any(self.direct_feedthrough.values())
        do_step = fast["fmi2DoStep"]
        no_prior = ctypes.c_int(0 if self.model is not None and self.model.can_rollback else 1)
        t_c, dt_c = ctypes.c_double(), ctypes.c_double()
        step_failed = self._step_failed
        real_in, real_out = _group(ins, ("Real",)), _group(outs, ("Real",))
        only_real = len(pushers) == (real_in is not None) and len(pullers) == (real_out is not None)
        if only_real and real_in is not None and real_out is not None and real_in[3] == 1:
            # The common case (real ports, one input) with the FMI calls inline: no nested calls.
            vr_in, buf_in, (port_in,), _ = real_in
            vr_out, buf_out, ports_out, n_out = real_out
            set_real, get_real = fast["fmi2SetReal"], fast["fmi2GetReal"]
            one, size_out = ctypes.c_size_t(1), ctypes.c_size_t(n_out)
            failed = self._call_failed

            def step(t: float, dt: float) -> None:
                buf_in[0] = port_in.value
                status = set_real(c, vr_in, one, buf_in)
                if status > 1:
                    raise failed("fmi2SetReal", status)
                t_c.value = t
                dt_c.value = dt
                status = do_step(c, t_c, dt_c, no_prior)
                if status > 1:
                    step_failed(status, t, dt)
                status = get_real(c, vr_out, size_out, buf_out)
                if status > 1:
                    raise failed("fmi2GetReal", status)
                for port, value in zip(ports_out, buf_out[:], strict=True):
                    port.value = value
        else:
            def step(t: float, dt: float) -> None:
                push_all()
                t_c.value = t
                dt_c.value = dt
                status = do_step(c, t_c, dt_c, no_prior)
                if status > 1:
                    step_failed(status, t, dt)
                pull_all()

        self._fast_step = step

    def _not_running(self, *args: Any) -> None:
        raise RuntimeError(f"{self._where()}: the FMU is not instantiated; call initialize(t0) first "
                           "(after reset or free, too)")

    def _call_failed(self, fname: str, status: int) -> FMUError:
        return FMUError(f"{self._where()}: {fname} returned {status_name(status)} at t={self.t:.12g}"
                        f"{self._log_tail()}")

    def _initialize_component(self, t0: float) -> None:
        if self.model is None:
            raise ValueError(f"component {self.name!r} (type fmu): parameter 'path' is not set; "
                             "name an FMU file (params: {path: model.fmu})")
        self._start_instance(t0)

    # ------------------------------------------------------------------ stepping
    def do_step(self, t: float, dt: float) -> None:
        """Advance from *t* to *t + dt*: set the inputs, ``fmi2DoStep``, read the outputs, record them.

        The contract of :meth:`CoSimComponent.do_step`, written out so that a
        step is one compiled call around the three FMI calls (see :meth:`_bind`).
        """
        if not dt > 0.0:
            raise ValueError(f"component {self.name!r}: step size must be positive, got dt={dt!r} at t={t!r}")
        self._fast_step(t, dt)
        t = t + dt
        self.t = t
        if self._event_ports:
            for port in self._event_ports:
                port.value = False
        if self.record_history:
            for port, append_t, append_v in self._step_recorders:
                append_t(t)
                append_v(port.value)

    def _do_step_internal(self, t: float, dt: float) -> None:
        self._fast_step(t, dt)  # also reads the outputs: _update_output_states after it finds them fresh

    def _step_failed(self, status: int, t: float, dt: float) -> None:
        detail = ""
        if status == 2:
            try:
                last = ctypes.c_double()
                inst = self._instance
                assert inst is not None
                if inst.f["fmi2GetRealStatus"](inst.c, FMI2_LAST_SUCCESSFUL_TIME, ctypes.byref(last)) <= 1:
                    detail = f" (last successful time {last.value:.12g})"
            except Exception:
                pass
        raise FMUError(f"{self._where()}: fmi2DoStep from t={t:.12g} with step {dt:.6g} returned "
                       f"{status_name(status)}{detail}{self._log_tail()}")

    def _update_output_states(self, t: float | None = None, event_names: Sequence[str] = NO_EVENTS) -> None:
        # Inputs are set again first when an output depends on them directly: between two steps the
        # master may have changed them (loop iteration), and FMI 2.0 lets outputs be read after that.
        if self._push_on_read:
            self._push_all()
        self._pull_all()

    # ------------------------------------------------------------------ rollback
    def snapshot_state(self) -> Any:
        """Capture the FMU state (``fmi2GetFMUstate``), the time and the port values."""
        if not self.supports_rollback:
            raise NotImplementedError(
                f"{self._where()} does not support rollback (canGetAndSetFMUstate is false)")
        inst = self._instance
        if inst is None:
            raise RuntimeError(f"{self._where()}: call initialize(t0) before snapshot_state")
        state = ctypes.c_void_p()
        status = inst.f["fmi2GetFMUstate"](inst.c, ctypes.byref(state))
        if status > 1:
            raise FMUError(f"{self._where()}: fmi2GetFMUstate returned {status_name(status)} at "
                           f"t={self.t:.12g}{self._log_tail()}")
        ports = tuple((p, p.value) for p in (*self.inputs.values(), *self.outputs.values()))
        return Snapshot(inst, state, self.t, ports)

    def restore_state(self, snapshot: Any, t: float) -> None:
        """Return exactly to *snapshot* (``fmi2SetFMUstate``); ports get their values of that time."""
        if not isinstance(snapshot, Snapshot):
            raise TypeError(f"{self._where()}: not a snapshot of an FMU component: {snapshot!r}")
        inst = self._instance
        if snapshot.instance is not inst:
            raise ValueError(f"{self._where()}: the snapshot belongs to another FMU instance (taken before a "
                             "reset, set_state or free, or by another component); it cannot be restored")
        status = inst.f["fmi2SetFMUstate"](inst.c, snapshot.state)
        if status > 1:
            raise FMUError(f"{self._where()}: fmi2SetFMUstate returned {status_name(status)} at "
                           f"t={t:.12g}{self._log_tail()}")
        for port, value in snapshot.ports:
            port.value = value
        self.t = snapshot.t

    # ------------------------------------------------------------------ physical state
    def get_state(self) -> dict[str, Any]:
        """``{state: {'value', 'unit'}}`` of the state variables (read from the FMU once initialized)."""
        names = [name for name, _ in self._state_vars]
        variables = [v for _, v in self._state_vars]
        if self._instance is not None:
            values = self._get_values(variables)
        else:
            values = [self._start_values.get(v.name, v.start) for v in variables]
        return {n: {"value": None if x is None else float(x), "unit": v.unit}
                for n, v, x in zip(names, variables, values, strict=True)}

    def set_state(self, state: Mapping[str, Any], t: float) -> None:
        """Set every state variable (``{name: {'value', 'unit'}}``, numbers or quantities) at time *t*.

        Once initialized this re-instantiates the FMU at *t* with the states as
        start values (FMI 2.0 lets a co-simulation master set them only before
        initialization); snapshots taken before cannot be restored afterwards.
        """
        if not isinstance(state, Mapping):
            raise TypeError(f"{self._where()}: set_state expects a mapping, got {type(state).__name__}")
        known = dict(self._state_vars)
        for key in state:
            if key not in known:
                raise KeyError(unknown_name("state", key, known, f"of {self._where()}"))
        missing = [n for n in known if n not in state]
        if missing:
            raise KeyError(f"{self._where()}: set_state is missing state(s) {', '.join(missing)} "
                           f"(expected: {', '.join(known)})")
        values: dict[str, float] = {}
        for name, var in self._state_vars:
            entry = state[name]
            if isinstance(entry, Mapping):
                if "value" not in entry:
                    raise ValueError(f"{self._where()}: state {name!r} entry has no 'value'")
                value, unit = entry["value"], entry.get("unit")
                if unit is not None and not isinstance(value, (str, pint.Quantity)):
                    value = Q_(float(value), unit)
                entry = value
            values[var.name] = self._convert(var, entry, f"state {name!r}")
        if not self._is_initialized:  # they become start values, like the 'start' setting
            self._start_values.update(values)
            return
        self._start_instance(t, values)
        self.t = float(t)
        self._update_output_states(self.t, NO_EVENTS)

    # ------------------------------------------------------------------ lifecycle end
    def reset(self) -> None:
        """Forget time and history; the FMU instance is freed and re-created by the next initialize."""
        super().reset()
        self._free_instance()
        for name, port in self.inputs.items():
            var = self._port_vars.get(name)
            if var is not None and var.start is not None:
                port.value = self._start_values.get(var.name, var.start)

    def free(self) -> None:
        """Terminate and free the FMU instance, unload its library and release the extracted files.

        Histories stay readable; the component can be initialized again later.
        """
        self._unload()
        self._is_initialized = False

    def __del__(self) -> None:
        try:
            if self._extraction is not None:
                self._unload()
        except Exception:  # never raise from a finalizer
            pass


# ------------------------------------------------------------------ the compiled step path
def _group(ports: list[tuple[PortState, FMUVariable]], type_names: tuple[str, ...]) -> Any:
    """``(value references, buffer, ports, count)`` for the ports of the given FMI types, or ``None``."""
    chosen = [(p, v) for p, v in ports if v.type in type_names]
    if not chosen:
        return None
    n = len(chosen)
    vr = (ctypes.c_uint * n)(*(v.vr for _, v in chosen))
    buf = (C_TYPES[type_names[0]] * n)()
    return vr, buf, [p for p, _ in chosen], n


def _nothing() -> None:
    pass


def _chain(functions: list[Callable[[], None]]) -> Callable[[], None]:
    """One function calling *functions* in order (the function itself when there is one)."""
    if not functions:
        return _nothing
    if len(functions) == 1:
        return functions[0]

    def chained() -> None:
        for fn in functions:
            fn()

    return chained


def _make_pusher(fn: Any, c: ctypes.c_void_p, vr: Any, buf: Any, ports: list[PortState], n: int, type_name: str,
                 failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that copies the port values into *buf* and sets them in one FMI call."""
    size = ctypes.c_size_t(n)
    fname = SETTERS[type_name]
    if type_name == "String":
        def push() -> None:
            buf[:] = [str(p.value).encode() for p in ports]
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
    elif n == 1:
        port = ports[0]

        def push() -> None:
            buf[0] = port.value
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
    else:
        def push() -> None:
            buf[:] = [p.value for p in ports]
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
    return push


def _make_puller(fn: Any, c: ctypes.c_void_p, vr: Any, buf: Any, ports: list[PortState], n: int, type_name: str,
                 failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that reads the outputs in one FMI call and stores them in the ports."""
    size = ctypes.c_size_t(n)
    fname = GETTERS[type_name]
    if type_name in ("Boolean", "String"):
        def pull() -> None:
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
            for port, value in zip(ports, buf[:], strict=True):
                port.value = from_c(type_name, value)
    elif n == 1:
        port = ports[0]

        def pull() -> None:
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
            port.value = buf[0]
    else:
        def pull() -> None:
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
            for port, value in zip(ports, buf[:], strict=True):
                port.value = value
    return pull


