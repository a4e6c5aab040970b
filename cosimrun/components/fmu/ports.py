"""The FMU component's ports, feedthrough, physical state and event indicators, from the model description.

Ports that share one FMU value (aliases: FMI 2 variables with one value
reference, FMI 3 ``<Alias>`` elements) are set and read once through the port
of the variable itself; the others follow it (:meth:`FMUPorts._value_ports`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from cosimrun.components.fmu.base import FMUBase
from cosimrun.components.fmu.step import nothing
from cosimrun.core.component import CoSimComponent
from cosimrun.core.ports import PortSpec, PortState, PortType
from cosimrun.errors import UnknownNameError
from cosimrun.fmi.description import FMUVariable

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
        self._alias_push: Callable[[], None] = nothing
        """Before inputs are set: the value of an input given through one of its aliases (see :meth:`_value_ports`)."""
        self._alias_pull: Callable[[], None] = nothing
        """After outputs are read: the aliases of each output (see :meth:`_value_ports`)."""

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
        for var in by_port.values():
            if var.causality == "input" and var.converted and not any(
                    v.slot == var.slot and not v.converted for v in model.inputs):
                raise ValueError(f"{where}: input {var.name!r} is a negated alias or an alias in another unit of a "
                                 "value that no input of the FMU carries as it is; cosimrun cannot set it")
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

    def _value_ports(self) -> tuple[list[tuple[PortState, FMUVariable]], list[tuple[PortState, FMUVariable]]]:
        """The ports the FMI calls set (inputs) and read (outputs), one per FMU value, with their variables.

        Where ports share a value (aliases), the port of the variable itself
        (unconverted) is the one set and read; an output value that only
        converted aliases carry is read into a port of its own outside
        :attr:`outputs`. This also compiles :attr:`_alias_pull` (each alias
        output from its value, converted: ``scale * value + offset``, negated)
        and :attr:`_alias_push`: an alias input changed since the last push
        gives the input its value (converted back, with its derivatives), and
        all ports of the value then show it; when both change, the variable's
        own port wins. Called when the instance is bound, with the ports' current
        values as the last pushed.
        """
        ins: list[tuple[PortState, FMUVariable]] = []
        outs: list[tuple[PortState, FMUVariable]] = []
        in_groups: list[tuple[PortState, list[tuple[PortState, FMUVariable]]]] = []
        out_copies: list[tuple[PortState, PortState, FMUVariable]] = []
        for states, chosen in ((self.inputs, ins), (self.outputs, outs)):
            for members in self._slots(states):
                own = next(((states[n], v) for n, v in members if not v.converted), None)
                if own is None:  # an output only converted aliases carry (inputs are refused in _rebuild)
                    var = members[0][1]
                    own = (PortState(PortSpec(var.name, var.port_type, "out")), var)
                chosen.append(own)
                others = [(states[n], v) for n, v in members if states[n] is not own[0]]
                if states is self.inputs and others:
                    in_groups.append((own[0], others))
                elif others:
                    out_copies.extend((own[0], port, var) for port, var in others)
        self._alias_pull = _alias_puller(out_copies)
        self._alias_push = _alias_pusher(in_groups)
        return ins, outs

    def _slots(self, ports: Mapping[str, Any]) -> list[list[tuple[str, FMUVariable]]]:
        """The ports among *ports* (names) by the FMU value they carry, each ``(name, variable)``, in port order;
        the first unconverted one of a value is the one set or read (see :meth:`_value_ports`)."""
        slots: dict[tuple[str, int, int], list[tuple[str, FMUVariable]]] = {}
        for name, var in self._port_vars.items():
            if name in ports:
                slots.setdefault(var.slot, []).append((name, var))
        return list(slots.values())

    def _initialize_ports_from_specs(self) -> None:
        """Inputs start at their start values (the ``start`` setting, else the model's)."""
        for name, spec in self.input_specs.items():
            if name not in self.inputs:
                var = self._port_vars[name]
                self.inputs[name] = PortState(spec, self._start_values.get(var.name, var.start))
        super()._initialize_ports_from_specs()


def _alias_puller(copies: list[tuple[PortState, PortState, FMUVariable]]) -> Callable[[], None]:
    """Set each alias output from the port its value was read into (``(source, alias, variable)``)."""
    if not copies:
        return nothing
    same = [(src, dst) for src, dst, var in copies if not var.converted]
    converted = [(src, dst, var.to_port) for src, dst, var in copies if var.converted]

    def pull() -> None:
        for src, dst in same:
            dst.value = src.value
        for src, dst, convert in converted:
            dst.value = convert(src.value)

    return pull


def _alias_pusher(groups: list[tuple[PortState, list[tuple[PortState, FMUVariable]]]]) -> Callable[[], None]:
    """Give each input with aliases the value of whichever of its ports changed since the last call (``(input,
    [(alias port, alias variable)])``); all its ports then show that value."""
    if not groups:
        return nothing
    compiled = []
    for own, others in groups:
        aliases = [(port, var.from_port, 1.0 / var.scale, var.to_port) for port, var in others]
        for port, _, _, from_value in aliases:
            port.value = from_value(own.value)
        compiled.append((own, aliases, [own.value, *(port.value for port, *_ in aliases)]))

    def push() -> None:
        for own, aliases, last in compiled:
            if own.value == last[0]:
                for i, (port, to_value, factor, _) in enumerate(aliases, 1):
                    if port.value != last[i]:
                        own.value = to_value(port.value)
                        own.derivatives = tuple(factor * d for d in port.derivatives)
                        break
                else:
                    continue
            last[0] = own.value
            for i, (port, _, _, from_value) in enumerate(aliases, 1):
                port.value = last[i] = from_value(own.value)

    return push
