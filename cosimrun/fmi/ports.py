"""An FMU's ports, feedthrough and physical state from its model description, and the ports behind its values.

Ports that share one FMU value (aliases: FMI 2 variables with one value
reference, FMI 3 ``<Alias>`` elements) are set and read once through the port
of the variable itself; the others follow it (:meth:`PortMap.value_ports`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cosimrun.core.ports import PortSpec, PortState, PortType
from cosimrun.errors import ConfigError, UnknownNameError
from cosimrun.fmi.model import FMUModel, FMUVariable
from cosimrun.fmi.values import nothing

_log = logging.getLogger("cosimrun.fmu")

EVENT_KEYS = ("port", "direction", "level", "abs")
"""The keys of an ``events`` entry."""


@dataclass(frozen=True, slots=True)
class ValuePorts:
    """The ports the FMI calls set and read, one per FMU value, and what keeps their aliases in step."""

    inputs: list[tuple[PortState, FMUVariable]]
    outputs: list[tuple[PortState, FMUVariable]]
    alias_push: Callable[[], None]
    """Before inputs are set: the value of an input given through one of its aliases."""
    alias_pull: Callable[[], None]
    """After outputs are read: the aliases of each output."""


class PortMap:
    """The ports of *model* under the ``aliases`` and ``states`` settings (*where* names the component in errors).

    ``input_specs``/``output_specs`` are the ports, ``port_vars`` the FMU
    variable behind each, ``feedthrough`` the direct feedthrough by port and
    ``state_vars`` the physical state (``(name, variable)`` in ``get_state``
    order: the ``states`` setting, else the variables with a ``derivative``).
    """

    def __init__(self, model: FMUModel, where: str, aliases: Mapping[str, Any],
                 states: Sequence[str] | None) -> None:
        self.model = model
        renamed: dict[str, str] = {}
        port_vars = {v.name: v for v in (*model.inputs, *model.outputs)}
        for var_name, port in aliases.items():
            if var_name not in port_vars:
                raise UnknownNameError("input or output", var_name, port_vars, f"in 'aliases' of {where}",
                                       key=f"aliases.{var_name}")
            renamed[var_name] = str(port)
        in_specs: dict[str, PortSpec] = {}
        out_specs: dict[str, PortSpec] = {}
        by_port: dict[str, FMUVariable] = {}
        for var in (*model.inputs, *model.outputs):
            port = renamed.get(var.name, var.name)
            if port in by_port:
                raise ConfigError("aliases", f"{where}: variables {by_port[port].name!r} and {var.name!r} would both "
                                             f"be port {port!r}; give one of them another name in 'aliases'")
            if not port or "/" in port:
                raise ConfigError("aliases", f"{where}: FMU variable {var.name!r} cannot be a port name (no '/' "
                                             f"allowed); rename it with aliases: {{{var.name!r}: new_name}}")
            if var.unit_problem is not None:
                _log.warning("%s: %s; port %r has no unit (give it one with the component's 'units' setting)",
                             where, var.unit_problem, port)
            direction = "in" if var.causality == "input" else "out"
            spec = PortSpec(port, var.port_type, direction, var.unit, var.description)
            (in_specs if direction == "in" else out_specs)[port] = spec
            by_port[port] = var
        self.input_specs, self.output_specs = in_specs, out_specs
        self.port_vars = by_port
        """Port name -> the FMU input or output variable behind it."""
        self.var_ports = ports = {v.name: p for p, v in by_port.items()}
        for var in by_port.values():
            if var.causality == "input" and var.converted and not any(
                    v.slot == var.slot and not v.converted for v in model.inputs):
                raise ConfigError(None, f"{where}: input {var.name!r} is a negated alias or an alias in another "
                                        "unit of a value that no input of the FMU carries as it is; cosimrun cannot "
                                        "set it")
        self.feedthrough = {
            ports[out.name]: {ports[i] for i in model.feedthrough.get(out.name, ())} for out in model.outputs
        }
        if states is not None:
            chosen = []
            for key in states:
                var = model.variables.get(key) or by_port.get(key)
                if var is None:
                    raise UnknownNameError("variable", key, model.variables, f"in 'states' of {where}", key="states")
                if var.type != "Real":
                    raise ConfigError("states", f"{where}: state {key!r} must be a Real variable, not {var.type}")
                chosen.append(var)
        else:
            chosen = model.states
        self.state_vars = self.named(chosen)

    def named(self, variables: Sequence[FMUVariable]) -> list[tuple[str, FMUVariable]]:
        """``(name, variable)`` of *variables*: a variable's port name where it is a port."""
        return [(self.var_ports.get(v.name, v.name), v) for v in variables]

    def slots(self, ports: Mapping[str, Any]) -> list[list[tuple[str, FMUVariable]]]:
        """The ports among *ports* (names) by the FMU value they carry, each ``(name, variable)``, in port order;
        the first unconverted one of a value is the one set or read (see :meth:`value_ports`)."""
        slots: dict[tuple[str, int, int], list[tuple[str, FMUVariable]]] = {}
        for name, var in self.port_vars.items():
            if name in ports:
                slots.setdefault(var.slot, []).append((name, var))
        return list(slots.values())

    def value_ports(self, inputs: Mapping[str, PortState], outputs: Mapping[str, PortState]) -> ValuePorts:
        """The ports the FMI calls set (inputs) and read (outputs), one per FMU value, with their variables.

        Where ports share a value (aliases), the port of the variable itself
        (unconverted) is the one set and read; an output value that only
        converted aliases carry is read into a port of its own outside
        *outputs*. This also compiles ``alias_pull`` (each alias output from
        its value, converted: ``scale * value + offset``, negated) and
        ``alias_push``: an alias input changed since the last push gives the
        input its value (converted back, with its derivatives), and all ports
        of the value then show it; when both change, the variable's own port
        wins. Called when the instance is bound, with the ports' current values
        as the last pushed.
        """
        ins: list[tuple[PortState, FMUVariable]] = []
        outs: list[tuple[PortState, FMUVariable]] = []
        in_groups: list[tuple[PortState, list[tuple[PortState, FMUVariable]]]] = []
        out_copies: list[tuple[PortState, PortState, FMUVariable]] = []
        for states, chosen in ((inputs, ins), (outputs, outs)):
            for members in self.slots(states):
                own = next(((states[n], v) for n, v in members if not v.converted), None)
                if own is None:  # an output only converted aliases carry (inputs are refused in __init__)
                    var = members[0][1]
                    own = (PortState(PortSpec(var.name, var.port_type, "out")), var)
                chosen.append(own)
                others = [(states[n], v) for n, v in members if states[n] is not own[0]]
                if states is inputs and others:
                    in_groups.append((own[0], others))
                elif others:
                    out_copies.extend((own[0], port, var) for port, var in others)
        return ValuePorts(ins, outs, _alias_pusher(in_groups), _alias_puller(out_copies))


def event_indicator(where: str, name: str, spec: Any, outputs: Mapping[str, PortSpec]) -> tuple[str, int, float, bool]:
    """``(port, direction, level, abs)`` of the ``events`` entry *name*: the indicator ``(|y| if abs else y) -
    level`` of output *port* (*outputs*: the output ports; *where* names the component)."""
    where = f"{where}: event {name!r}"
    key = f"events.{name}"
    if isinstance(spec, str):
        spec = {"port": spec}
    if not isinstance(spec, Mapping):
        raise ConfigError(key, f"{where}: write {{port: NAME, direction: -1|0|1, level: 0.0, abs: false}}, "
                               f"got {spec!r}")
    extra = set(spec) - set(EVENT_KEYS)
    if extra or "port" not in spec:
        raise ConfigError(key, f"{where}: keys are port (required), direction, level and abs; got {sorted(spec)}")
    port = str(spec["port"])
    out = outputs.get(port)
    if out is None:
        raise UnknownNameError("output", port, outputs, f"for {where}", key=f"{key}.port")
    if out.type is PortType.STRING:
        raise ConfigError(f"{key}.port", f"{where}: output {port!r} is a string; an event indicator needs a number")
    direction = spec.get("direction", 0)
    if direction not in (-1, 0, 1) or isinstance(direction, bool):
        raise ConfigError(f"{key}.direction", f"{where}: direction must be -1 (falling), 0 (both) or 1 (rising), "
                                              f"got {direction!r}")
    level = spec.get("level", 0.0)
    if isinstance(level, bool) or not isinstance(level, (int, float)):
        raise ConfigError(f"{key}.level", f"{where}: level must be a number, got {level!r}")
    use_abs = spec.get("abs", False)
    if not isinstance(use_abs, bool):
        raise ConfigError(f"{key}.abs", f"{where}: abs must be true or false, got {use_abs!r}")
    return port, int(direction), float(level), use_abs


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
