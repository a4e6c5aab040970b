"""The FMU component's ports, feedthrough, physical state and event indicators, from the model description."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from cosimrun.components.fmu.base import FMUBase
from cosimrun.components.fmu.description import FMUVariable
from cosimrun.core.component import CoSimComponent
from cosimrun.core.ports import PortSpec, PortState, PortType
from cosimrun.errors import UnknownNameError

_log = logging.getLogger("cosimrun.fmu")


class FMUPorts(FMUBase):
    """Ports: declared by :meth:`_rebuild` whenever the model or the ``aliases``/``states``/``events`` change."""

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self._port_vars: dict[str, FMUVariable] = {}
        """Port name -> the FMU input or output variable behind it."""
        self._var_ports: dict[str, str] = {}
        self._state_vars: list[tuple[str, FMUVariable]] = []
        """The physical state: (name, variable) in ``get_state`` order."""

    @property
    def state_names(self) -> tuple[str, ...]:
        """Names of the physical state (``get_state`` keys)."""
        return tuple(name for name, _ in self._state_vars)

    def _rebuild(self) -> None:
        """Declare ports, feedthrough, states and event indicators from the model and the settings."""
        model = self.model
        assert model is not None
        where = self._where()
        aliases: dict[str, str] = {}
        port_vars = {v.name: v for v in (*model.inputs, *model.outputs)}
        for var_name, port in self.parameters["aliases"].items():
            if var_name not in port_vars:
                raise UnknownNameError("input or output", var_name, port_vars, f"in 'aliases' of {where}",
                                       key=f"aliases.{var_name}")
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
                    raise UnknownNameError("variable", key, model.variables, f"in 'states' of {where}", key="states")
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
        """The indicator ``(|y| if abs else y) - level`` of output *port* of the ``events`` entry *name*."""
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
            raise UnknownNameError("output", port, self.output_specs, f"for {where}", key=f"events.{name}.port")
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

    def _initialize_ports_from_specs(self) -> None:
        """Inputs start at their start values (the ``start`` setting, else the model's)."""
        for name, spec in self.input_specs.items():
            if name not in self.inputs:
                var = self._port_vars[name]
                self.inputs[name] = PortState(spec, self._start_values.get(var.name, var.start))
        super()._initialize_ports_from_specs()
